"""Protobuf messages of ``ray.rpc.autoscaler`` and of the GCS info services and the raylet
(``ray.rpc``) to ``rayscale.ray.model`` values, and back.

Pure functions; the only place that knows both representations.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from google.protobuf.descriptor import EnumDescriptor

from rayscale.ray import model
from rayscale.ray.wire import autoscaler_pb2 as pb
from rayscale.ray.wire import common_pb2 as common_pb
from rayscale.ray.wire import gcs_pb2 as gcs_pb
from rayscale.ray.wire import gcs_service_pb2 as service_pb
from rayscale.ray.wire import node_manager_pb2 as raylet_pb

__all__ = [
    "ACTOR_STATES",
    "JOB_SUBMISSION_ID",
    "NODE_ID_BYTES",
    "actor_info",
    "actor_info_request",
    "autoscaling_state_request",
    "cluster_state",
    "constraint_request",
    "drain_request",
    "gang_request",
    "job_info",
    "job_info_request",
    "node_id_bytes",
    "node_info",
    "node_info_request",
    "node_state",
    "parse_gang_details",
    "placement_group_info",
    "resize_request",
    "resource_demand",
    "resource_request",
]

NODE_ID_BYTES = 28  # Ray's NodeID size

_NODE_STATUS = {
    pb.UNSPECIFIED: model.NodeStatus.UNSPECIFIED,
    pb.RUNNING: model.NodeStatus.RUNNING,
    pb.IDLE: model.NodeStatus.IDLE,
    pb.DRAINING: model.NodeStatus.DRAINING,
    pb.DEAD: model.NodeStatus.DEAD,
}
_LABEL_OPERATOR = {
    common_pb.LABEL_OPERATOR_UNSPECIFIED: model.LabelOperator.UNSPECIFIED,
    common_pb.LABEL_OPERATOR_IN: model.LabelOperator.IN,
    common_pb.LABEL_OPERATOR_NOT_IN: model.LabelOperator.NOT_IN,
}
_LABEL_OPERATOR_PB = {v: k for k, v in _LABEL_OPERATOR.items()}
_STRATEGY = {
    common_pb.PACK: "PACK",
    common_pb.SPREAD: "SPREAD",
    common_pb.STRICT_PACK: "STRICT_PACK",
    common_pb.STRICT_SPREAD: "STRICT_SPREAD",
}
_STRATEGY_PB = {v: k for k, v in _STRATEGY.items()}
_DRAIN_REASON = {
    model.DrainReason.UNSPECIFIED: pb.DRAIN_NODE_REASON_UNSPECIFIED,
    model.DrainReason.IDLE_TERMINATION: pb.DRAIN_NODE_REASON_IDLE_TERMINATION,
    model.DrainReason.PREEMPTION: pb.DRAIN_NODE_REASON_PREEMPTION,
}


def _enum_names(enum: EnumDescriptor) -> dict[int, str]:
    return {value.number: value.name for value in enum.values}


_ACTOR_STATE = _enum_names(gcs_pb.ActorTableData.ActorState.DESCRIPTOR)
_PLACEMENT_GROUP_STATE = _enum_names(gcs_pb.PlacementGroupTableData.PlacementGroupState.DESCRIPTOR)
# The names `actor_info_request` takes, in Ray's order.
ACTOR_STATES: tuple[str, ...] = tuple(_ACTOR_STATE.values())
# The job config metadata key under which the job submission API records a job's submission id.
JOB_SUBMISSION_ID = "job_submission_id"
# GCS writes a placement group's `details` as "<id hex>:<STRATEGY>|<STATE>".
_GANG_DETAILS = re.compile(r"^(?P<id>[0-9a-fA-F]+):(?P<strategy>[A-Z_]+)(?:\|(?P<state>[A-Z_]+))?$")


# ---- proto -> model ----


def label_selector(msg: common_pb.LabelSelector) -> model.LabelSelector:
    return model.LabelSelector(
        tuple(
            model.GcsLabelConstraint(
                key=c.label_key,
                operator=_LABEL_OPERATOR.get(c.operator, model.LabelOperator.UNSPECIFIED),
                values=tuple(c.label_values),
            )
            for c in msg.label_constraints
        )
    )


def _placement_constraints(
    msgs: Iterable[pb.PlacementConstraint],
) -> tuple[model.PlacementConstraint, ...]:
    out: list[model.PlacementConstraint] = []
    for msg in msgs:
        if msg.HasField("anti_affinity"):
            a = msg.anti_affinity
            out.append(model.PlacementConstraint("anti_affinity", a.label_name, a.label_value))
        if msg.HasField("affinity"):
            b = msg.affinity
            out.append(model.PlacementConstraint("affinity", b.label_name, b.label_value))
    return tuple(out)


def resource_request(msg: pb.ResourceRequest) -> model.ResourceRequest:
    selectors = tuple(label_selector(s) for s in msg.label_selectors)
    if all(not s.constraints for s in selectors):
        selectors = ()  # the GCS sends one empty selector for "any node"
    return model.ResourceRequest(
        resources=dict(msg.resources_bundle),
        label_selectors=selectors,
        placement_constraints=_placement_constraints(msg.placement_constraints),
    )


def resource_demand(msg: pb.ResourceRequestByCount) -> model.ResourceDemand:
    return model.ResourceDemand(request=resource_request(msg.request), count=int(msg.count))


def parse_gang_details(details: str) -> tuple[str, str, str]:
    """``"<id>:<STRATEGY>|<STATE>"`` -> (id, strategy, state); empty strings where it does not parse."""
    match = _GANG_DETAILS.match(details.strip())
    if match is None:
        return "", "", ""
    return match["id"].lower(), match["strategy"], match["state"] or ""


def _strategy_from_constraints(bundles: Iterable[model.ResourceRequest]) -> str:
    kinds = {c.kind for b in bundles for c in b.placement_constraints}
    if "affinity" in kinds:
        return "STRICT_PACK"
    if "anti_affinity" in kinds:
        return "STRICT_SPREAD"
    return ""


def _locality(msg: pb.LocalityRequirement) -> model.Locality:
    constraint = msg.locality_constraint
    return model.Locality(
        label_name=constraint.label_name,
        strategy=_STRATEGY.get(constraint.placement_strategy, "")
        if msg.HasField("locality_constraint")
        else "",
        label_selector=label_selector(msg.label_selector) if msg.HasField("label_selector") else None,
    )


def gang_request(msg: pb.GangResourceRequest) -> model.GangRequest:
    selectors = tuple(
        model.GangSelector(
            bundles=tuple(resource_request(r) for r in s.resource_requests),
            locality=_locality(s.locality_requirement) if s.HasField("locality_requirement") else None,
        )
        for s in msg.bundle_selectors
    )
    bundles = selectors[0].bundles if selectors else tuple(resource_request(r) for r in msg.requests)
    pg_id, strategy, state = parse_gang_details(msg.details)
    if not strategy:
        locality = selectors[0].locality if selectors else None
        strategy = (locality.strategy if locality else "") or _strategy_from_constraints(bundles)
    return model.GangRequest(
        bundles=bundles,
        selectors=selectors,
        details=msg.details,
        placement_group_id=pg_id,
        strategy=strategy,
        state=state,
    )


def node_state(msg: pb.NodeState) -> model.RayNodeState:
    return model.RayNodeState(
        node_id=msg.node_id.hex(),
        status=_NODE_STATUS.get(msg.status, model.NodeStatus.UNSPECIFIED),
        instance_id=msg.instance_id,
        ray_node_type_name=msg.ray_node_type_name,
        idle_duration_ms=int(msg.idle_duration_ms),
        available_resources=dict(msg.available_resources),
        total_resources=dict(msg.total_resources),
        labels=dict(msg.labels),
        dynamic_labels=dict(msg.dynamic_labels),
        node_ip_address=msg.node_ip_address,
        instance_type_name=msg.instance_type_name,
        node_activity=tuple(msg.node_activity),
    )


def cluster_state(msg: pb.ClusterResourceState) -> model.ClusterState:
    return model.ClusterState(
        version=int(msg.cluster_resource_state_version),
        session_name=msg.cluster_session_name,
        last_seen_autoscaler_state_version=int(msg.last_seen_autoscaler_state_version),
        nodes=tuple(node_state(n) for n in msg.node_states),
        pending_requests=tuple(resource_demand(r) for r in msg.pending_resource_requests),
        pending_gangs=tuple(gang_request(g) for g in msg.pending_gang_resource_requests),
        # A cleared request_resources stays behind as an empty constraint.
        constraints=tuple(
            tuple(resource_demand(r) for r in c.resource_requests)
            for c in msg.cluster_resource_constraints
            if c.resource_requests
        ),
    )


def _hex(raw: bytes) -> str | None:
    return raw.hex() if raw else None


def _state_name(names: Mapping[int, str], number: int) -> str:
    # An enum value this proto does not declare (a newer Ray) keeps its number.
    return names.get(number, f"UNKNOWN_{number}")


def node_info(msg: gcs_pb.GcsNodeInfo) -> model.NodeInfo:
    return model.NodeInfo(
        node_id=msg.node_id.hex(),
        alive=msg.state == gcs_pb.GcsNodeInfo.ALIVE,
        address=msg.node_manager_address,
        raylet_port=int(msg.node_manager_port),
        instance_id=msg.instance_id or None,
        total_resources=dict(msg.resources_total),
        labels=dict(msg.labels),
        is_head=msg.is_head_node,
    )


def job_info(msg: gcs_pb.JobTableData) -> model.JobInfo:
    """The driver's node is its address's; the job submission API's record names it otherwise.
    The entrypoint is the driver's command line, else the submitted one."""
    submitted = msg.job_info if msg.HasField("job_info") else None
    driver_node_id = _hex(msg.driver_address.node_id)
    if driver_node_id is None and submitted is not None and submitted.HasField("driver_node_id"):
        driver_node_id = submitted.driver_node_id.lower() or None
    return model.JobInfo(
        job_id=msg.job_id.hex(),
        is_dead=msg.is_dead,
        submission_id=msg.config.metadata.get(JOB_SUBMISSION_ID) or None,
        driver_node_id=driver_node_id,
        entrypoint=msg.entrypoint or (submitted.entrypoint if submitted is not None else ""),
        status=(submitted.status or None) if submitted is not None else None,
    )


