"""`IdleTermination`: the idle clock of each opted-in RayCluster, and its end. I/O.

After each full round (and, for a cluster rayscale does not autoscale, after a read of its GCS
alone) `check` reads what the round did not: Ray's job table, the job submissions and the live
actors, but only when the round's state shows no demand and no RayResourceRequest names the
cluster. The pure decision (idle.py) says keep, wait or act. Acting is one guarded write: a JSON
patch ``spec.suspend: true`` with a ``test`` of the generation and the idle annotations the decision
saw, or a DELETE with the uid and resourceVersion it saw as preconditions; then a
Normal Event (``IdleSuspended``, ``IdleDeleted``). The ``IdleTermination`` condition it keeps here
goes into ``status.autoscaler`` with the round's status (reporter.py), or on its own for a cluster
rayscale does not autoscale (`status_patch`). An unreadable annotation gets the condition (reason
``InvalidAnnotation``) and a Warning Event, once.

The clock survives a restart in the condition written (idle.py: ``idle_since``). Between rounds a
periodic read of the GCS may end a round early (poll.py); `due` tells the round when a clock's end
needs a full round anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from rayscale.api.names import RAYCLUSTER
from rayscale.autoscaler.idle import (
    ACTION_ANNOTATION,
    SECONDS_ANNOTATION,
    Act,
    Action,
    Reason,
    Wait,
    Work,
    condition,
    decide,
    find_condition,
    idle_since,
    invalid_event,
    rayjob_of,
    read_settings,
    work_of,
)
from rayscale.autoscaler.memory import Shared
from rayscale.autoscaler.spec_reader import ScalingSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.common.types import ClusterKey, Obj
from rayscale.kube import ops, rayjob_ops
from rayscale.ray.errors import GcsError
from rayscale.ray.model import ClusterState

__all__ = ["Cluster", "IdleTermination", "opted_in", "status_patch"]

log = logging.getLogger(__name__)


class Cluster(NamedTuple):
    """What the idle clock reads of a RayCluster (from the round's `ScalingSpec`, one reader)."""

    meta: ClusterMeta
    suspended: bool  # spec.suspend
    written: Obj | None  # status.autoscaler as last written

    @classmethod
    def of(cls, scaling: ScalingSpec) -> Cluster:
        return cls(scaling.meta, scaling.spec.suspend is True, scaling.written)


def opted_in(annotations: Mapping[str, str]) -> bool:
    """Whether a cluster's annotations include either idle-termination annotation (readable or not)."""
    return read_settings(annotations) is not None


class IdleTermination:
    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self._since: dict[ClusterKey, datetime] = {}  # when each running clock started
        self._conditions: dict[ClusterKey, Obj] = {}  # the condition each cluster has now
        self._due: dict[ClusterKey, float] = {}  # when a full round must decide (monotonic)

    def condition(self, key: ClusterKey) -> Obj | None:
        """The ``IdleTermination`` condition of `key` after its latest check; None: not opted in."""
        return self._conditions.get(key)

    def due(self, key: ClusterKey) -> bool:
        """Whether a clock of `key` has run out (the next round must be a full one)."""
        at = self._due.get(key)
        return at is not None and self.shared.clock() >= at

    def forget(self, key: ClusterKey) -> None:
        self._since.pop(key, None)
        self._conditions.pop(key, None)
        self._due.pop(key, None)

    async def check(
        self,
        key: ClusterKey,
        cluster: Cluster,
        state: ClusterState | None,
        requests: Sequence[Obj],
    ) -> float | None:
        """Decide on `key` (`state`: what the round read of Ray, None when the GCS did not answer)
        and act; the seconds until its clock runs out (None: no clock runs)."""
        meta, suspended = cluster.meta, cluster.suspended
        settings = read_settings(meta.annotations)
        self._due.pop(key, None)
        if settings is None:
            self.forget(key)
            return None
        old = self._conditions.get(key) or find_condition(cluster.written)
        now = self.shared.wall_clock()
        if isinstance(settings, str):
            self._since.pop(key, None)
            self._note(key, meta, condition(settings, now, old), old)
            return None
        work = None if state is None or suspended else await self._work(key, state, len(requests))
        since = self._since.get(key) or idle_since(old)
        outcome = decide(settings, work, since, now, suspended=suspended, rayjob=rayjob_of(meta.labels))
        if isinstance(outcome, Act) and not await self._act(key, meta, outcome):
            # refused or failed: decided again an interval later (not at once: a lasting refusal,
            # RBAC say, must not spin the rounds)
            retry = now + timedelta(seconds=self.shared.config.interval)
            outcome = Wait(outcome.since, retry, outcome.action)
        if isinstance(outcome, Wait):
            self._since[key] = outcome.since
            wait = max(0.0, (outcome.until - now).total_seconds())
            self._due[key] = self.shared.clock() + wait
        else:
            self._since.pop(key, None)
            wait = None
            if not suspended:  # a driver ending moves nothing the GCS poll sees: look again then
                self._due[key] = self.shared.clock() + self.shared.config.interval
        self._note(key, meta, condition(outcome, now, old), old)
        return wait

    def _note(self, key: ClusterKey, meta: ClusterMeta, new: Obj, old: Obj | None) -> None:
        self._conditions[key] = new
        event = invalid_event(old, new)
        if event is not None:
            self.shared.events.post(meta.subject(), *event)
        if old is None or (old.get("status"), old.get("reason")) != (new.get("status"), new.get("reason")):
            log.info("idle termination of %s/%s: %s (%s)", *key, new["reason"], new["message"])

    async def _work(self, key: ClusterKey, state: ClusterState, requests: int) -> Work | None:
        """The cluster's work; its jobs, submissions and actors read only when the demand and the
        requests leave it idle. None when the GCS did not answer."""
        work = work_of(state, (), {}, (), requests)
        gcs = self.shared.memories.of(key).client()
        if work.busy:
            return work
        if gcs is None:
            return None
        try:
            jobs = await gcs.get_all_job_info()
            submissions = await gcs.list_submissions()
            actors = await gcs.get_all_actor_info(state="ALIVE")
        except GcsError as exc:
            log.info("idle termination of %s/%s: the GCS's jobs not read: %s", *key, exc)
            return None
        return work_of(state, jobs, submissions, actors, requests)

    async def _act(self, key: ClusterKey, meta: ClusterMeta, act: Act) -> bool:
        """Suspend or delete the cluster; False when the write was refused (the cluster changed
        since the decision), failed, or found it gone (deleted by someone else: not rayscale's)."""
        namespace, name = key
        try:
            if act.action is Action.SUSPEND:
                patch = [*_unchanged(meta), {"op": "add", "path": "/spec/suspend", "value": True}]
                await ops.json_patch_raycluster(self.shared.api, namespace, name, patch)
                reason = Reason.SUSPENDED
            else:
                # no generation to test: the object exactly as read (a changed annotation, a
                # cluster deleted and made again under the name, ...: 409, decided again)
                seen = {"uid": meta.uid, "resourceVersion": meta.resource_version}
                unchanged = {field: value for field, value in seen.items() if value}
                if not await rayjob_ops.delete_custom(
                    self.shared.api, RAYCLUSTER, namespace, name, preconditions=unchanged
                ):
                    return False
                reason = Reason.DELETED
        except ops.KubeError as exc:
            if exc.status not in ops.TEST_FAILED:
                log.warning("idle termination of %s/%s failed: %s", *key, exc)
            return False
        log.info("%s/%s %s: %s", namespace, name, reason, act.message)
        self.shared.events.post(meta.subject(), "Normal", str(reason), act.message)
        return True


def _unchanged(meta: ClusterMeta) -> list[dict[str, Any]]:
    """The ``test`` operations that refuse a suspension when the cluster's spec or its opt-in is no
    longer what the decision read (an annotation change moves no generation)."""
    tests: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/generation", "value": meta.generation}]
    for annotation in (SECONDS_ANNOTATION, ACTION_ANNOTATION):
        if annotation in meta.annotations:
            pointer = "/metadata/annotations/" + annotation.replace("~", "~0").replace("/", "~1")
            tests.append({"op": "test", "path": pointer, "value": meta.annotations[annotation]})
    return tests


def status_patch(autoscaler_status: Mapping[str, Any] | None, idle: Obj | None) -> dict[str, Any] | None:
    """For a cluster rayscale does not autoscale: the merge patch of its status that makes
    ``status.autoscaler.conditions`` just `idle` (None: nothing to write)."""
    written = dict(autoscaler_status or {})
    if idle is None:
        return {"status": {"autoscaler": None}} if written else None
    if written == {"conditions": [dict(idle)]}:
        return None
    cleared: dict[str, Any] = {k: None for k in written if k != "conditions"}  # an autoscaled past
    return {"status": {"autoscaler": {**cleared, "conditions": [dict(idle)]}}}
