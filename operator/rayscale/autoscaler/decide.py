"""`Round`: one autoscaling round of a cluster rayscale autoscales. Decides, then applies. I/O.

The round reads the cluster and its pods from the watch-fed indexes, the RayResourceRequests bound
to it, and Ray's state from the GCS (gcs_link.py; None when unreachable: then nothing running is
removed) -> whether Ray can be trusted to remove anything (trust.py: the head's raylet runs, no
recent GCS session change, the GCS's view settled after an outage) -> the disruption notices'
plan (disruptions.py: its ``PREEMPTION`` drains asked at once; the pods it deletes and the ones
still leaving handed to the snapshot) -> the groups a ResourceQuota refuses or a scaleGate holds
(quota_check.py) -> ``build_snapshot`` ->
``schedule``, through the virtual-cluster planner only when the cluster has virtual clusters
(virtual/branch.py) -> drop the removals the patch would not write (``writable``) -> drain the
hosts of the IDLE and DRAINED removals left, host by host (refused replicas stay; accepted hosts
are remembered as draining until their removal is written; the busy surplus above a lowered
maxReplicas, and a removed worker group's pods, drain first instead: removal_round.py) ->
``build_patch`` -> one JSON patch guarded by a ``test`` of the generation planned on. A failed
test (409/422) re-plans on the cluster read fresh from the API server. Then the reporter
(reporter.py) tells the requests, Ray and the RayCluster, after the idle clock of a cluster that
opted in (idle_apply.py) has had its say.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from datetime import datetime

from rayscale.autoscaler import poll
from rayscale.autoscaler.disruptions import deleting, leaving, plan_round, remember_asked
from rayscale.autoscaler.drain import drain_plan, still_draining, without
from rayscale.autoscaler.gcs_link import GcsLink
from rayscale.autoscaler.history import PERIODIC
from rayscale.autoscaler.idle_apply import Cluster as IdleCluster
from rayscale.autoscaler.memory import Shared
from rayscale.autoscaler.patch import build_patch, writable
from rayscale.autoscaler.provision_events import ProvisionEvents
from rayscale.autoscaler.quota_check import QuotaChecks
from rayscale.autoscaler.removal_round import SpecRemovals
from rayscale.autoscaler.reporter import Planned, Reporter
from rayscale.autoscaler.requests import decision_status, pending_status
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.snapshot import build_snapshot, ray_missing_since, short_groups
from rayscale.autoscaler.spec_reader import ScalingSpec, SpecError, read_spec
from rayscale.autoscaler.spec_removals import without_drains
from rayscale.autoscaler.texts import unscalable_message
from rayscale.autoscaler.trust import (
    GATED_HEAD,
    Hold,
    held_snapshot,
    hold,
    next_session,
    without_launches,
    without_removals,
)
from rayscale.autoscaler.virtual.apply import VirtualClusters
from rayscale.autoscaler.virtual.branch import involved
from rayscale.autoscaler.virtual.plan import plan as plan_with_vcs
from rayscale.autoscaler.virtual.raylets import finished_jobs
from rayscale.common.pods import is_head, is_scheduling_gated, pod_name
from rayscale.common.retry import Failed
from rayscale.common.types import ClusterKey, Obj
from rayscale.disruption.plan import DisruptionPlan
from rayscale.kube import ops
from rayscale.kube.ops import TEST_FAILED
from rayscale.ray.model import ClusterState

__all__ = ["Round"]

log = logging.getLogger(__name__)
CONFLICT_ATTEMPTS = 3


class Conflict(Exception):
    """The patch's generation test failed (or the API server refused it with 422)."""


