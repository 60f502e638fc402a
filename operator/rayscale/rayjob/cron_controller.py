"""The RayCronJob controller: keeps the RayCronJobs kopf's handler sees, runs the plan
(`rayscale.rayjob.cron.plan_cron`) for one at a time per RayCronJob (a work queue), creates the
tick's RayJob, then writes the status. I/O.

A reconcile runs when the RayCronJob changes, when a RayJob it made (labelled
``ray.io/cronjob-name``) changes, as KubeRay's controller owns its RayJobs, and at the next tick
(the plan's requeue). The RayJobs are looked up in the RayJob controller's index (`RayJobIndex`).
A create the API server refuses with AlreadyExists is the tick's RayJob made before (by this
operator before a restart, or by a reconcile whose status write was lost): done, once the RayJob
is found to be this RayCronJob's. A failed create or status write is retried after its backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client

from rayscale.api.names import RAYCRONJOB, RAYJOB
from rayscale.common.retry import Failed
from rayscale.common.types import ClusterKey, Obj
from rayscale.common.workqueue import QueueObserver, WorkQueue
from rayscale.kube import flow
from rayscale.kube import rayjob_ops as ops
from rayscale.kube.events import EventSink
from rayscale.kube.ops import KubeError, send
from rayscale.rayjob.cron import EV_NAME_TAKEN, NAME_LABEL, owned_by, plan_cron
from rayscale.rayjob.index import RayJobIndex

__all__ = ["RayCronJobController"]

log = logging.getLogger(__name__)


class _Namespace(Mapping[str, Obj]):
    """One namespace's RayJobs of the RayJob index, by name (looked up, never copied)."""

    def __init__(self, rayjobs: Mapping[ClusterKey, Obj], namespace: str) -> None:
        self._rayjobs, self._ns = rayjobs, namespace

    def __getitem__(self, name: str) -> Obj:
        return self._rayjobs[(self._ns, name)]

    def __iter__(self) -> Iterator[str]:
        return (name for ns, name in self._rayjobs if ns == self._ns)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class RayCronJobController:
    def __init__(
        self,
        api: Any,
        rayjobs: RayJobIndex,
        recorder: EventSink,
        *,
        concurrency: int = 4,
        observer: QueueObserver | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = api
        self.rayjobs = rayjobs
        self.recorder = recorder
        self.clock = clock
        self.cronjobs: dict[ClusterKey, Obj] = {}
        self.queue: WorkQueue[ClusterKey] = WorkQueue(
            self.reconcile, concurrency=concurrency, observer=observer, name="reconcile of raycronjob"
        )

    # ---- what kopf's handlers see

    def cronjob_event(self, kind: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if kind == "DELETED":
            self.cronjobs.pop(key, None)
        else:
            self.cronjobs[key] = dict(obj.items())
        self.queue.mark(key)

    def rayjob_changed(self, rayjob: Obj) -> None:
        """A RayJob changed: if a RayCronJob made it, look at that RayCronJob again."""
        meta = rayjob.get("metadata") or {}
        owner = (meta.get("labels") or {}).get(NAME_LABEL)
        if owner:
            self.queue.mark((str(meta.get("namespace") or ""), str(owner)))

    async def run(self) -> None:
        for key in list(self.cronjobs):
            self.queue.mark(key)
        await self.queue.run()

    # ---- one reconcile

    async def reconcile(self, key: ClusterKey) -> float | Failed | None:
        """One reconcile of `key`, its API requests as the RayCronJob's own flow of the rate limit."""
        with flow.working_for(flow.job_flow("raycronjob", key)):
            return await self._reconcile(key)

    async def _reconcile(self, key: ClusterKey) -> float | Failed | None:
        found = self.cronjobs.get(key)
        if found is None:
            return None
        cronjob = {**RAYCRONJOB.type_meta(), **found, "metadata": dict(found["metadata"])}
        step = plan_cron(cronjob, self.clock(), _Namespace(self.rayjobs.rayjobs, key[0]))
        for event in step.events:
            self.recorder.post(cronjob, event.type, event.reason, event.message)
        if step.error is not None:
            log.info("raycronjob %s/%s: %s", *key, step.error)
            return Failed(step.error)
        if step.create is not None:
            manifest = step.create.manifest
            name = manifest["metadata"]["name"]
            try:
                created = await ops.create_custom(self.api, RAYJOB, manifest)
                if not created:
                    await self._made_before(cronjob, name)
            except KubeError as exc:
                log.info("raycronjob %s/%s: creating RayJob %s: %s", *key, name, exc)
                return Failed(str(exc), exc.retry_after)
            log.info(
                "raycronjob %s/%s: %s RayJob %s for the tick %s",
                *key,
                "created" if created else "found (created before)",
                name,
                step.create.at.isoformat(),
            )
        if step.status is not None:
            try:
                written = await ops.replace_status(self.api, RAYCRONJOB, {**cronjob, "status": step.status})
            except KubeError as exc:
                log.info("raycronjob %s/%s: %s", *key, exc)
                return Failed(str(exc), exc.retry_after)
            if key in self.cronjobs:
                self.cronjobs[key] = written
        return step.requeue

    async def _made_before(self, cronjob: Obj, name: str) -> None:
        """AlreadyExists: the tick's RayJob, if this RayCronJob owns it; else KubeError."""
        ns = cronjob["metadata"]["namespace"]
        objects: Any = client.CustomObjectsApi(self.api)
        call = objects.get_namespaced_custom_object(*RAYJOB.at(ns), name, _preload_content=False)
        existing: Obj = await send(call, f"get rayjobs/{name}", body=True)
        if not owned_by(existing, cronjob):
            message = f"RayJob {ns}/{name} exists and is not this RayCronJob's"
            self.recorder.post(cronjob, "Warning", EV_NAME_TAKEN, message)
            raise KubeError(message)
