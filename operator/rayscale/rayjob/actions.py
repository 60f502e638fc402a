"""What a RayJob's plan asks the controller to do, in order, and what the plan returns. Pure data."""

from __future__ import annotations

import dataclasses
from typing import Any

from rayscale.common.types import Manifest

__all__ = [
    "Action",
    "AddFinalizer",
    "CreateCluster",
    "CreateRequest",
    "CreateService",
    "CreateSubmitter",
    "DeleteCluster",
    "DeleteRequest",
    "DeleteSelf",
    "DeleteSubmitter",
    "Event",
    "MarkFinished",
    "RemoveFinalizer",
    "Step",
    "StopJob",
    "SubmitJob",
    "SuspendWorkers",
    "UpdateService",
]


@dataclasses.dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclasses.dataclass(frozen=True)
class AddFinalizer:
    pass


@dataclasses.dataclass(frozen=True)
class RemoveFinalizer:
    pass


@dataclasses.dataclass(frozen=True)
class CreateCluster:
    manifest: Manifest


@dataclasses.dataclass(frozen=True)
class DeleteCluster:
    name: str


@dataclasses.dataclass(frozen=True)
class SuspendWorkers:
    """Set ``suspend: true`` on every worker group of the RayJob's cluster (DeleteWorkers)."""

    name: str


@dataclasses.dataclass(frozen=True)
class MarkFinished:
    """Annotate the RayJob's cluster as finished (``rayscale.io/job-finished: <why>``): the
    autoscaler drains every worker and scales every group to 0 (rayscale's, not KubeRay's)."""

    name: str
    why: str


@dataclasses.dataclass(frozen=True)
class CreateRequest:
    """Create the RayJob's RayResourceRequest (its entrypoint's resources; rayscale's own)."""

    manifest: Manifest


@dataclasses.dataclass(frozen=True)
class DeleteRequest:
    """Delete the RayJob's RayResourceRequest (gone already is fine)."""

    name: str


@dataclasses.dataclass(frozen=True)
class CreateSubmitter:
    manifest: Manifest


@dataclasses.dataclass(frozen=True)
class DeleteSubmitter:
    name: str


@dataclasses.dataclass(frozen=True)
class CreateService:
    manifest: Manifest


@dataclasses.dataclass(frozen=True)
class UpdateService:
    """Point the RayJob's head Service at another cluster (its clusterIP kept)."""

    manifest: Manifest


@dataclasses.dataclass(frozen=True)
class SubmitJob:
    """HTTPMode: submit through the dashboard's job API (idempotent by submission id), the
    request made from the RayJob's spec as KubeRay makes it."""

    cluster: str
    submission_id: str
    spec: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class StopJob:
    """Stop the Ray job (best effort: a failure is logged, not retried)."""

    cluster: str
    job_id: str


@dataclasses.dataclass(frozen=True)
class DeleteSelf:
    pass


Action = (
    AddFinalizer
    | RemoveFinalizer
    | CreateCluster
    | DeleteCluster
    | SuspendWorkers
    | MarkFinished
    | CreateRequest
    | DeleteRequest
    | CreateSubmitter
    | DeleteSubmitter
    | CreateService
    | UpdateService
    | SubmitJob
    | StopJob
    | DeleteSelf
)


@dataclasses.dataclass
class Step:
    """One reconcile of a RayJob: the actions in order, then the status to write (None: no
    write), the Events the plan itself posts, and when to look again (None: only on a change).
    A failed action ends the step there: no later action, no status write, a retry."""

    actions: list[Action] = dataclasses.field(default_factory=list)
    status: dict[str, Any] | None = None
    events: list[Event] = dataclasses.field(default_factory=list)
    requeue: float | None = None
    error: str | None = None  # the step cannot go on (KubeRay returns an error): retried
