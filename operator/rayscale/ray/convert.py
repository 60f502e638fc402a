"""Protobuf messages of ``ray.rpc.autoscaler`` and of the GCS info services (``ray.rpc``) to
``rayscale.ray.model`` values; encode.py is the way back. Also the JSON record Ray's job manager
keeps of each job submission in the GCS's internal key-value store.

Pure functions; with encode.py the only place that knows both representations.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from google.protobuf.descriptor import EnumDescriptor

from rayscale.ray import model
from rayscale.ray.wire import autoscaler_pb2 as pb
from rayscale.ray.wire import common_pb2 as common_pb
from rayscale.ray.wire import gcs_pb2 as gcs_pb

__all__ = [
    "ACTOR_STATES",
    "JOB_SUBMISSION_ID",
    "LABEL_OPERATORS",
    "STRATEGIES",
    "SUBMISSION_KEY_PREFIX",
    "SUBMISSION_NAMESPACE",
    "actor_info",
    "cluster_state",
    "gang_request",
    "job_info",
    "node_info",
    "node_state",
    "parse_gang_details",
    "placement_group_info",
    "resource_demand",
    "resource_request",
    "submission_id_of",
    "submission_info",
    "submission_key",
]

_NODE_STATUS = {
    pb.UNSPECIFIED: model.NodeStatus.UNSPECIFIED,
    pb.RUNNING: model.NodeStatus.RUNNING,
    pb.IDLE: model.NodeStatus.IDLE,
    pb.DRAINING: model.NodeStatus.DRAINING,
    pb.DEAD: model.NodeStatus.DEAD,
}
LABEL_OPERATORS = {
    common_pb.LABEL_OPERATOR_UNSPECIFIED: model.LabelOperator.UNSPECIFIED,
    common_pb.LABEL_OPERATOR_IN: model.LabelOperator.IN,
    common_pb.LABEL_OPERATOR_NOT_IN: model.LabelOperator.NOT_IN,
}
STRATEGIES = {
    common_pb.PACK: "PACK",
    common_pb.SPREAD: "SPREAD",
    common_pb.STRICT_PACK: "STRICT_PACK",
    common_pb.STRICT_SPREAD: "STRICT_SPREAD",
}


def _enum_names(enum: EnumDescriptor) -> dict[int, str]:
    return {value.number: value.name for value in enum.values}


_ACTOR_STATE = _enum_names(gcs_pb.ActorTableData.ActorState.DESCRIPTOR)
_PLACEMENT_GROUP_STATE = _enum_names(gcs_pb.PlacementGroupTableData.PlacementGroupState.DESCRIPTOR)
# The names `actor_info_request` takes, in Ray's order.
ACTOR_STATES: tuple[str, ...] = tuple(_ACTOR_STATE.values())
# The job config metadata key under which the job submission API records a job's submission id.
JOB_SUBMISSION_ID = "job_submission_id"
# Where Ray's job manager (ray.dashboard.modules.job.common.JobInfoStorageClient, Ray 2.60) keeps
# each job submission: in the GCS's internal key-value store, namespace "job", under the key
# "_ray_internal_job_info_<submission id>"; the value is its JobInfo as JSON (JobInfo.to_json).
SUBMISSION_NAMESPACE = b"job"
SUBMISSION_KEY_PREFIX = b"_ray_internal_job_info_"
# GCS writes a placement group's `details` as "<id hex>:<STRATEGY>|<STATE>".
_GANG_DETAILS = re.compile(r"^(?P<id>[0-9a-fA-F]+):(?P<strategy>[A-Z_]+)(?:\|(?P<state>[A-Z_]+))?$")


# ---- proto -> model ----


def label_selector(msg: common_pb.LabelSelector) -> model.LabelSelector:
    return model.LabelSelector(
        tuple(
            model.GcsLabelConstraint(
                key=c.label_key,
                operator=LABEL_OPERATORS.get(c.operator, model.LabelOperator.UNSPECIFIED),
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
        strategy=STRATEGIES.get(constraint.placement_strategy, "")
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
        start_time_ms=msg.start_time,
        end_time_ms=msg.end_time,
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


# ---- job submissions (JSON in the internal key-value store) -> model ----


def submission_key(submission_id: str) -> bytes:
    return SUBMISSION_KEY_PREFIX + submission_id.encode()


def submission_id_of(key: bytes) -> str | None:
    """The submission id in a key of `SUBMISSION_NAMESPACE`; None for any other key there (Ray
    keeps e.g. "head_node_id" in it too)."""
    if not key.startswith(SUBMISSION_KEY_PREFIX):
        return None
    return key[len(SUBMISSION_KEY_PREFIX) :].decode(errors="replace")


def _text(record: Mapping[str, object], name: str) -> str:
    value = record.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"job submission record: {name} is {value!r}, not a string")
    return value


def _millis(record: Mapping[str, object], name: str) -> int:
    value = record.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"job submission record: {name} is {value!r}, not a number")
    return int(value)


def submission_info(value: bytes | str) -> model.SubmissionInfo:
    """Ray's JSON record of one job submission (``JobInfo.to_json``) as a ``SubmissionInfo``.

    Ray writes null for what it does not know yet (message, error_type, end_time,
    driver_exit_code, metadata); they become "", 0, None and {}. ValueError when `value` is not
    such a record (not JSON, not an object, no status).
    """
    record = json.loads(value)
    if not isinstance(record, dict):
        raise ValueError(f"job submission record: a JSON object expected, not {type(record).__name__}")
    status = _text(record, "status")
    if not status:
        raise ValueError("job submission record without a status")
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ValueError(f"job submission record: metadata is {metadata!r}, not an object")
    exit_code = record.get("driver_exit_code")
    if exit_code is not None and (isinstance(exit_code, bool) or not isinstance(exit_code, int)):
        raise ValueError(f"job submission record: driver_exit_code is {exit_code!r}, not an integer")
    return model.SubmissionInfo(
        status=status,
        entrypoint=_text(record, "entrypoint"),
        message=_text(record, "message"),
        error_type=_text(record, "error_type"),
        start_time_ms=_millis(record, "start_time"),
        end_time_ms=_millis(record, "end_time"),
        metadata={str(k): str(v) for k, v in metadata.items()},
        driver_exit_code=exit_code,
    )
