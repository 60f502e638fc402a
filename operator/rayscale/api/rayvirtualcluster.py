"""RayVirtualCluster (rayscale.io/v1alpha1): worker nodes of one RayCluster set aside for a team or job.

A virtual cluster holds, per worker group of its RayCluster, ``nodes`` worker pods (autoscaled within
``[minNodes, maxNodes]``). Ray work runs inside it by requesting its Ray resource (``status.rayResource``).
A divisible virtual cluster is further split into one job cluster per Ray job submission.

Optimistic concurrency on the spec: a change that carries ``spec.revision`` is accepted only when
that is the latest ``status.revision`` (the generation the operator last applied); the API server
enforces it (`RAYVIRTUALCLUSTER_VALIDATIONS`).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import ConfigDict, Field

from rayscale.api.raycluster import Condition
from rayscale.api.schema import JsonDict, KubeModel


# (no docstrings on the enums: pydantic would put them in the CRD's schema)
class Phase(StrEnum):  # a virtual cluster's phase
    PENDING = "Pending"  # no node yet, some desired
    READY = "Ready"  # every group has its desired nodes, nothing unmet
    SCALING = "Scaling"  # nodes are being assigned or started
    REMOVING = "Removing"  # being deleted: its nodes go back once idle
    INVALID = "Invalid"  # its spec cannot be applied


class VcNodeState(StrEnum):  # one node of a virtual cluster
    PENDING = "Pending"  # no pod scheduled yet
    BOOTING = "Booting"  # scheduled or running without its Ray node
    READY = "Ready"  # running (Ray was not asked)
    IDLE = "Idle"  # its Ray node is alive and idle
    BUSY = "Busy"  # its Ray node is alive and working
    DEAD = "Dead"  # its Ray node died
    RELEASING = "Releasing"  # being drained or deleted


class JobClusterPhase(StrEnum):
    ACTIVE = "Active"
    DESTROYING = "Destroying"  # its job ended (or its VC is removed): nodes go back once idle


INT32: JsonDict = {"format": "int32"}
INT64: JsonDict = {"format": "int64"}
DATE_TIME: JsonDict = {"format": "date-time"}


def _list_map(*keys: str) -> JsonDict:
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


def _immutable(message: str) -> JsonDict:
    return {"x-kubernetes-validations": [{"rule": "self == oldSelf", "message": message}]}


class VirtualClusterGroup(KubeModel):
    """Nodes of one worker group: ``nodes`` expected, autoscaled within ``[minNodes, maxNodes]``."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "!has(self.minNodes) || self.minNodes <= self.nodes",
                 "message": "minNodes must not be greater than nodes", "fieldPath": ".minNodes"},
                {"rule": "!has(self.maxNodes) || self.nodes <= self.maxNodes",
                 "message": "maxNodes must not be less than nodes", "fieldPath": ".maxNodes"},
            ]
        }
    )  # fmt: skip

    group_name: str = Field(min_length=1)
    nodes: int = Field(ge=0, json_schema_extra=INT32)
    min_nodes: int | None = Field(default=None, ge=0, json_schema_extra=INT32)
    max_nodes: int | None = Field(default=None, ge=0, json_schema_extra=INT32)

    @property
    def lowest(self) -> int:
        """``minNodes``, or ``nodes`` when unset."""
        return self.nodes if self.min_nodes is None else self.min_nodes

    @property
    def highest(self) -> int:
        """``maxNodes``, or ``nodes`` when unset."""
        return self.nodes if self.max_nodes is None else self.max_nodes


class RayVirtualClusterSpec(KubeModel):
    """Which RayCluster, whether it splits per job, and how many nodes of which worker groups."""

    ray_cluster_name: str = Field(min_length=1, json_schema_extra=_immutable("rayClusterName is immutable"))
    divisible: bool = Field(
        default=False,
        json_schema_extra={
            "default": False,
            **_immutable("divisible is immutable: create a new RayVirtualCluster to change it"),
        },
    )
    revision: int | None = Field(default=None, ge=1, json_schema_extra=INT64)
    groups: list[VirtualClusterGroup] = Field(min_length=1, json_schema_extra=_list_map("groupName"))


