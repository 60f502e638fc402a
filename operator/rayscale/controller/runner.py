"""One reconcile of one RayCluster: snapshot -> plan -> apply -> status. Plus the queue driving it."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes_asyncio import client

from rayscale.batch.registry import lookup
from rayscale.cluster.limits import DEFAULT_MAX_PODS
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.validation import Invalid
from rayscale.common.retry import Failed, spec_version
from rayscale.common.types import ClusterKey
from rayscale.common.workqueue import QueueObserver, WorkQueue
from rayscale.controller import budgets, finalize, redis_cleanup
from rayscale.controller.apply import CreateListener, PlanApplier
from rayscale.controller.budgets_apply import BudgetKeeper, Unchanged, condition_value
from rayscale.controller.expectations import STUCK_TERMINATING_AFTER, ScaleExpectations
from rayscale.controller.podgroups_apply import PodGroupKeeper
from rayscale.controller.reconcile import PlannerOptions, plan_cluster
from rayscale.controller.snapshot import ClusterSnapshot
from rayscale.controller.status import (
    ReconcileError,
    compute_status,
    invalid_status,
    progress_only,
    put_condition,
    status_changed,
    status_patch,
)
from rayscale.kube import flow, ops
from rayscale.kube.events import EventSink

log = logging.getLogger(__name__)
#: A RayCluster's reconciles start at least this far apart (its pods' watch events meanwhile
#: coalesce): a reconcile reads every pod of the cluster, and a scale-up brings several events per
#: pod. A large cluster's are further apart: `SPACING_PER_POD` for each pod it had at the last one
#: (0.25 s at 1,000 pods), so that one cluster's reconciles take a bounded share of the CPU (a
#: reconcile costs about 15 us per pod: 6% of a core at any size) instead of growing with it.
RECONCILE_SPACING = 0.1
SPACING_PER_POD = 0.00025
#: A status write that only follows the pods coming up (`status.progress_only`: the worker
#: counts, the head's pod name and IP, the endpoints, a condition's reason while its status stays)
#: waits until this long after the cluster's last one: as a cluster's pods come up one by one,
#: each reconcile would otherwise write, and each write comes back as a watch event. A cluster's
#: first status, and any other change (a state, a condition turning, an error), is written at once.
PROGRESS_SPACING = 1.0


@dataclasses.dataclass(frozen=True)
class Written:
    """The controller's last status write of a RayCluster."""

    at: float  # loop time
    version: str  # the RayCluster's resourceVersion it was computed from
    status: Mapping[str, Any]


class ClusterSource(Protocol):
    """What the controller currently sees (kopf's indexes in production)."""

    def cluster(self, key: ClusterKey) -> Mapping[str, Any] | None: ...
    def pods(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]: ...
    def services(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]: ...
    def cluster_keys(self) -> Sequence[ClusterKey]: ...


@dataclasses.dataclass(frozen=True)
class ControllerConfig:
    concurrency: int = 16
    rayjob_concurrency: int = 64  # RayJobs and RayCronJobs reconciled in parallel (each mostly waits on Ray)
    resync_seconds: float = 60.0
    stuck_terminating_seconds: float = STUCK_TERMINATING_AFTER
    random_delete: bool = False
    sidecar_autoscaler: bool = False  # --mode controller: Ray's autoscaler in the head pod
    max_pods: int = DEFAULT_MAX_PODS  # --max-pods-per-cluster: worker pods one RayCluster may ask for
    spacing: float = RECONCILE_SPACING  # seconds between the starts of one RayCluster's reconciles
    spacing_per_pod: float = SPACING_PER_POD  # ... and at least this for each of its pods
    batch_scheduler: str = ""  # --batch-scheduler: KubeRay's name of it (rayscale.batch), "" for none


