"""The live autoscaler: one loop per RayCluster with ``enableInTreeAutoscaling: true``.

Each round (on a RayCluster, pod or RayResourceRequest change, and at least every `interval`
seconds): read the cluster and its pods from the watch-fed indexes, the RayResourceRequests bound to
it, and Ray's state from the GCS (None when unreachable: then nothing running is removed) -> whether
Ray can be trusted to remove anything (trust.py: the head's raylet runs, no recent GCS session
change, the GCS's view settled after an outage) -> ``build_snapshot`` -> ``schedule`` -> drop the
removals the patch would not write (``writable``) -> drain the hosts of the IDLE and DRAINED
removals left, host by host (refused replicas stay; accepted hosts are remembered as draining until
their removal is written) -> ``build_patch`` -> one JSON patch guarded by a resourceVersion
``test``, with what it writes per group (the round's Events and metrics are told from that). A
failed test (409/422) re-plans on the cluster read fresh from the API server. Launch failures
named in the patch start the group's backoff and are remembered for Ray's "Recent
failures"; dead Ray nodes get a ``RayNodeDied`` Event. Then every RayResourceRequest of the cluster
gets its status, Ray's GCS the round's ``AutoscalingState`` (ray_report.py: pending launches and
pods, recent launch failures, infeasible demand; what ``ray status`` shows), the RayCluster its
``status.autoscaler`` (a merge patch of that one key, only when it changed) with the
``RayCompatible`` condition (compat.py; an Event when it changes) and, when
``rayscale.io/gcs-address`` names another address than the head Service, the ``GcsAddressOverride``
condition (gcs_override.py; an Event when it changes), an ``UnmetDemand`` Event when the unmet
demand changed, and the metrics their values.

Per cluster the loop keeps one `ClusterMemory`: each group's backoff, since when each group has been
short of pods, since when each running pod has had no Ray node, the pods whose drain was accepted,
the GCS session last seen, which GCS methods answered (UNIMPLEMENTED ones make the cluster
incompatible), the recent launch failures, the version of the last report to Ray and where its GCS
was dialed; and what it serves about the cluster (`view`, `fleet`, `history_scenario`): the life of
every replica (lifecycle.py: ``status.autoscaler.replicas``, ``ReplicaFailed`` and
``ReplicaSlowToStart`` Events), the recent decisions (history.py) and what the latest round saw
(view.py), with what marked the cluster since its last round (the decision's trigger).

The GCS (and with it the cluster's Ray auth token) is the head Service's unless the operator allows
the annotation to override it (``AutoscalerConfig.allow_gcs_address_override``, the flag
``--allow-gcs-address-override``): see ``rayscale.ray.address.gcs_target``.

All decisions live in the pure modules (snapshot, trust, scheduler, drain, patch, requests,
status, ray_report, compat, gcs_override); this is I/O.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, Protocol

from kubernetes_asyncio import client

from rayscale.autoscaler.backoff import Backoff
from rayscale.autoscaler.compat import (
    CLUSTER_STATE,
    DRAIN,
    REPORT,
    GcsSupport,
    compat_condition,
    compat_event,
    find_condition,
)
from rayscale.autoscaler.drain import DrainUnit, drain_plan, still_draining, without
from rayscale.autoscaler.draining import drain_units
from rayscale.autoscaler.eligibility import OPT_IN_ANNOTATION, eligibility
from rayscale.autoscaler.gcs_override import find_override, override_condition, override_event
from rayscale.autoscaler.history import PERIODIC, DecisionHistory, decision_record
from rayscale.autoscaler.lifecycle import (
    SLOW_START_SECONDS,
    Lives,
    next_lives,
    notices,
    replica_summary,
    unit,
)
from rayscale.autoscaler.patch import ClusterPatch, build_patch, writable
from rayscale.autoscaler.provision_events import ProvisionEvents
from rayscale.autoscaler.ray_report import (
    LaunchFailure,
    autoscaling_state,
    launch_failures,
    next_version,
    remember,
)
from rayscale.autoscaler.requests import INVALID_BUNDLES, decision_status, pending_status, status_patch
from rayscale.autoscaler.scheduling.model import Decision, RemovalCause, Snapshot
from rayscale.autoscaler.snapshot import build_snapshot, is_unborn, ray_missing_since, short_groups
from rayscale.autoscaler.spec_reader import ScalingSpec, SpecError, read_spec
from rayscale.autoscaler.status import (
    REFRESH_SECONDS,
    GcsHealth,
    UnmetKey,
    autoscaler_patch,
    autoscaler_status,
    clear_autoscaler_patch,
    unmet_by_reason,
    unmet_key,
    unmet_notice,
    waiting_bundles,
)
from rayscale.autoscaler.trust import (
    DEFAULT_GRACE_SECONDS,
    Hold,
    Session,
    held_snapshot,
    hold,
    next_session,
    without_launches,
    without_removals,
)
from rayscale.autoscaler.view import Observed, cluster_view, fleet_entry
from rayscale.autoscaler.virtual.apply import VirtualClusters
from rayscale.autoscaler.virtual.plan import plan as plan_with_vcs
from rayscale.cluster.limits import DEFAULT_MAX_PODS
from rayscale.common.pods import is_head, is_terminating, phase, pod_name
from rayscale.common.retry import Failed, spec_version
from rayscale.common.workqueue import WorkQueue
from rayscale.kube import ops
from rayscale.kube.events import EventSink
from rayscale.metrics import Metrics
from rayscale.ray.address import AddressError, GcsTarget, auth_token_secret, gcs_target
from rayscale.ray.client import GcsClient, GcsError
from rayscale.ray.model import ClusterState

__all__ = ["Autoscaler", "AutoscalerConfig", "AutoscalerSource"]

log = logging.getLogger(__name__)
ClusterKey = tuple[str, str]  # (namespace, name)
Obj = Mapping[str, Any]
CONFLICT_ATTEMPTS = 3
TEST_FAILED = (409, 422)  # what the API server answers when the resourceVersion test fails
RRR_API = {"apiVersion": "rayscale.io/v1alpha1", "kind": "RayResourceRequest"}


class Conflict(Exception):
    """The patch's resourceVersion test failed (or the API server refused it with 422)."""


