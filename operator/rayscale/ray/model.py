"""What rayscale reads from Ray's GCS and reports back to it, as plain typed values (no protobuf).

These mirror ``ray.rpc.autoscaler.ClusterResourceState`` closely enough that nothing the
scheduler needs is lost, with Ray's encodings undone: node ids are hex strings, enums are string
enums, a placement group's strategy and state are parsed out of the ``details`` text. Resource
maps hold Ray's numbers as they are (``memory`` and ``object_store_memory`` in bytes).

``NodeInfo``, ``JobInfo``, ``ActorInfo`` and ``PlacementGroupInfo`` are the GCS's tables of
nodes, jobs, actors and placement groups (``GetAllNodeInfo``, ``GetAllJobInfo``,
``GetAllActorInfo``, ``GetAllPlacementGroup``), with the same encodings undone; their states are
Ray's enum value names (e.g. ``"ALIVE"``, ``"CREATED"``). ``SubmissionInfo`` is what Ray's job
manager records of one job submission in the GCS's internal key-value store.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "ActorInfo",
    "AutoscalingState",
    "ClusterState",
    "DrainReason",
    "DrainResult",
    "FailedInstanceRequest",
    "GangRequest",
    "GangSelector",
    "GcsLabelConstraint",
    "JobInfo",
    "LabelOperator",
    "LabelSelector",
    "Locality",
    "NodeInfo",
    "NodeStatus",
    "PendingInstance",
    "PendingInstanceRequest",
    "PlacementConstraint",
    "PlacementGroupInfo",
    "RayNodeState",
    "ResourceDemand",
    "ResourceRequest",
    "SubmissionInfo",
]


class NodeStatus(enum.StrEnum):
    """A Ray node's state in the GCS."""

    UNSPECIFIED = "UNSPECIFIED"
    RUNNING = "RUNNING"  # alive, has work
    IDLE = "IDLE"  # alive, no work for `idle_duration_ms`
    DRAINING = "DRAINING"  # accepted a drain request
    DEAD = "DEAD"


class DrainReason(enum.StrEnum):
    """Why a node is asked to drain (``ray.rpc.autoscaler.DrainNodeReason``)."""

    UNSPECIFIED = "UNSPECIFIED"
    IDLE_TERMINATION = "IDLE_TERMINATION"  # the node refuses if it is no longer idle
    PREEMPTION = "PREEMPTION"  # cannot be refused


class LabelOperator(enum.StrEnum):
    UNSPECIFIED = "UNSPECIFIED"
    IN = "IN"
    NOT_IN = "NOT_IN"


@dataclass(frozen=True, slots=True)
class GcsLabelConstraint:
    """The node label `key` must (IN) or must not (NOT_IN) have one of `values`."""

    key: str
    operator: LabelOperator
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """All constraints must hold."""

    constraints: tuple[GcsLabelConstraint, ...] = ()


@dataclass(frozen=True, slots=True)
class PlacementConstraint:
    """Ray's placement-group constraint on a bundle.

    ``affinity``: the bundle must share a node with the others of its group (STRICT_PACK);
    ``anti_affinity``: it must not (STRICT_SPREAD). `label_name` is ``_PG_<group id hex>``; a
    node that already holds bundles of that group carries it in ``RayNodeState.dynamic_labels``.
    """

    kind: Literal["affinity", "anti_affinity"]
    label_name: str
    label_value: str = ""


