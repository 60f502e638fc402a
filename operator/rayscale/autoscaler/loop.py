"""The live autoscaler: one loop per RayCluster with ``enableInTreeAutoscaling: true``.

`Autoscaler` runs a round of a cluster on a RayCluster, pod or RayResourceRequest change, and at
least every `interval` seconds. Here it decides only whether rayscale autoscales the cluster
(eligibility.py); a cluster it does not gets its requests told why, its state dropped and, when the
user asked, an ``AutoscalingRefused`` Warning; one that opted into idle termination still has its
GCS read for its idle clock (idle_apply.py), and one with a disruption notice (outside ``--mode
autoscaler``) for its drains and deletions (notices_only.py). The rest is three parts, each a screen or two:

- the round (decide.py): read, trust, snapshot, schedule, drain, patch;
- the GCS link (gcs_link.py): read Ray, report to Ray, drain Ray's nodes;
- the reporter (reporter.py): request statuses, ``status.autoscaler``, Events, metrics;

with what they keep about each cluster from round to round in memory.py (`ClusterMemory`) and the
texts of their Events in texts.py. The autoscaler also serves what the latest rounds kept
(`view`, `fleet`, `history_scenario`): the life of every replica (lifecycle.py), the recent
decisions (history.py) and what the latest round saw (view.py), with what marked the cluster since
its last round (the decision's trigger).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes_asyncio import client

from rayscale.autoscaler import quota_check
from rayscale.autoscaler.config import AutoscalerConfig
from rayscale.autoscaler.decide import Round
from rayscale.autoscaler.eligibility import eligibility
from rayscale.autoscaler.gcs_link import GcsLink
from rayscale.autoscaler.history import PERIODIC
from rayscale.autoscaler.idle_apply import Cluster as IdleCluster
from rayscale.autoscaler.idle_apply import opted_in
from rayscale.autoscaler.memory import Memories, Shared
from rayscale.autoscaler.notices_only import NoticesOnly, cleared, clusters_on, status_with
from rayscale.autoscaler.reporter import Reporter
from rayscale.autoscaler.requests import pending_status
from rayscale.autoscaler.spec_reader import ScalingSpec, SpecError, read_spec
from rayscale.autoscaler.status import clear_autoscaler_patch
from rayscale.autoscaler.texts import not_taken_message
from rayscale.autoscaler.view import cluster_view, fleet_entry
from rayscale.autoscaler.virtual.apply import VirtualClusters
from rayscale.cluster.meta import ClusterMeta
from rayscale.common.pods import is_head, is_terminating
from rayscale.common.retry import Failed, spec_version
from rayscale.common.types import ClusterKey, Obj
from rayscale.common.workqueue import WorkQueue
from rayscale.disruption.notice import Notice
from rayscale.kube import flow, ops
from rayscale.kube.events import EventSink
from rayscale.metrics import Metrics

__all__ = ["Autoscaler", "AutoscalerConfig", "AutoscalerSource"]


class AutoscalerSource(Protocol):
    """What the autoscaler sees (kopf's indexes in production)."""

    def cluster(self, key: ClusterKey) -> Obj | None: ...
    def pods(self, key: ClusterKey) -> Sequence[Obj]: ...
    def requests(self, key: ClusterKey) -> Sequence[Obj]: ...
    def virtual_clusters(self, key: ClusterKey) -> Sequence[Obj]: ...


class Autoscaler:
    def __init__(
        self,
        api: client.ApiClient,
        source: AutoscalerSource,
        events: EventSink,
        config: AutoscalerConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: Metrics | None = None,
        node_notices: Mapping[str, Notice] | None = None,
    ) -> None:
        self.api = api
        self.source = source
        self.events = events
        self.config = config
        self.clock = clock  # backoff and grace periods
        self.wall_clock = wall_clock  # pod ages and the boot clocks (compared with pod timestamps)
        self.metrics = metrics if metrics is not None else Metrics()
        self.queue: WorkQueue[ClusterKey] = WorkQueue(
            self.step,
            concurrency=config.concurrency,
            observer=self.metrics.queue("autoscaler"),
            name="autoscaling round of RayCluster",
            version=lambda key: spec_version(self.source.cluster(key)),
        )
        self._memory = Memories(clock)  # what each cluster's rounds keep
        self.vclusters = VirtualClusters(api, events)
        shared = Shared(
            api,
            events,
            config,
            self._memory,
            self.metrics,
            pods=source.pods,
            virtual_clusters=source.virtual_clusters,
            clock=clock,
            wall_clock=wall_clock,
            node_notices=node_notices if node_notices is not None else {},
        )
        self.link = GcsLink(shared)
        self.reporter = Reporter(shared, self.link)
        self.round = Round(shared, self.link, self.reporter, self.vclusters)
        self.notices = NoticesOnly(shared, self.link, self.reporter)  # clusters it does not autoscale

    def mark(self, key: ClusterKey, reason: str = "") -> None:
        """Run a round of `key` soon; `reason` (what changed: "RayCluster", "pod", ...) is recorded
        as the round's trigger."""
        if reason:
            self._memory.served(key).triggers.add(reason)
        self.queue.mark(key)

    def pod_create_refused(self, key: ClusterKey, group: str, status: int, message: str) -> None:
        """The controller's create of a pod of `group` was refused: a ResourceQuota's refusal fails
        the group's launches at once (quota_check.py) in a round run now. Clusters rayscale does
        not autoscale are left alone."""
        memory = self._memory.get(key)
        if memory is None or memory.dormant:
            return
        if quota_check.record(memory, group, status, message, self.wall_clock()):
            self.mark(key, "quota")

    def node_changed(self, node: str) -> None:
        """The disruption notice of the Kubernetes node `node` came, changed or went: a round soon
        for each cluster with a pod on that node, autoscaled or not (not beside KubeRay's operator:
        only the ones it autoscales there). Walks every cluster's pods (notices_only.clusters_on)."""
        every = not self.config.beside_kuberay
        for key in clusters_on(node, self.source, list(self._memory), every):
            self.mark(key, "node")

    # ---- what the operator serves (cheap, synchronous: built from what the latest round kept) ----

    def view(self, key: ClusterKey) -> dict[str, Any] | None:
        """The JSON-ready view of one autoscaled cluster (view.py), None before its first round.

        Like `fleet` and `history_scenario`: no I/O, built from what the latest round kept; call it
        on the operator's event loop (the rounds change what it reads between their awaits)."""
        served = self._memory.served_now(key)
        if served is None or served.observed is None:
            return None
        return cluster_view(served.observed, served.history.newest_first())

    def fleet(self) -> list[dict[str, Any]]:
        """The short view of every autoscaled cluster, by namespace and name."""
        served = (self._memory.served_now(key) for key in sorted(self._memory))
        return [fleet_entry(s.observed) for s in served if s is not None and s.observed is not None]

    def history_scenario(self, key: ClusterKey, index: int = 0) -> dict[str, Any] | None:
        """The scenario document (what ``rayscale simulate`` reads) of the `index`-th newest decision
        of `key`, None when it has none (only the newest few keep theirs)."""
        served = self._memory.served_now(key)
        return None if served is None else served.history.scenario(index)

    async def run(self) -> None:
        try:
            await self.queue.run()
        finally:
            await self.close()

    async def close(self) -> None:
        """Close every cached GCS channel and drop the status writes not yet sent (`run` does so
        when it ends)."""
        for key in [k for k, m in self._memory.items() if m.gcs is not None]:
            await self.link.close(key)
        await self.reporter.writer.close()

    # ---- one round ----

    async def step(self, key: ClusterKey) -> float | Failed | None:
        """One round; a failed API call (the patch above all) makes it `Failed`, and the queue backs
        the cluster off (rayscale.common.retry) while other clusters keep their rounds."""
        try:
            with flow.working_for(flow.cluster_flow(key)):  # the rate limit serves clusters in turn
                return await self._step(key)
        except ops.KubeError as exc:
            return Failed(str(exc), exc.retry_after)

    def _trigger(self, key: ClusterKey) -> str:
        """What marked `key` since its last round began ("periodic" when nothing did)."""
        served = self._memory.served_now(key)
        if served is None or not served.triggers:
            return PERIODIC
        trigger = ", ".join(sorted(served.triggers))
        served.triggers.clear()
        return trigger

    async def _step(self, key: ClusterKey) -> float | Failed | None:
        trigger = self._trigger(key)
        cluster = self.source.cluster(key)
        requests = list(self.source.requests(key))
        beside, alone = self.config.beside_kuberay, self.config.notices_only
        taken, noticed = None, False
        if cluster is not None:
            # Only in-tree autoscaling, rayscale's own controller, reads the head: every pod event
            # steps the cluster, so a walk over its pods costs only where it is needed.
            in_tree = bool((cluster.get("spec") or {}).get("enableInTreeAutoscaling"))
            head = self._live_head(key) if in_tree and not beside and not alone else None
            taken = eligibility(cluster, beside_kuberay=beside, head=head)
            deleting = ClusterMeta.from_body(cluster).deleting
            noticed = self.notices.concerned(key, deleting=deleting)  # no I/O
        if alone:  # --mode controller: rayscale autoscales no cluster, only acts on notices
            scaling = None
            with contextlib.suppress(SpecError):  # rayscale's controller builds nothing for it
                if cluster is not None and noticed:
                    scaling = read_spec(cluster, check=True, max_pods=self.config.max_pods)
            if scaling is not None:
                return await self.notices.alone(key, scaling)
            await self._forget(key, keep_backoff=cluster is not None)
            if cluster is not None:  # the Disruption condition it wrote
                await self.reporter.write_cluster_status(key, cleared(_written(cluster)))
            return None
        if cluster is None or taken is None or not taken.take:
            refusal = taken.refusal if taken else None
            if cluster is not None:
                meta = ClusterMeta.from_body(cluster)
                if (opted_in(meta.annotations) and not meta.deleting) or noticed:
                    return await self._idle_only(key, cluster, requests, refusal, noticed=noticed)
            await self._not_taken(key, cluster, requests, refusal)
            return None
        self._memory.of(key).dormant = False  # this round may keep anything in it
        if ClusterMeta.from_body(cluster).deleting:
            return None
        return await self.round.run(key, cluster, requests, trigger)

    def _live_head(self, key: ClusterKey) -> Obj | None:
        return next((p for p in self.source.pods(key) if is_head(p) and not is_terminating(p)), None)

    async def _not_taken(
        self, key: ClusterKey, cluster: Obj | None, requests: list[Obj], refusal: str | None
    ) -> None:
        """A cluster rayscale does not autoscale: its requests wait, its state is dropped, and a
        refusal (the user asked, but it cannot be done) is posted once as a Warning Event."""
        if cluster is not None and refusal:
            self.reporter.refused(key, cluster, refusal)
        beside = self.config.beside_kuberay
        message = not_taken_message(*key, exists=cluster is not None, beside_kuberay=beside)
        await self.reporter.write_statuses(key, requests, lambda r: pending_status(r, message))
        vcs = list(self.source.virtual_clusters(key))
        if vcs:
            await self.vclusters.not_taken(key, vcs, f"spec.rayClusterName: {message}", self.wall_clock())
        await self._forget(key, keep_backoff=cluster is not None)
        if cluster is not None:
            await self.reporter.write_cluster_status(key, clear_autoscaler_patch(_written(cluster)))

    async def _idle_only(
        self, key: ClusterKey, cluster: Obj, requests: list[Obj], refusal: str | None, *, noticed: bool
    ) -> float | Failed | None:
        """A cluster rayscale does not autoscale that opted into idle termination, or has a
        disruption notice (`noticed`): its requests wait, its GCS is read for its idle clock and its
        notices alone, and ``status.autoscaler`` holds just the ``IdleTermination`` and
        ``Disruption`` conditions. Looked at again every `interval` (sooner when its clock ends)."""
        if refusal:
            self.reporter.refused(key, cluster, refusal)
        beside = self.config.beside_kuberay
        message = not_taken_message(*key, exists=True, beside_kuberay=beside)
        await self.reporter.write_statuses(key, requests, lambda r: pending_status(r, message))
        self._memory.of(key).dormant = False
        scaling: ScalingSpec | None = None
        try:
            scaling = read_spec(cluster, check=not beside, max_pods=self.config.max_pods)
        except SpecError:  # rayscale's controller builds nothing for it: Ray's state is unknown
            spec = cluster.get("spec") or {}
            seen = IdleCluster(ClusterMeta.from_body(cluster), spec.get("suspend") is True, _written(cluster))
            state = None
        else:
            seen, state = IdleCluster.of(scaling), await self.link.state(key, scaling)
        idle = self.reporter.idle
        wait = await idle.check(key, seen, state, requests)
        disrupted = await self.notices.act(key, scaling, state) if noticed and scaling is not None else None
        patch = status_with(_written(cluster), idle.condition(key), disrupted)
        await self.reporter.write_cluster_status(key, patch)
        return self.config.interval if wait is None else min(wait, self.config.interval)

    async def _forget(self, key: ClusterKey, *, keep_backoff: bool) -> None:
        self.reporter.idle.forget(key)
        self.notices.forget(key)
        self.queue.forget(key)
        self.vclusters.forget(key)
        self.reporter.writer.forget(key)
        memory = self._memory.pop(key, None)
        if memory is not None:
            dormant = memory.dormant and keep_backoff
            self._memory[key] = memory if dormant else memory.forgotten(self.clock, keep_backoff=keep_backoff)
        self.metrics.forget_cluster(key)
        if memory is not None and memory.gcs is not None:
            await memory.gcs[2].close()


def _written(cluster: Obj) -> Obj | None:
    """The ``status.autoscaler`` of a cluster rayscale does not take (it is never read by the reader)."""
    found: Obj | None = (cluster.get("status") or {}).get("autoscaler")
    return found