@dataclasses.dataclass(frozen=True)
class AutoscalerConfig:
    interval: float = 5.0
    concurrency: int = 16
    gcs_timeout: float = 2.0
    gcs_retries: int = 1
    max_node_provision_seconds: float = 900.0
    max_node_boot_seconds: float = 3600.0
    unprovisioned_grace_seconds: float = 120.0  # unschedulable, no node being provisioned: fails then
    head_restart_grace_seconds: float = DEFAULT_GRACE_SECONDS  # no removals this long after a session change
    status_refresh_seconds: float = REFRESH_SECONDS  # rewrite an unchanged status.autoscaler this often
    beside_kuberay: bool = False  # --mode autoscaler: only opted-in clusters (eligibility.py)
    max_pods: int = DEFAULT_MAX_PODS  # --max-pods-per-cluster: never more worker pods than this
    # --allow-gcs-address-override: follow rayscale.io/gcs-address (and send the token there)
    allow_gcs_address_override: bool = False
    slow_start_seconds: float = SLOW_START_SECONDS  # a replica starting longer: ReplicaSlowToStart
    # --cluster-selector: is a RayCluster read fresh from the API server still this operator's? (its
    # labels may have moved it to another shard since the watch delivered it)
    owns: Callable[[Obj], bool] = lambda _: True


@dataclasses.dataclass
class _Served:
    """What the operator serves about one cluster (view.py), kept from round to round."""

    triggers: set[str] = dataclasses.field(default_factory=set)  # what marked it since its last round
    lives: Lives = dataclasses.field(default_factory=Lives)
    history: DecisionHistory = dataclasses.field(default_factory=DecisionHistory)
    observed: Observed | None = None  # the latest round


@dataclasses.dataclass
class ClusterMemory:
    """What the loop keeps about one cluster from round to round (`Autoscaler._memory`).

    `Autoscaler._forget` drops it when rayscale stops autoscaling the cluster, but for what must
    outlive that (`forgotten`): the refusal posted and the request statuses written (so that they
    are not posted or written again) and, while the cluster exists, its groups' backoff.
    """

    backoff: Backoff  # each group's backoff after launch failures (the loop's monotonic clock)
    # group -> until when it backs off (wall clock), for status.autoscaler and the view
    backoff_until: dict[str, datetime] = dataclasses.field(default_factory=dict)
    # group -> since when it has had replicas without pods (the provisioning clock of unborn replicas)
    short_since: dict[str, datetime] = dataclasses.field(default_factory=dict)
    # pod -> since when it has run without a Ray node (the boot clock of running pods)
    missing_since: dict[str, datetime] = dataclasses.field(default_factory=dict)
    draining: frozenset[str] = frozenset()  # pods whose drain was accepted, until their removal is written
    session: Session | None = None  # the GCS session last seen
    back_at: float | None = None  # when the GCS last answered again after an outage (monotonic)
    hold: Hold | None = None  # the hold of the last round (logged once per reason)
    gcs: tuple[str, str | None, GcsClient] | None = None  # the GCS client: address, token, client
    gcs_health: GcsHealth | None = None  # whether the GCS answered, and when it last did
    target: GcsTarget | None = None  # where the GCS was dialed this round (None: no address)
    # the GcsAddressOverride condition last reported (None: none), once `override_reported`
    override: Obj | None = None
    override_reported: bool = False
    unreachable: bool = False  # the GCS was logged as unreachable
    warned: bool = False  # a GcsUnreachable Event was posted
    unmet: UnmetKey | None = None  # the unmet demand last posted as an Event
    support: GcsSupport | None = None  # which GCS methods answered
    compat: Obj | None = None  # the RayCompatible condition last reported
    refused: str | None = None  # the refusal last posted as an Event (outlives `_forget`)
    failures: tuple[LaunchFailure, ...] = ()  # recent launch failures (Ray's "Recent failures")
    report_version: int | None = None  # the version of the last report to Ray
    # request -> (its resourceVersion, the status patch written from it): the watch may not show
    # a write before the next round, which must not write (and post its Event) again (outlives `_forget`)
    written: dict[str, tuple[Any, dict[str, Any]]] = dataclasses.field(default_factory=dict)
    served: _Served | None = None  # what view(), fleet() and history_scenario() serve
    # made by `forgotten` and not used by a round since: holds nothing but what outlives `_forget`,
    # so forgetting it again (every pod event of a cluster rayscale does not autoscale) keeps it
    dormant: bool = False

    def forgotten(self, clock: Callable[[], float], *, keep_backoff: bool) -> ClusterMemory:
        """What outlives `Autoscaler._forget`; the backoff only when `keep_backoff` (the cluster
        exists), else a fresh one on `clock`."""
        if keep_backoff:
            kept = ClusterMemory(self.backoff, backoff_until=self.backoff_until)
        else:
            kept = ClusterMemory(Backoff(clock))
        kept.refused, kept.written = self.refused, self.written
        kept.dormant = True
        return kept