class NodeStatus(KubeModel):
    """One worker pod of the virtual cluster."""

    pod: str
    node_id: str | None = None
    state: VcNodeState | None = None
    job_cluster: str | None = None
    since: str | None = Field(default=None, json_schema_extra=DATE_TIME)


class GroupStatus(KubeModel):
    """One worker group: the current target node count, how many are ready, and each node."""

    group_name: str
    desired: int | None = Field(default=None, json_schema_extra=INT32)
    ready: int | None = Field(default=None, json_schema_extra=INT32)
    nodes: list[NodeStatus] | None = Field(default=None, json_schema_extra=_list_map("pod"))


class JobClusterGroup(KubeModel):
    """Nodes of one worker group held by a job cluster."""

    group_name: str
    nodes: int = Field(ge=0, json_schema_extra=INT32)


class JobClusterStatus(KubeModel):
    """A job cluster of a divisible virtual cluster: the nodes of one Ray job submission."""

    name: str
    ray_resource: str | None = None
    phase: JobClusterPhase | None = None
    reason: str | None = None
    groups: list[JobClusterGroup] | None = Field(default=None, json_schema_extra=_list_map("groupName"))


class BusyStatus(KubeModel):
    """What still runs inside the virtual cluster (why its removal waits)."""

    jobs: int | None = Field(default=None, json_schema_extra=INT32)
    actors: int | None = Field(default=None, json_schema_extra=INT32)
    placement_groups: int | None = Field(default=None, json_schema_extra=INT32)
    tasks: int | None = Field(default=None, json_schema_extra=INT32)


class UnmetStatus(KubeModel):
    """Demand targeting the virtual cluster that cannot be placed, and why."""

    reason: str
    message: str | None = None
    count: int | None = Field(default=None, json_schema_extra=INT32)


class RayVirtualClusterStatus(KubeModel):
    """Observed state, written by the operator through the status subresource."""

    phase: Phase | None = None
    revision: int | None = Field(default=None, json_schema_extra=INT64)
    observed_generation: int | None = Field(default=None, json_schema_extra=INT64)
    ray_resource: str | None = None
    groups: list[GroupStatus] | None = Field(default=None, json_schema_extra=_list_map("groupName"))
    job_clusters: list[JobClusterStatus] | None = Field(default=None, json_schema_extra=_list_map("name"))
    busy: BusyStatus | None = None
    unmet: list[UnmetStatus] | None = None
    conditions: list[Condition] | None = Field(default=None, json_schema_extra=_list_map("type"))


class VcMetadata(KubeModel):
    """A RayVirtualCluster's metadata as the autoscaler reads it (not part of the CRD's schema)."""

    name: str = ""
    namespace: str = ""
    generation: int | None = None
    deletion_timestamp: str | None = None
    finalizers: list[str] | None = None


# On the whole object: a spec change that carries spec.revision must be based on the latest
# status.revision. Metadata and status updates leave the spec as it was, and pass. The message is
# built with format(): the API server's cost estimate refuses concatenating string(int).
_LATEST = "has(oldSelf.status) && has(oldSelf.status.revision)"
_REAPPLY = "read the object again and re-apply your change on the latest revision"
RAYVIRTUALCLUSTER_VALIDATIONS: tuple[JsonDict, ...] = (
    {
        "rule": f"!has(self.spec.revision) || self.spec == oldSelf.spec"
        f" || ({_LATEST} && self.spec.revision == oldSelf.status.revision)",
        "message": f"spec.revision is not the latest revision (status.revision): {_REAPPLY}",
        "messageExpression": f"{_LATEST}"
        f" ? 'spec.revision %d is not the latest revision (status.revision %d): {_REAPPLY}'"
        ".format([self.spec.revision, oldSelf.status.revision])"
        f" : 'spec.revision %d is not the latest revision (status.revision is not set yet): {_REAPPLY}'"
        ".format([self.spec.revision])",
        "fieldPath": ".spec.revision",
    },
)


__all__ = [
    "RAYVIRTUALCLUSTER_VALIDATIONS",
    "BusyStatus",
    "GroupStatus",
    "JobClusterGroup",
    "JobClusterPhase",
    "JobClusterStatus",
    "NodeStatus",
    "Phase",
    "RayVirtualClusterSpec",
    "RayVirtualClusterStatus",
    "UnmetStatus",
    "VcMetadata",
    "VcNodeState",
    "VirtualClusterGroup",
]
