"""``rayscale.ray.model`` values to the protobuf requests rayscale sends: to the GCS's autoscaler
and info services and to the raylet (``ray.rpc``); convert.py is the way back.

Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from rayscale.ray import model
from rayscale.ray.convert import ACTOR_STATES, LABEL_OPERATORS, STRATEGIES
from rayscale.ray.wire import autoscaler_pb2 as pb
from rayscale.ray.wire import common_pb2 as common_pb
from rayscale.ray.wire import gcs_pb2 as gcs_pb
from rayscale.ray.wire import gcs_service_pb2 as service_pb
from rayscale.ray.wire import node_manager_pb2 as raylet_pb

__all__ = [
    "NODE_ID_BYTES",
    "actor_info_request",
    "autoscaling_state_request",
    "constraint_request",
    "drain_request",
    "job_info_request",
    "node_id_bytes",
    "node_info_request",
    "resize_request",
]

NODE_ID_BYTES = 28  # Ray's NodeID size
_LABEL_OPERATOR_PB = {v: k for k, v in LABEL_OPERATORS.items()}
_STRATEGY_PB = {v: k for k, v in STRATEGIES.items()}
_DRAIN_REASON = {
    model.DrainReason.UNSPECIFIED: pb.DRAIN_NODE_REASON_UNSPECIFIED,
    model.DrainReason.IDLE_TERMINATION: pb.DRAIN_NODE_REASON_IDLE_TERMINATION,
    model.DrainReason.PREEMPTION: pb.DRAIN_NODE_REASON_PREEMPTION,
}


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