class RayClusterController:
    def __init__(
        self,
        api: client.ApiClient,
        source: ClusterSource,
        events: EventSink,
        config: ControllerConfig,
        *,
        observer: QueueObserver | None = None,
        creates: CreateListener | None = None,
    ) -> None:
        self.api = api
        self.source = source
        self.events = events
        self.config = config
        self.expectations = ScaleExpectations(stuck_after=config.stuck_terminating_seconds)
        self.applier = PlanApplier(api, self.expectations, events, creates)
        self.budgets = BudgetKeeper(api, events, recheck=config.resync_seconds)
        self.pod_groups = PodGroupKeeper(api, events, recheck=config.resync_seconds)
        self.queue: WorkQueue[ClusterKey] = WorkQueue(
            self.reconcile,
            concurrency=config.concurrency,
            observer=observer,
            name="reconcile of RayCluster",
            version=lambda key: spec_version(self.source.cluster(key)),
            spacing=self._spacing,
        )
        self._sizes: dict[ClusterKey, int] = {}  # pods at each cluster's last reconcile
        self._written: dict[ClusterKey, Written] = {}
        self.options = PlannerOptions(
            random_delete=config.random_delete,
            sidecar_autoscaler=config.sidecar_autoscaler,
            max_pods=config.max_pods,
            batch=lookup(config.batch_scheduler),
        )

    def mark(self, key: ClusterKey) -> None:
        self.queue.mark(key)

    def _spacing(self, key: ClusterKey) -> float:
        return max(self.config.spacing, self.config.spacing_per_pod * self._sizes.get(key, 0))

    async def run(self) -> None:
        await asyncio.gather(self.queue.run(), self._resync())

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.config.resync_seconds)
            for key in self.source.cluster_keys():
                self.queue.mark(key)

    async def reconcile(self, key: ClusterKey) -> float | Failed | None:
        """One reconcile; a failed API call makes it `Failed`, and the queue backs the cluster off.

        Its requests are the RayCluster's flow: the API client's rate limit serves the clusters
        waiting for it in turn (`rayscale.kube.fairbucket`)."""
        try:
            with flow.working_for(flow.cluster_flow(key)):
                return await self._reconcile(key)
        except ops.KubeError as exc:
            return Failed(str(exc), exc.retry_after)

    async def _reconcile(self, key: ClusterKey) -> float | Failed | None:
        body = self.source.cluster(key)
        if body is None:
            self.expectations.forget_cluster(*key)
            self.queue.forget(key)
            self._sizes.pop(key, None)
            self._written.pop(key, None)
            self.budgets.forget(key)
            self.pod_groups.forget(key)
            return None
        # The one reader: after it the reconcile reads the typed snapshot, never `body`.
        snapshot = ClusterSnapshot(body, list(self.source.pods(key)), list(self.source.services(key)))
        meta = snapshot.meta
        self._sizes[key] = len(snapshot.pods)
        if meta.deleting and redis_cleanup.FINALIZER in meta.finalizers:
            return await finalize.redis_cleanup_step(self.api, self.applier, self.events, snapshot)
        plan, spec = plan_cluster(snapshot, self.expectations, self.options)
        if plan.add_finalizer is not None:
            await finalize.add_finalizer(self.api, meta, plan.add_finalizer)
            return plan.requeue_after
        if plan.skip or spec is None:
            return None
        for event in plan.events:
            self.events.post(meta.subject(), event.type, event.reason, event.message, event.action)
        now, old = datetime.now(UTC), snapshot.stored_status
        if isinstance(spec, Invalid):
            bad = invalid_status(meta, old, spec.reason, spec.message, now=now)
            await self._write_status(key, meta, old, bad, now)
            return None
        error = ReconcileError(plan.error) if plan.error else None
        if plan.error:
            self.events.post(meta.subject(), "Warning", "ReconcileError", plan.error)
        error = await self.applier.create_once(meta, plan.secrets, plan.ingresses, plan.rbac) or error
        error = await self.applier.create_services(meta, plan.services) or error
        # As KubeRay: no pod is made before its batch scheduler's PodGroup.
        held = await self.pod_groups.keep(meta, plan.pod_group) if plan.pod_group else None
        error = held or error
        if held is None and (error is None or error.reason is None):
            wanted = functools.partial(self._wanted, key, meta.uid)
            error = await self.applier.run_steps(meta, plan.steps, wanted) or error
        new = compute_status(meta, spec, old, snapshot.pods, snapshot.services, error=error, now=now)
        kept = await self.budgets.keep(meta, spec, snapshot.pods, snapshot.condition(budgets.CONDITION))
        if not isinstance(kept, Unchanged):
            value = condition_value(kept)
            new = put_condition(new, budgets.CONDITION, value, now=now, generation=meta.generation)
        deferred = await self._write_status(key, meta, old, new, now)
        if error is not None:
            return Failed(error.message, error.retry_after)
        if deferred is not None:
            return deferred if plan.requeue_after is None else min(deferred, plan.requeue_after)
        return plan.requeue_after

    def _wanted(self, key: ClusterKey, uid: str) -> bool:
        """The RayCluster is still there, the same one, and not being deleted (what the watch says
        now: a deletion seen mid-reconcile stops its creates)."""
        body = self.source.cluster(key)
        if body is None:
            return False
        meta = ClusterMeta.from_body(body)  # the watch's newer copy, read as the snapshot reads it
        return meta.uid == uid and not meta.deleting

    async def _write_status(
        self,
        key: ClusterKey,
        meta: ClusterMeta,
        old: Mapping[str, Any],
        new: dict[str, Any],
        now: datetime,
    ) -> float | None:
        """Write `new` over `old` (the status the watch shows) if they differ; None, or the seconds
        after which to reconcile again when the write waits (`PROGRESS_SPACING`).

        While the watch still shows the resourceVersion this controller's last write was computed
        from, that write is what is stored: `new` is compared with it, not with the older copy (a
        worker count that went down with that write and back up since is written again), and a
        status equal to it is not written twice."""
        version = meta.resource_version
        last = self._written.get(key)
        if last is not None and last.version == version:
            old = last.status  # the watch has not delivered that write yet
        if not status_changed(old, new):
            return None
        clock = asyncio.get_running_loop().time()
        if last is not None:
            wait = last.at + PROGRESS_SPACING - clock
            if wait > 0 and progress_only(old, new):
                return wait
        # A KubeError fails the reconcile: the queue logs it and backs the cluster off.
        await ops.patch_raycluster_status(self.api, key[0], key[1], status_patch(old, new, now=now))
        self._written[key] = Written(clock, version, new)
        return None