def actor_info(msg: gcs_pb.ActorTableData) -> model.ActorInfo:
    node_id = msg.node_id if msg.HasField("node_id") else b""
    return model.ActorInfo(
        actor_id=msg.actor_id.hex(),
        state=_state_name(_ACTOR_STATE, msg.state),
        node_id=_hex(node_id or msg.address.node_id),
        job_id=msg.job_id.hex(),
        name=msg.name,
        class_name=msg.class_name,
        detached=msg.is_detached,
    )


def placement_group_info(msg: gcs_pb.PlacementGroupTableData) -> model.PlacementGroupInfo:
    return model.PlacementGroupInfo(
        pg_id=msg.placement_group_id.hex(),
        state=_state_name(_PLACEMENT_GROUP_STATE, msg.state),
        node_ids=tuple(b.node_id.hex() for b in msg.bundles if b.node_id),
        job_id=msg.creator_job_id.hex(),
        detached=msg.is_detached,
        name=msg.name,
    )


# ---- model -> proto ----


def node_info_request(*, alive_only: bool) -> service_pb.GetAllNodeInfoRequest:
    request = service_pb.GetAllNodeInfoRequest()
    if alive_only:
        request.state_filter = gcs_pb.GcsNodeInfo.ALIVE
    return request


def job_info_request() -> service_pb.GetAllJobInfoRequest:
    """Every job with the job submission API's record, without asking each driver whether it
    runs tasks (one call from the GCS per live driver, which rayscale does not need)."""
    return service_pb.GetAllJobInfoRequest(
        skip_submission_job_info_field=False, skip_is_running_tasks_field=True
    )