class Round:
    def __init__(self, shared: Shared, link: GcsLink, reporter: Reporter, vclusters: VirtualClusters) -> None:
        self.shared = shared
        self.memories = shared.memories
        self.link = link
        self.reporter = reporter
        self.vclusters = vclusters
        self.provisioners = ProvisionEvents(shared.api)
        self.removals = SpecRemovals(shared, link, reporter)  # removed groups, a lowered maxReplicas
        self.quotas = QuotaChecks(shared)  # groups a ResourceQuota refuses or a scaleGate holds

    async def run(
        self, key: ClusterKey, cluster: Obj, requests: Sequence[Obj], trigger: str
    ) -> float | Failed | None:
        """The round of a cluster rayscale takes; the seconds to the next one."""
        memory = self.memories.of(key)
        config, now = self.shared.config, self.shared.clock()
        idle = self.reporter.idle
        if (
            trigger == PERIODIC
            and not poll.due(memory.full_at, now, config, calm=memory.settled)
            and not idle.due(key)
        ):
            polled = await self.link.poll(key)
            if polled is not None and poll.fingerprint(polled) == memory.seen:
                self.shared.metrics.quiet_reads.inc()
                self.memories.served(key).history.confirm(self.shared.wall_clock())
                return poll.delay(polled, config, len(self.memories))  # Ray reads as at the last round
            trigger = poll.RAY_STATE if polled is not None else trigger
        try:
            scaling = self._read(cluster)
        except SpecError as exc:
            # rayscale's controller refuses the spec (SpecValid=False) and builds nothing for it, or
            # (beside KubeRay) it cannot be read: nothing to autoscale, and planning must not meet
            # what the validation keeps out.
            await self._unscalable(key, requests, exc)
            return None
        state = await self.link.state(key, scaling)
        memory.seen, memory.full_at = poll.fingerprint(state), now
        held = self._trust(key, state)
        refused = ""
        for _ in range(CONFLICT_ATTEMPTS):
            try:
                planned = await self._plan_and_patch(key, scaling, state, requests, held)
            except Conflict as exc:  # re-plan on the cluster as it is now
                refused = str(exc)
                fresh = await ops.get_raycluster(self.shared.api, *key)
                if fresh is None or not self.shared.config.owns(fresh):  # gone, or moved to another shard
                    return None
                try:
                    scaling = self._read(fresh)
                except SpecError as exc:
                    await self._unscalable(key, requests, exc)
                    return None
                continue
            except ValueError as exc:  # an unreadable spec; the controller reports it on the cluster
                await self._unscalable(key, requests, exc)
                return None
            status = functools.partial(decision_status, decision=planned.decision)
            await self.reporter.write_statuses(key, requests, status)
            await self.link.tell_ray(key, planned.snapshot, planned.decision, state)
            observed = self.reporter.observe(key, scaling, planned, state, held, trigger)
            memory.settled = state is not None and poll.settled(planned.snapshot, held is not None)
            memory.settled = memory.settled and not memory.leaving  # a removal's deadline is time's
            # an opted-in cluster idle long enough ends here (idle_apply.py)
            idle_wait = await idle.check(key, IdleCluster.of(scaling), state, requests)
            await self.reporter.report(key, scaling, observed)
            delay = poll.delay(state, config, len(self.memories))
            return delay if idle_wait is None else min(delay, idle_wait)
        # Refused every time, even on the cluster read fresh: a 422 that is no test failure (the
        # patch breaks a validation rule), or a cluster changing under every patch. Back off.
        return Failed(f"patch refused {CONFLICT_ATTEMPTS} times, the last: {refused}")

    async def _unscalable(self, key: ClusterKey, requests: Sequence[Obj], problem: ValueError) -> None:
        """Say on each request why `key` is not autoscaled (its controller reports the spec)."""
        message = unscalable_message(key[1], problem)
        await self.reporter.write_statuses(key, requests, functools.partial(pending_status, message=message))

    def _read(self, cluster: Obj) -> ScalingSpec:
        """`cluster` as the scheduler sees it; SpecError when rayscale's controller refuses it (beside
        KubeRay's operator: when it cannot be read)."""
        return read_spec(
            cluster, check=not self.shared.config.beside_kuberay, max_pods=self.shared.config.max_pods
        )

    async def _plan_and_patch(
        self,
        key: ClusterKey,
        scaling: ScalingSpec,
        state: ClusterState | None,
        requests: Sequence[Obj],
        held: Hold | None = None,
    ) -> Planned:
        """The decision once applied (or a no-op); Conflict when the generation test failed."""
        pods = list(self.shared.pods(key))
        pod_names = {pod_name(p) for p in pods}
        memory = self.memories.of(key)
        short_since = memory.short_since
        provisioning = await self.provisioners.read(key[0], pods)  # before `now`: the pods' clocks
        refused = await self.quotas.current(key, scaling, pods)
        now = self.shared.wall_clock()
        started = time.perf_counter()
        missing = ray_missing_since(pods, state, memory.missing_since, now)
        memory.missing_since = missing
        draining = still_draining(memory.draining, scaling.workers_to_delete, pods)
        memory.draining = draining
        disruption = await self._disruptions(key, scaling, pods, state, now)
        snapshot = build_snapshot(
            scaling,
            pods,
            state,
            requests,
            memory.backoff.active(),
            now,
            max_node_provision_seconds=self.shared.config.max_node_provision_seconds,
            max_node_boot_seconds=self.shared.config.max_node_boot_seconds,
            provisioning=provisioning,
            unprovisioned_grace_seconds=self.shared.config.unprovisioned_grace_seconds,
            short_since=short_since,
            missing_since=missing,
            draining=draining | deleting(disruption),
            leaving=leaving(disruption),
            refused=refused,
        )
        memory.short_since = {g: short_since.get(g, now) for g in short_groups(snapshot)}
        scheduled = snapshot if held is None else held_snapshot(snapshot)
        reading = self.vclusters.read(key, scaling.spec, self.shared.virtual_clusters(key), pods)
        gcs = memory.client() if state is not None else None
        vplan = None
        if involved(reading, scheduled, state):  # the cluster has virtual clusters: plan with them
            finished = await finished_jobs(reading, gcs)
            vplan = plan_with_vcs(scheduled, reading.vcs, reading.members, finished, frozen=state is None)
            decision = vplan.decision
        else:
            decision = schedule(scheduled)
        if held is not None:
            decision = without_removals(decision)  # what caps alone would remove waits too
        self.shared.metrics.decision_duration.observe(time.perf_counter() - started)
        if held is not None and not held.launches:
            # like Ray: no scaling until the head runs; nothing moves between virtual clusters
            if vplan is not None:
                await self.vclusters.apply(key, reading, None, snapshot, state, gcs, memory.token(), now)
            return Planned(snapshot, scheduled, without_launches(decision), pods, now, written=False)
        decision = writable(scaling, decision, pod_names)  # drain nothing the patch would not write
        decision = await self.removals.surplus(key, scaling, decision, snapshot, pods, state, now)
        units = drain_plan(
            decision,
            snapshot,
            state,
            finished=scaling.finished is not None,
            surplus=self.removals.drains_surplus(scaling),
        )
        if units:
            decision = without(decision, await self.link.drain(key, units, scaling.finished))
        patch = build_patch(scaling, decision, pod_names)
        if patch is not None:
            try:
                await ops.json_patch_raycluster(self.shared.api, key[0], key[1], patch.ops)
            except ops.KubeError as exc:
                if exc.status in TEST_FAILED:
                    log.debug("autoscaler patch of %s/%s refused (%s); re-planning", *key, exc)
                    raise Conflict(str(exc)) from exc
                raise
            self.reporter.applied(key, scaling, snapshot, decision, patch, now)
            self.reporter.disrupted(key, scaling, disruption, removed=patch.removed)
        if held is None:  # a removed group's pods: no workersToDelete can name them
            await self.removals.delete(key, scaling, disruption, pods)
        if vplan is not None and (reading.objects or reading.members or vplan.assign):
            # the raylets take the GCS's token
            await self.vclusters.apply(key, reading, vplan, snapshot, state, gcs, memory.token(), now)
        return Planned(snapshot, scheduled, decision, pods, now, written=patch is not None)

    async def _disruptions(
        self,
        key: ClusterKey,
        scaling: ScalingSpec,
        pods: Sequence[Obj],
        state: ClusterState | None,
        now: datetime,
    ) -> DisruptionPlan:
        """The disruption notices' plan for this round, its drains asked (and their Events posted)."""
        memory = self.memories.of(key)
        own, undrained = self.removals.notices(key, scaling, pods, now)
        plan = plan_round(scaling.groups, pods, state, self.shared.node_notices, memory.asked, now, own=own)
        plan = without_drains(plan, undrained)
        accepted = await self.link.preempt(key, plan.drains)
        memory.asked = remember_asked(memory.asked, plan.drains, accepted, pods, now)
        memory.disruption = plan
        self.reporter.disrupted(key, scaling, plan, accepted=accepted)
        return plan

    def _trust(self, key: ClusterKey, state: ClusterState | None) -> Hold | None:
        """Track the GCS session; the hold this round is under (logged when it starts or ends)."""
        now = self.shared.clock()
        memory = self.memories.of(key)
        previous = memory.session
        session = next_session(previous, state, now)
        if session is not None:
            memory.session = session
            if previous is not None and session.name != previous.name:
                log.info("GCS session of %s/%s changed (%s -> %s): the head restarted", *key,
                         previous.name, session.name)  # fmt: skip
                memory.missing_since = {}  # every boot clock starts over
        held = hold(state, session, now, self.shared.config.head_restart_grace_seconds, memory.back_at)
        if held is None and any(is_head(p) and is_scheduling_gated(p) for p in self.shared.pods(key)):
            held = GATED_HEAD  # a scale-up now would join the head's gate (Kueue's slices)
        was, memory.hold = memory.hold, held
        if held is not None:
            if was is None or was.launches != held.launches:
                what = "nothing removed" + ("" if held.launches else " or launched")
                log.info("autoscaling of %s/%s held (%s): %s", *key, what, held.reason)
        elif was is not None:
            log.info("autoscaling of %s/%s no longer held", *key)
        return held