@dataclass(frozen=True, slots=True)
class ResourceRequest:
    """One bundle: resources (e.g. ``{"CPU": 1, "GPU": 1}``) and where it may go."""

    resources: Mapping[str, float]
    # Fallbacks: the first selector that some node satisfies applies; empty means any node.
    label_selectors: tuple[LabelSelector, ...] = ()
    placement_constraints: tuple[PlacementConstraint, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceDemand:
    """`count` identical requests: pending tasks/actors, or one ``request_resources`` entry."""

    request: ResourceRequest
    count: int


@dataclass(frozen=True, slots=True)
class Locality:
    """A bundle selector's locality requirement (newer Ray GCS versions; often absent)."""

    label_name: str = ""
    strategy: str = ""  # PACK | SPREAD | STRICT_PACK | STRICT_SPREAD, "" when not given
    label_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class GangSelector:
    """Bundles that must all be placed together; one alternative of a gang."""

    bundles: tuple[ResourceRequest, ...]
    locality: Locality | None = None


@dataclass(frozen=True, slots=True)
class GangRequest:
    """A pending placement group: all of its unplaced bundles, or nothing.

    `bundles` is what Ray's own scheduler uses: the first bundle selector when the GCS sent
    any, else the deprecated flat list. `selectors` keeps every alternative.
    """

    bundles: tuple[ResourceRequest, ...]
    selectors: tuple[GangSelector, ...] = ()
    details: str = ""
    placement_group_id: str = ""  # hex, parsed from `details`; "" when absent
    strategy: str = ""  # PACK | SPREAD | STRICT_PACK | STRICT_SPREAD; "" when unknown
    state: str = ""  # e.g. PENDING | RESCHEDULING, parsed from `details`


@dataclass(frozen=True, slots=True)
class RayNodeState:
    """One Ray node as the GCS sees it."""

    node_id: str  # hex
    status: NodeStatus
    instance_id: str = ""  # RAY_CLOUD_INSTANCE_ID of the node: the pod name on Kubernetes
    ray_node_type_name: str = ""  # RAY_NODE_TYPE_NAME: the worker group
    idle_duration_ms: int = 0
    available_resources: Mapping[str, float] = field(default_factory=dict)
    total_resources: Mapping[str, float] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    dynamic_labels: Mapping[str, str] = field(default_factory=dict)
    node_ip_address: str = ""
    instance_type_name: str = ""
    node_activity: tuple[str, ...] = ()

    @property
    def alive(self) -> bool:
        return self.status in (NodeStatus.RUNNING, NodeStatus.IDLE, NodeStatus.DRAINING)

    @property
    def idle_seconds(self) -> float:
        return self.idle_duration_ms / 1000 if self.status is NodeStatus.IDLE else 0.0


@dataclass(frozen=True, slots=True)
class ClusterState:
    """``GetClusterResourceState``: the nodes and the demand of one Ray cluster."""

    version: int
    session_name: str
    nodes: tuple[RayNodeState, ...]
    pending_requests: tuple[ResourceDemand, ...] = ()  # tasks and actors
    pending_gangs: tuple[GangRequest, ...] = ()  # placement groups
    # request_resources; Ray keeps at most one (a new call replaces the old). Each is all or nothing.
    constraints: tuple[tuple[ResourceDemand, ...], ...] = ()
    # The autoscaler_state_version of the latest AutoscalingState the GCS holds, as the GCS says
    # (Ray 2.60 always says 0: it never records it).
    last_seen_autoscaler_state_version: int = 0

    def node_by_instance(self, instance_id: str) -> RayNodeState | None:
        """The live node for a pod name, else the latest dead one, else None."""
        found: RayNodeState | None = None
        for node in self.nodes:
            if node.instance_id == instance_id and (found is None or not found.alive):
                found = node
        return found

    def node(self, node_id: str) -> RayNodeState | None:
        return next((n for n in self.nodes if n.node_id == node_id), None)


@dataclass(frozen=True, slots=True)
class DrainResult:
    """The answer to ``DrainNode``: accepted, or refused with Ray's reason."""

    accepted: bool
    rejection_reason: str = ""


# ---- what the autoscaler reports (ReportAutoscalingState) ----


@dataclass(frozen=True, slots=True)
class PendingInstanceRequest:
    """`count` instances of a node type asked for that do not exist yet (replicas without pods)."""

    ray_node_type_name: str
    count: int
    request_ts: int  # Unix seconds
    instance_type_name: str = ""


@dataclass(frozen=True, slots=True)
class PendingInstance:
    """An instance (pod) that exists without a Ray node yet; `details` says what it waits for."""

    instance_id: str  # the pod name
    ray_node_type_name: str
    details: str = ""
    ip_address: str = ""
    instance_type_name: str = ""


@dataclass(frozen=True, slots=True)
class FailedInstanceRequest:
    """`count` instances of a node type that were asked for and never came up."""

    ray_node_type_name: str
    count: int
    reason: str
    start_ts: int  # Unix seconds: when they were asked for
    failed_ts: int  # Unix seconds: when they were given up
    instance_type_name: str = ""


@dataclass(frozen=True, slots=True)
class AutoscalingState:
    """``ReportAutoscalingState``: the autoscaler's view, shown by ``ray status`` and the dashboard.

    The infeasible requests echo the GCS's own requests (``ClusterState``): the GCS matches them
    against its queued tasks by resource shape to fail those early when
    ``RAY_enable_infeasible_task_early_exit`` is set.
    """

    last_seen_cluster_resource_state_version: int
    autoscaler_state_version: int
    pending_instance_requests: tuple[PendingInstanceRequest, ...] = ()
    pending_instances: tuple[PendingInstance, ...] = ()
    failed_instance_requests: tuple[FailedInstanceRequest, ...] = ()
    infeasible_resource_requests: tuple[ResourceRequest, ...] = ()
    infeasible_gang_resource_requests: tuple[GangRequest, ...] = ()
    # Each entry is one whole request_resources constraint (all of its bundles).
    infeasible_cluster_resource_constraints: tuple[tuple[ResourceDemand, ...], ...] = ()


# ---- the GCS's tables: nodes, jobs, actors, placement groups ----


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node of ``GetAllNodeInfo``: a live node, or a dead one the GCS still remembers.

    `total_resources` are the totals the node registered with: Ray 2.60 does not update them when
    the node's resources are resized (``RayletClient.resize_local_resources``); the live totals
    are ``RayNodeState.total_resources`` (``GetClusterResourceState``).
    """

    node_id: str  # hex
    alive: bool
    address: str  # the raylet's IP address (node_manager_address)
    raylet_port: int  # where the raylet serves NodeManagerService (node_manager_port)
    # RAY_CLOUD_INSTANCE_ID of the node: the pod name on Kubernetes; None when not set (a head
    # started without it).
    instance_id: str | None
    total_resources: Mapping[str, float] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    is_head: bool = False

    @property
    def raylet_address(self) -> str:
        """``host:port`` of the node's raylet, for ``RayletClient`` (an IPv6 host in brackets)."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.raylet_port}"


@dataclass(frozen=True, slots=True)
class JobInfo:
    """One job (one driver) of ``GetAllJobInfo``."""

    job_id: str  # hex
    is_dead: bool
    # The job submission API's id (its job config's "job_submission_id"); None for a driver
    # started by hand (``ray.init``).
    submission_id: str | None
    driver_node_id: str | None  # hex; None when the GCS does not say
    entrypoint: str
    # The submitted job's status (PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED); None for a job
    # the job submission API did not start.
    status: str | None = None
    # When the driver started and (once dead) ended: Unix milliseconds, 0 when the GCS has none.
    start_time_ms: int = 0
    end_time_ms: int = 0


# The job submission statuses after which a submission never changes again.
_TERMINAL_SUBMISSION = frozenset({"STOPPED", "SUCCEEDED", "FAILED"})


@dataclass(frozen=True, slots=True)
class SubmissionInfo:
    """One job submission as Ray's job manager records it (its ``JobInfo``, what ``ray job status``
    shows), read from the GCS's internal key-value store.

    Times are Unix milliseconds, 0 when Ray has none (`end_time_ms` until the job ends).
    """

    status: str  # PENDING | RUNNING | STOPPED | SUCCEEDED | FAILED
    entrypoint: str
    message: str = ""  # Ray's own description of the status ("Job failed." or the driver's last logs)
    error_type: str = ""  # Ray's JobErrorType when it failed, e.g. "JOB_ENTRYPOINT_COMMAND_ERROR"
    start_time_ms: int = 0
    end_time_ms: int = 0
    metadata: Mapping[str, str] = field(default_factory=dict)
    driver_exit_code: int | None = None  # None until the driver exits (or when it never ran)

    @property
    def terminal(self) -> bool:
        """STOPPED, SUCCEEDED or FAILED: Ray changes it no more."""
        return self.status in _TERMINAL_SUBMISSION


@dataclass(frozen=True, slots=True)
class ActorInfo:
    """One actor of ``GetAllActorInfo``."""

    actor_id: str  # hex
    state: str  # DEPENDENCIES_UNREADY | PENDING_CREATION | ALIVE | RESTARTING | DEAD
    node_id: str | None  # hex: where it runs (or last ran); None before it is placed
    job_id: str  # hex
    name: str = ""  # "" for an unnamed actor
    class_name: str = ""
    detached: bool = False


@dataclass(frozen=True, slots=True)
class PlacementGroupInfo:
    """One placement group of ``GetAllPlacementGroup``."""

    pg_id: str  # hex
    state: str  # PENDING | PREPARED | CREATED | REMOVED | RESCHEDULING
    # The node of each placed bundle, in bundle order (a node twice when it holds two bundles);
    # unplaced bundles are left out, so a pending group has none.
    node_ids: tuple[str, ...]
    job_id: str  # hex: the job that created it
    detached: bool = False
    name: str = ""