def actor_info_request(state: str | None) -> service_pb.GetAllActorInfoRequest:
    """All actors, or those in one state (Ray filters by one state only); ValueError for a state
    not in `ACTOR_STATES`."""
    request = service_pb.GetAllActorInfoRequest()
    if state is not None:
        if state not in ACTOR_STATES:
            raise ValueError(f"not an actor state: {state!r} (one of {', '.join(ACTOR_STATES)})")
        request.filters.state = gcs_pb.ActorTableData.ActorState.Value(state)
    return request


def resize_request(resources: Mapping[str, float]) -> raylet_pb.ResizeLocalResourceInstancesRequest:
    """New totals for a node's resources; ValueError for an empty name or an amount that is
    negative or not finite."""
    for name, amount in resources.items():
        if not name:
            raise ValueError("empty resource name")
        if not math.isfinite(amount):
            raise ValueError(f"amount of {name} is not finite: {amount}")
    return raylet_pb.ResizeLocalResourceInstancesRequest(resources=_resources(resources))


def node_id_bytes(node_id: str) -> bytes:
    """A hex node id as the GCS wants it; ValueError for anything that is not one."""
    try:
        raw = bytes.fromhex(node_id)
    except ValueError:
        raise ValueError(f"not a Ray node id (hex): {node_id!r}") from None
    if len(raw) != NODE_ID_BYTES:
        raise ValueError(f"not a Ray node id: {node_id!r} has {len(raw)} bytes, not {NODE_ID_BYTES}")
    return raw


def drain_request(
    node_id: str, reason: model.DrainReason, message: str, deadline_ms: int
) -> pb.DrainNodeRequest:
    if deadline_ms < 0:
        raise ValueError(f"deadline_ms must be 0 (none) or a Unix time in ms, not {deadline_ms}")
    return pb.DrainNodeRequest(
        node_id=node_id_bytes(node_id),
        reason=_DRAIN_REASON[reason],
        reason_message=message,
        deadline_timestamp_ms=deadline_ms,
    )


