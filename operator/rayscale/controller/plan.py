"""What one reconcile decided to do: ordered steps of pod deletes and creates, services, events."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from rayscale.batch.model import PodGroupWant
from rayscale.common.pods import is_head
from rayscale.common.types import Manifest


class NodeKind(StrEnum):
    HEAD = "head"
    WORKER = "worker"

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> NodeKind:
        return cls.HEAD if is_head(pod) else cls.WORKER


class DeleteWhy(StrEnum):
    """Why a pod is deleted (KubeRay's words, shown in the Events)."""

    UNHEALTHY = "unhealthy"
    WORKERS_TO_DELETE = "workersToDelete"  # named in the group's scaleStrategy
    SCALE_DOWN = "scaleDown"
    SUSPEND = "suspend"  # the cluster is suspended: every pod
    SUSPEND_GROUP = "suspendGroup"  # one worker group is suspended
    UPGRADE = "upgrade"  # upgradeStrategy Recreate: every pod
    INCOMPLETE_REPLICA = "incompleteReplica"  # a multi-host replica missing hosts
    GROUP_REMOVED = "groupRemoved"  # its worker group is no longer in the spec (not autoscaled)


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclasses.dataclass(frozen=True)
class CreatePod:
    group: str  # "" for the head, as in KubeRay's expectations
    kind: NodeKind
    manifest: Manifest


@dataclasses.dataclass(frozen=True)
class DeletePod:
    name: str
    group: str
    kind: NodeKind
    why: DeleteWhy


@dataclasses.dataclass(frozen=True)
class EventSpec:
    type: EventType
    reason: str
    message: str
    action: str = "Reconcile"


@dataclasses.dataclass
class Step:
    """One group's actions: deletes first, then creates. A failing step stops the reconcile."""

    group: str
    deletes: list[DeletePod] = dataclasses.field(default_factory=list)
    creates: list[CreatePod] = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.deletes or self.creates)


@dataclasses.dataclass
class Plan:
    services: list[Manifest] = dataclasses.field(default_factory=list)
    #: Secrets to create once (the Ray auth token's); the applier fills in the token
    secrets: list[Manifest] = dataclasses.field(default_factory=list)
    #: the head Ingress, created once per RayCluster
    ingresses: list[Manifest] = dataclasses.field(default_factory=list)
    #: Ray's autoscaler sidecar's ServiceAccount, Role and RoleBinding (--mode controller), once
    rbac: list[Manifest] = dataclasses.field(default_factory=list)
    #: the batch scheduler's PodGroup (``--batch-scheduler``), created or resized before any pod
    pod_group: PodGroupWant | None = None
    #: a finalizer to add to the RayCluster before anything else is done (Redis cleanup)
    add_finalizer: str | None = None
    steps: list[Step] = dataclasses.field(default_factory=list)
    events: list[EventSpec] = dataclasses.field(default_factory=list)
    #: reconcile again after this many seconds (something is still converging)
    requeue_after: float | None = None
    #: an error found while planning (e.g. two head pods); reported like an apply error
    error: str | None = None
    #: the spec failed validation: status gets a condition, nothing else is touched
    invalid: str | None = None
    #: do not touch status at all (managedBy another controller)
    skip: bool = False

    def requeue(self, seconds: float) -> None:
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)