class _Planned(NamedTuple):
    """A round's decision once applied, and what it was made from."""

    snapshot: Snapshot  # the cluster as it is
    scheduled: Snapshot  # what the scheduler saw (under a hold: nothing due to go)
    decision: Decision
    pods: list[Obj]
    now: datetime
    written: bool  # the patch was written


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
        self._memory: dict[ClusterKey, ClusterMemory] = {}  # what each cluster's rounds keep
        self.vclusters = VirtualClusters(api, events)
        self.provisioners = ProvisionEvents(api)

    def mark(self, key: ClusterKey, reason: str = "") -> None:
        """Run a round of `key` soon; `reason` (what changed: "RayCluster", "pod", ...) is recorded
        as the round's trigger."""
        if reason:
            self._served(key).triggers.add(reason)
        self.queue.mark(key)

    def _mem(self, key: ClusterKey) -> ClusterMemory:
        """What the rounds of `key` keep (created on first use)."""
        memory = self._memory.get(key)
        if memory is None:
            memory = self._memory[key] = ClusterMemory(Backoff(self.clock))
        return memory

    def _served(self, key: ClusterKey) -> _Served:
        memory = self._mem(key)
        if memory.served is None:
            memory.served = _Served()
        return memory.served

    def _served_now(self, key: ClusterKey) -> _Served | None:
        """What is served about `key`, None before its first round (or since it was forgotten)."""
        memory = self._memory.get(key)
        return None if memory is None else memory.served

    # ---- what the operator serves (cheap, synchronous: built from what the latest round kept) ----

    def view(self, key: ClusterKey) -> dict[str, Any] | None:
        """The JSON-ready view of one autoscaled cluster (view.py), None before its first round.

        Like `fleet` and `history_scenario`: no I/O, built from what the latest round kept; call it
        on the operator's event loop (the rounds change what it reads between their awaits)."""
        served = self._served_now(key)
        if served is None or served.observed is None:
            return None
        return cluster_view(served.observed, served.history.newest_first())

    def fleet(self) -> list[dict[str, Any]]:
        """The short view of every autoscaled cluster, by namespace and name."""
        served = (self._served_now(key) for key in sorted(self._memory))
        return [fleet_entry(s.observed) for s in served if s is not None and s.observed is not None]

    def history_scenario(self, key: ClusterKey, index: int = 0) -> dict[str, Any] | None:
        """The scenario document (what ``rayscale simulate`` reads) of the `index`-th newest decision
        of `key`, None when it has none (only the newest few keep theirs)."""
        served = self._served_now(key)
        return None if served is None else served.history.scenario(index)

    async def run(self) -> None:
        try:
            await self.queue.run()
        finally:
            await self.close()

    async def close(self) -> None:
        """Close every cached GCS channel (`run` does so when it ends)."""
        for key in [k for k, m in self._memory.items() if m.gcs is not None]:
            await self._close_gcs(key)

    # ---- one round ----

    async def step(self, key: ClusterKey) -> float | Failed | None:
        """One round; a failed API call (the patch above all) makes it `Failed`, and the queue backs
        the cluster off (rayscale.common.retry) while other clusters keep their rounds."""
        try:
            return await self._step(key)
        except ops.KubeError as exc:
            return Failed(str(exc), exc.retry_after)

    def _trigger(self, key: ClusterKey) -> str:
        """What marked `key` since its last round began ("periodic" when nothing did)."""
        served = self._served_now(key)
        if served is None or not served.triggers:
            return PERIODIC
        trigger = ", ".join(sorted(served.triggers))
        served.triggers.clear()
        return trigger

    async def _step(self, key: ClusterKey) -> float | Failed | None:
        trigger = self._trigger(key)
        cluster = self.source.cluster(key)
        requests = list(self.source.requests(key))
        beside = self.config.beside_kuberay
        taken = None
        if cluster is not None:
            # Only in-tree autoscaling, rayscale's own controller, reads the head: every pod event
            # steps the cluster, so a walk over its pods costs only where it is needed.
            in_tree = bool((cluster.get("spec") or {}).get("enableInTreeAutoscaling"))
            head = self._live_head(key) if in_tree and not beside else None
            taken = eligibility(cluster, beside_kuberay=beside, head=head)
        if cluster is None or taken is None or not taken.take:
            await self._not_taken(key, cluster, requests, taken.refusal if taken else None)
            return None
        self._mem(key).dormant = False  # this round may keep anything in it
        if (cluster.get("metadata") or {}).get("deletionTimestamp"):
            return None
        try:
            scaling = self._read(cluster)
        except SpecError as exc:
            # rayscale's controller refuses the spec (SpecValid=False) and builds nothing for it, or
            # (beside KubeRay) it cannot be read: nothing to autoscale, and planning must not meet
            # what the validation keeps out.
            await self._unscalable(key, requests, exc)
            return None
        state = await self._gcs_state(key, cluster)
        held = self._trust(key, state)
        refused = ""
        for _ in range(CONFLICT_ATTEMPTS):
            try:
                planned = await self._plan_and_patch(key, cluster, scaling, state, requests, held)
            except Conflict as exc:  # re-plan on the cluster as it is now
                refused = str(exc)
                fresh = await ops.get_raycluster(self.api, *key)
                if fresh is None or not self.config.owns(fresh):  # gone, or moved to another shard
                    return None
                cluster = fresh
                try:
                    scaling = self._read(cluster)
                except SpecError as exc:
                    await self._unscalable(key, requests, exc)
                    return None
                continue
            except ValueError as exc:  # an unreadable spec; the controller reports it on the cluster
                await self._unscalable(key, requests, exc)
                return None
            status = functools.partial(decision_status, decision=planned.decision)
            await self._write_statuses(key, requests, status)
            await self._tell_ray(key, planned.snapshot, planned.decision, state)
            observed = self._observe(key, cluster, planned, state, held, trigger)
            await self._report(key, cluster, observed)
            return self.config.interval
        # Refused every time, even on the cluster read fresh: a 422 that is no test failure (the
        # patch breaks a validation rule), or a cluster changing under every patch. Back off.
        return Failed(f"patch refused {CONFLICT_ATTEMPTS} times, the last: {refused}")

    def _live_head(self, key: ClusterKey) -> Obj | None:
        return next((p for p in self.source.pods(key) if is_head(p) and not is_terminating(p)), None)

    async def _unscalable(self, key: ClusterKey, requests: Sequence[Obj], problem: ValueError) -> None:
        """Say on each request why `key` is not autoscaled (its controller reports the spec)."""
        message = f"RayCluster {key[1]} cannot be autoscaled: {problem}"[:1000]
        await self._write_statuses(key, requests, functools.partial(pending_status, message=message))

    def _read(self, cluster: Obj) -> ScalingSpec:
        """`cluster` as the scheduler sees it; SpecError when rayscale's controller refuses it (beside
        KubeRay's operator: when it cannot be read)."""
        return read_spec(cluster, check=not self.config.beside_kuberay, max_pods=self.config.max_pods)

    async def _plan_and_patch(
        self,
        key: ClusterKey,
        cluster: Obj,
        scaling: ScalingSpec,
        state: ClusterState | None,
        requests: Sequence[Obj],
        held: Hold | None = None,
    ) -> _Planned:
        """The decision once applied (or a no-op); Conflict when the resourceVersion test failed."""
        pods = list(self.source.pods(key))
        pod_names = {pod_name(p) for p in pods}
        memory = self._mem(key)
        backoff = memory.backoff
        short_since = memory.short_since
        provisioning = await self.provisioners.read(key[0], pods)  # before `now`: the pods' clocks
        now = self.wall_clock()
        started = time.perf_counter()
        missing = ray_missing_since(pods, state, memory.missing_since, now)
        memory.missing_since = missing
        draining = still_draining(memory.draining, cluster, pods)
        memory.draining = draining
        snapshot = build_snapshot(
            cluster,
            pods,
            state,
            requests,
            backoff.active(),
            now,
            max_node_provision_seconds=self.config.max_node_provision_seconds,
            max_node_boot_seconds=self.config.max_node_boot_seconds,
            provisioning=provisioning,
            unprovisioned_grace_seconds=self.config.unprovisioned_grace_seconds,
            short_since=short_since,
            missing_since=missing,
            draining=draining,
            max_pods=self.config.max_pods,
            scaling=scaling,
        )
        memory.short_since = {g: short_since.get(g, now) for g in short_groups(snapshot)}
        reading = self.vclusters.read(key, cluster, self.source.virtual_clusters(key), pods)
        cached = memory.gcs
        gcs = cached[2] if cached is not None and state is not None else None
        finished = await self.vclusters.finished_jobs(reading, gcs)
        scheduled = snapshot if held is None else held_snapshot(snapshot)
        vplan = plan_with_vcs(
            scheduled,
            reading.vcs,
            reading.members,
            finished,
            frozen=state is None,
        )
        decision = vplan.decision
        if held is not None:
            decision = without_removals(decision)  # what caps alone would remove waits too
        self.metrics.decision_duration.observe(time.perf_counter() - started)
        if held is not None and not held.launches:
            # like Ray: no scaling until the head runs; nothing moves between virtual clusters
            token = cached[1] if cached is not None else None
            await self.vclusters.apply(key, reading, None, snapshot, state, gcs, token, now)
            return _Planned(snapshot, scheduled, without_launches(decision), pods, now, written=False)
        decision = writable(cluster, decision, pod_names)  # drain nothing the patch would not write
        units = drain_plan(decision, snapshot, state)
        if units:
            decision = without(decision, await self._drain(key, units))
        patch = build_patch(cluster, decision, pod_names)
        if patch is not None:
            try:
                await ops.json_patch_raycluster(self.api, key[0], key[1], patch.ops)
            except ops.KubeError as exc:
                if exc.status in TEST_FAILED:
                    log.debug("autoscaler patch of %s/%s refused (%s); re-planning", *key, exc)
                    raise Conflict(str(exc)) from exc
                raise
            self._applied(key, cluster, snapshot, decision, patch, backoff, now)
        if reading.objects or reading.members or vplan.assign:
            token = cached[1] if cached is not None else None  # the raylets take the GCS's token
            await self.vclusters.apply(key, reading, vplan, snapshot, state, gcs, token, now)
        return _Planned(snapshot, scheduled, decision, pods, now, written=patch is not None)

    def _trust(self, key: ClusterKey, state: ClusterState | None) -> Hold | None:
        """Track the GCS session; the hold this round is under (logged when it starts or ends)."""
        now = self.clock()
        memory = self._mem(key)
        previous = memory.session
        session = next_session(previous, state, now)
        if session is not None:
            memory.session = session
            if previous is not None and session.name != previous.name:
                log.info("GCS session of %s/%s changed (%s -> %s): the head restarted", *key,
                         previous.name, session.name)  # fmt: skip
                memory.missing_since = {}  # every boot clock starts over
        held = hold(state, session, now, self.config.head_restart_grace_seconds, memory.back_at)
        was, memory.hold = memory.hold, held
        if held is not None:
            if was is None or was.launches != held.launches:
                what = "nothing removed" + ("" if held.launches else " or launched")
                log.info("autoscaling of %s/%s held (%s): %s", *key, what, held.reason)
        elif was is not None:
            log.info("autoscaling of %s/%s no longer held", *key)
        return held

    def _applied(
        self,
        key: ClusterKey,
        cluster: Obj,
        snapshot: Snapshot,
        decision: Decision,
        patch: ClusterPatch,
        backoff: Backoff,
        now: datetime,
    ) -> None:
        """Events and metrics of a patch that landed; launch failures it names start their group's
        backoff and are remembered for Ray's "Recent failures"."""
        named = {pod for g in patch.groups for pod in g.workers_to_delete or ()}
        # group -> (its spec, the new replicas)
        resized = {g.name: (g.spec, g.replicas) for g in patch.groups if g.replicas is not None}
        # pods named in workersToDelete, and replicas whose pods never existed (dropped from replicas)
        written = [r for r in decision.terminate if r.name in named or is_unborn(r.name)]
        for group, (spec, new) in resized.items():
            old = int(spec.get("replicas") or 0)
            causes = Counter(str(r.reason) for r in written if r.group == group)
            if new > old:
                self.events.post(cluster, "Normal", "ScaledUp", f"group {group}: {old} -> {new} replicas")
                self.metrics.scaled(key, group, up=(new - old) * int(spec.get("numOfHosts") or 1))
            elif new < old:
                why = f" ({', '.join(sorted(causes))})" if causes else ""
                self.events.post(
                    cluster, "Normal", "ScaledDown", f"group {group}: {old} -> {new} replicas{why}"
                )
        for group in sorted({r.group for r in written}):  # every pod removed, replaced or not
            self.metrics.scaled(key, group, down=Counter(str(r.reason) for r in written if r.group == group))
        for removal in written:
            if removal.reason is RemovalCause.NODE_DEAD:
                message = (
                    f"group {removal.group}: the Ray node of pod {removal.name} died; the pod is removed"
                )
                self.events.post(cluster, "Normal", "RayNodeDied", message)
        landed = launch_failures(snapshot, decision, now, landed=[r.name for r in written])
        memory = self._mem(key)
        memory.failures = remember(memory.failures, landed, now)
        failed = Counter(r.group for r in written if r.reason is RemovalCause.LAUNCH_FAILED)
        for group, nodes in sorted(failed.items()):
            self.metrics.launches_failed(key, group, nodes)
            entry = backoff.failed(group)
            until = self.wall_clock() + timedelta(seconds=entry.duration)
            memory.backoff_until[group] = until
            self.events.post(
                cluster,
                "Warning",
                "BackingOff",
                f"group {group}: pods not provisioned in time; no launches for {entry.duration:.0f}s",
            )

    # ---- Ray's GCS ----

    async def _gcs_state(self, key: ClusterKey, cluster: Obj) -> ClusterState | None:
        address: str | None = None
        memory = self._mem(key)
        support = self._gcs_support(key, cluster)
        memory.target = None
        try:
            target = gcs_target(cluster, allow_override=self.config.allow_gcs_address_override)
            memory.target = target
            address = target.address
            gcs = await self._gcs_client(key, cluster, address)
            state = await gcs.get_cluster_resource_state()
        except (AddressError, GcsError, ops.KubeError) as exc:
            if isinstance(exc, GcsError):
                memory.support = support.seen(CLUSTER_STATE, exc.code)
            self._gcs_failed(key, cluster, address, str(exc))
            return None
        memory.support = support.for_session(state.session_name).seen(CLUSTER_STATE, None)
        before = memory.gcs_health
        if before is not None and not before.reachable and before.last_contact is not None:
            memory.back_at = self.clock()  # an outage ended: its view settles first (trust.py)
        memory.gcs_health = GcsHealth(address, reachable=True, last_contact=datetime.now(UTC))
        self.metrics.gcs(key, reachable=True)
        if memory.unreachable:
            log.info("GCS of %s/%s reachable again", *key)
            memory.unreachable = False
        if memory.warned:
            memory.warned = False
            self.events.post(cluster, "Normal", "GcsReachable", f"Ray's GCS at {address} answers again")
        return state

    def _gcs_support(self, key: ClusterKey, cluster: Obj) -> GcsSupport:
        """What the GCS answered so far; after a restart, what the written condition says was missing."""
        known = self._mem(key).support
        if known is None:
            known = GcsSupport.remembered(find_condition(_autoscaler_status(cluster)))
        return known

    def _seen(self, key: ClusterKey, method: str, code: str | None) -> None:
        """Record how the GCS answered a call of `method` (`code` None: it answered)."""
        memory = self._mem(key)
        memory.support = (memory.support or GcsSupport()).seen(method, code)

    def _gcs_failed(self, key: ClusterKey, cluster: Obj, address: str | None, error: str) -> None:
        memory = self._mem(key)
        previous = memory.gcs_health
        contact = previous.last_contact if previous is not None else None
        memory.gcs_health = GcsHealth(address, reachable=False, last_error=error, last_contact=contact)
        self.metrics.gcs(key, reachable=False)
        if not memory.unreachable:
            log.warning("GCS of %s/%s unreachable, running nodes are kept: %s", *key, error)
            memory.unreachable = True
        # Only once the head runs: a GCS that is still starting is no news.
        if not memory.warned and _head_running(self.source.pods(key)):
            memory.warned = True
            message = f"Ray's GCS at {address or '?'} cannot be reached ({error}); running workers are kept"
            self.events.post(cluster, "Warning", "GcsUnreachable", message)

    async def _gcs_client(self, key: ClusterKey, cluster: Obj, address: str) -> GcsClient:
        token = None
        ref = auth_token_secret(cluster)
        if ref is not None:
            token = await ops.read_secret_key(self.api, ref.namespace, ref.name, ref.key)
        cached = self._mem(key).gcs
        if cached is not None and cached[:2] == (address, token):
            return cached[2]
        await self._close_gcs(key)
        gcs = GcsClient(
            address, token=token, timeout=self.config.gcs_timeout, retries=self.config.gcs_retries
        )
        self._mem(key).gcs = (address, token, gcs)
        return gcs

    async def _drain(self, key: ClusterKey, units: Sequence[DrainUnit]) -> set[str]:
        """Drain the units host by host; the pods of the units that stay (a host refused or
        could not be asked). Hosts that accepted are remembered as draining."""
        memory = self._mem(key)
        cached = memory.gcs
        if cached is None:
            return {pod for unit in units for pod, _ in unit.hosts}
        gcs = cached[2]

        async def ask(pod: str, node_id: str) -> bool:
            try:
                result = await gcs.drain_node(node_id, message=f"rayscale: idle, removing pod {pod}")
            except GcsError as exc:
                self._seen(key, DRAIN, exc.code)
                log.info("drain of %s in %s/%s failed, keeping it: %s", pod, *key, exc)
                return False
            self._seen(key, DRAIN, None)
            if not result.accepted:
                log.info("node %s in %s/%s refused to drain: %s", pod, *key, result.rejection_reason)
            return result.accepted

        outcome = await drain_units(units, ask)
        memory.draining = memory.draining | outcome.accepted
        return set(outcome.refused)

    async def _tell_ray(
        self, key: ClusterKey, snapshot: Snapshot, decision: Decision, state: ClusterState | None
    ) -> None:
        """Report the round to Ray's GCS (what ``ray status`` shows); failures are logged, never raised."""
        now = self.wall_clock()
        memory = self._mem(key)
        failures = remember(memory.failures, (), now)
        memory.failures = failures
        cached = memory.gcs
        support = memory.support or GcsSupport()
        if state is None or cached is None or support.report is False:
            return
        version = next_version(memory.report_version, state, now)
        report = autoscaling_state(
            snapshot, decision, state, failures, now, version=version, pods=list(self.source.pods(key))
        )
        try:
            await cached[2].report_autoscaling_state(report)
        except GcsError as exc:
            self._seen(key, REPORT, exc.code)
            log.info("report to the GCS of %s/%s failed: %s", *key, exc)
            return
        memory.report_version = version
        self._seen(key, REPORT, None)

    async def _close_gcs(self, key: ClusterKey) -> None:
        memory = self._memory.get(key)
        cached = None if memory is None else memory.gcs
        if memory is not None and cached is not None:
            memory.gcs = None
            await cached[2].close()

    async def _not_taken(
        self, key: ClusterKey, cluster: Obj | None, requests: list[Obj], refusal: str | None
    ) -> None:
        """A cluster rayscale does not autoscale: its requests wait, its state is dropped, and a
        refusal (the user asked, but it cannot be done) is posted once as a Warning Event."""
        if cluster is not None and refusal and self._mem(key).refused != refusal:
            self._mem(key).refused = refusal
            self.events.post(cluster, "Warning", "AutoscalingRefused", refusal)
        if cluster is None:
            why = "does not exist"
        elif self.config.beside_kuberay:
            why = (
                f"is not autoscaled by rayscale (it needs {OPT_IN_ANNOTATION}: true, in-tree autoscaling off)"
            )
        else:
            why = "does not have enableInTreeAutoscaling: true"
        message = f"RayCluster {key[1]} {why} in namespace {key[0]}"
        await self._write_statuses(key, requests, lambda r: pending_status(r, message))
        vcs = list(self.source.virtual_clusters(key))
        if vcs:
            await self.vclusters.not_taken(key, vcs, f"spec.rayClusterName: {message}", self.wall_clock())
        await self._forget(key, keep_backoff=cluster is not None)
        if cluster is not None:
            await self._write_cluster_status(key, clear_autoscaler_patch(_autoscaler_status(cluster)))

    async def _forget(self, key: ClusterKey, *, keep_backoff: bool) -> None:
        self.queue.forget(key)
        self.vclusters.forget(key)
        memory = self._memory.pop(key, None)
        if memory is not None:
            dormant = memory.dormant and keep_backoff
            self._memory[key] = memory if dormant else memory.forgotten(self.clock, keep_backoff=keep_backoff)
        self.metrics.forget_cluster(key)
        if memory is not None and memory.gcs is not None:
            await memory.gcs[2].close()

    # ---- what the operator serves: replica lives, decision history, the latest round ----

    def _observe(
        self,
        key: ClusterKey,
        cluster: Obj,
        planned: _Planned,
        state: ClusterState | None,
        held: Hold | None,
        trigger: str,
    ) -> Observed:
        """Keep what the round saw and decided for the view; the replicas' Events."""
        memory = self._mem(key)
        served = self._served(key)
        written = planned.decision.terminate if planned.written else ()
        removed = {unit(r.name, r.replica): r.reason for r in written}
        slow = self.config.slow_start_seconds
        lives = next_lives(
            served.lives, planned.snapshot, planned.pods, state, removed, planned.now, slow_after=slow
        )
        for notice in notices(served.lives, lives, planned.now):
            self.events.post(cluster, "Warning", notice.reason, notice.message)
        served.lives = lives
        reason = held.reason if held is not None else None
        served.history.add(
            decision_record(
                planned.snapshot,
                planned.decision,
                planned.now,
                trigger=trigger,
                held=reason,
                written=planned.written,
                scheduled=planned.scheduled,
            )
        )
        backing_off = {g.name for g in planned.snapshot.groups if g.backoff}
        until = {g: t for g, t in memory.backoff_until.items() if g in backing_off}
        gcs = memory.gcs_health or GcsHealth(None, reachable=False)
        served.observed = Observed(
            key[0], key[1], planned.now, planned.snapshot, planned.decision, state, gcs, reason, until, lives
        )
        return served.observed

    # ---- RayCluster status.autoscaler, UnmetDemand, metrics ----

    async def _report(self, key: ClusterKey, cluster: Obj, seen: Observed) -> None:
        now = datetime.now(UTC)
        old = _autoscaler_status(cluster)
        snapshot, decision = seen.snapshot, seen.decision
        compat = self._compatible(key, cluster, old, now)
        override = self._overridden(key, cluster, old, now)
        conditions = [compat] if override is None else [compat, override]
        replicas = replica_summary(seen.lives)
        new = autoscaler_status(
            snapshot,
            decision,
            seen.gcs,
            seen.backoff_until,
            now,
            old,
            conditions=conditions,
            replicas=replicas,
        )
        memory = self._mem(key)
        previous = memory.unmet
        if previous is None and old is not None:  # after a restart: what the status already says
            previous = unmet_key(old.get("unmetDemand") or [])
        memory.unmet, message = unmet_notice(previous, new)
        if message is not None:
            self.events.post(cluster, "Warning", "UnmetDemand", message)
        pending, unmet = waiting_bundles(decision), unmet_by_reason(decision)
        backing_off = sum(1 for g in snapshot.groups if g.backoff)
        self.metrics.round(key, pending=pending, unmet=unmet, backing_off=backing_off)
        patch = autoscaler_patch(old, new, now, refresh_seconds=self.config.status_refresh_seconds)
        await self._write_cluster_status(key, patch)

    def _compatible(self, key: ClusterKey, cluster: Obj, old: Obj | None, now: datetime) -> Obj:
        """The RayCompatible condition now; an Event when it changed since the last one reported."""
        memory = self._mem(key)
        was = memory.compat or find_condition(old)  # after a restart: the one written
        condition = compat_condition(cluster, self._gcs_support(key, cluster), now, was)
        memory.compat = condition
        event = compat_event(was, condition)
        if event is not None:
            self.events.post(cluster, *event)
        return condition

    def _overridden(self, key: ClusterKey, cluster: Obj, old: Obj | None, now: datetime) -> Obj | None:
        """The GcsAddressOverride condition now (None: the annotation names no other address, or the
        address could not be worked out); an Event when it changed since the last one reported."""
        memory = self._mem(key)
        was = memory.override if memory.override_reported else find_override(old)  # after a restart
        target = memory.target
        condition = override_condition(target, now, was) if target is not None else None
        memory.override, memory.override_reported = condition, True
        event = override_event(was, condition)
        if event is not None:
            self.events.post(cluster, *event)  # the recorder logs it too
        return condition

    async def _write_cluster_status(self, key: ClusterKey, patch: dict[str, Any] | None) -> None:
        if patch is None:
            return
        try:
            await ops.patch_raycluster_status(self.api, key[0], key[1], patch)
        except ops.KubeError as exc:
            log.warning("status.autoscaler of %s/%s not written: %s", *key, exc)

    # ---- RayResourceRequest status ----

    async def _write_statuses(
        self, key: ClusterKey, requests: Sequence[Obj], status: Callable[[Obj], dict[str, Any]]
    ) -> None:
        """Write each request's status when it changed; a request that became InvalidBundles also
        gets a Warning Event saying which field. A status already written from the same version of
        the request is not written again (the watch has not delivered the write yet)."""
        memory = self._mem(key)
        last, memory.written = memory.written, {}
        written: dict[str, tuple[Any, dict[str, Any]]] = {}
        for request in requests:
            new = status(request)
            patch = status_patch(request, new)
            if patch is None:
                continue
            meta = request.get("metadata") or {}
            name, version = str(meta.get("name")), meta.get("resourceVersion")
            if last.get(name) == (version, patch):
                written[name] = last[name]
                continue
            try:
                await ops.patch_rayresourcerequest_status(self.api, meta["namespace"], meta["name"], patch)
            except ops.KubeError as exc:
                log.warning("status of rayresourcerequests %s/%s not written: %s", meta.get("namespace"),
                            meta.get("name"), exc)  # fmt: skip
                continue
            written[name] = (version, patch)
            if new.get("reason") == INVALID_BUNDLES:
                self.events.post({**RRR_API, **request}, "Warning", INVALID_BUNDLES, str(new["message"]))
        memory.written = written


def _autoscaler_status(cluster: Obj) -> Obj | None:
    found: Obj | None = (cluster.get("status") or {}).get("autoscaler")
    return found


def _head_running(pods: Sequence[Obj]) -> bool:
    return any(is_head(p) and phase(p) == "Running" for p in pods)