def _label_selector_pb(selector: model.LabelSelector) -> common_pb.LabelSelector:
    return common_pb.LabelSelector(
        label_constraints=[
            common_pb.LabelSelectorConstraint(
                label_key=c.key, operator=_LABEL_OPERATOR_PB[c.operator], label_values=list(c.values)
            )
            for c in selector.constraints
        ]
    )


def _resource_request_pb(request: model.ResourceRequest) -> pb.ResourceRequest:
    constraints = [
        pb.PlacementConstraint(
            affinity=pb.AffinityConstraint(label_name=c.label_name, label_value=c.label_value)
        )
        if c.kind == "affinity"
        else pb.PlacementConstraint(
            anti_affinity=pb.AntiAffinityConstraint(label_name=c.label_name, label_value=c.label_value)
        )
        for c in request.placement_constraints
    ]
    return pb.ResourceRequest(
        resources_bundle=_resources(request.resources),
        placement_constraints=constraints,
        label_selectors=[_label_selector_pb(s) for s in request.label_selectors],
    )


def _resources(resources: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, amount in resources.items():
        if amount < 0:
            raise ValueError(f"negative amount of {name}: {amount}")
        out[name] = float(amount)
    return out


def constraint_request(
    demands: Iterable[model.ResourceDemand],
) -> pb.RequestClusterResourceConstraintRequest:
    """A ``request_resources`` call: replaces the cluster's constraint (an empty one clears it)."""
    requests = []
    for demand in demands:
        if demand.count < 0:
            raise ValueError(f"negative count: {demand.count}")
        requests.append(
            pb.ResourceRequestByCount(request=_resource_request_pb(demand.request), count=demand.count)
        )
    return pb.RequestClusterResourceConstraintRequest(
        cluster_resource_constraint=pb.ClusterResourceConstraint(resource_requests=requests)
    )


def _locality_pb(locality: model.Locality) -> pb.LocalityRequirement:
    out = pb.LocalityRequirement()
    if locality.label_name or locality.strategy:
        out.locality_constraint.label_name = locality.label_name
        out.locality_constraint.placement_strategy = _STRATEGY_PB.get(locality.strategy, common_pb.PACK)
    if locality.label_selector is not None:
        out.label_selector.CopyFrom(_label_selector_pb(locality.label_selector))
    return out


def _gang_request_pb(gang: model.GangRequest) -> pb.GangResourceRequest:
    out = pb.GangResourceRequest(
        requests=[_resource_request_pb(b) for b in gang.bundles], details=gang.details
    )
    for selector in gang.selectors:
        entry = out.bundle_selectors.add()
        entry.resource_requests.extend(_resource_request_pb(b) for b in selector.bundles)
        if selector.locality is not None:
            entry.locality_requirement.CopyFrom(_locality_pb(selector.locality))
    return out


def _count(value: int) -> int:
    if not 0 <= value <= 2**31 - 1:
        raise ValueError(f"count out of range: {value}")
    return value


def autoscaling_state_request(state: model.AutoscalingState) -> pb.ReportAutoscalingStateRequest:
    """A ``ReportAutoscalingState`` call carrying `state`."""
    msg = pb.AutoscalingState(
        last_seen_cluster_resource_state_version=state.last_seen_cluster_resource_state_version,
        autoscaler_state_version=state.autoscaler_state_version,
        pending_instance_requests=[
            pb.PendingInstanceRequest(
                instance_type_name=r.instance_type_name,
                ray_node_type_name=r.ray_node_type_name,
                count=_count(r.count),
                request_ts=r.request_ts,
            )
            for r in state.pending_instance_requests
        ],
        infeasible_resource_requests=[_resource_request_pb(r) for r in state.infeasible_resource_requests],
        infeasible_gang_resource_requests=[
            _gang_request_pb(g) for g in state.infeasible_gang_resource_requests
        ],
        infeasible_cluster_resource_constraints=[
            pb.ClusterResourceConstraint(
                resource_requests=[
                    pb.ResourceRequestByCount(request=_resource_request_pb(d.request), count=d.count)
                    for d in constraint
                ]
            )
            for constraint in state.infeasible_cluster_resource_constraints
        ],
        pending_instances=[
            pb.PendingInstance(
                instance_type_name=p.instance_type_name,
                ray_node_type_name=p.ray_node_type_name,
                instance_id=p.instance_id,
                ip_address=p.ip_address,
                details=p.details,
            )
            for p in state.pending_instances
        ],
        failed_instance_requests=[
            pb.FailedInstanceRequest(
                instance_type_name=f.instance_type_name,
                ray_node_type_name=f.ray_node_type_name,
                count=_count(f.count),
                reason=f.reason,
                start_ts=f.start_ts,
                failed_ts=f.failed_ts,
            )
            for f in state.failed_instance_requests
        ],
    )
    return pb.ReportAutoscalingStateRequest(autoscaling_state=msg)
