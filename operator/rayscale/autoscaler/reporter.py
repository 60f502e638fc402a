"""`Reporter`: what a round tells the world: statuses, Events and metrics. I/O.

After the decision: each RayResourceRequest gets its status (an ``InvalidBundles`` Warning when a
request became so), the patch that landed its ``ScaledUp``/``ScaledDown``/``RayNodeDied``/
``BackingOff`` Events and metrics (launch failures it names start their group's backoff and are
remembered for Ray's "Recent failures"), every replica's life its Events (lifecycle.py), and the
RayCluster its ``status.autoscaler`` (only when it changed, written off the round by
status_writer.py) with the
``RayCompatible`` condition (compat.py; an Event when it changes), the ``IdleTermination`` condition
of a cluster that opted in (idle_apply.py), and, when
``rayscale.io/gcs-address`` names another address than the head Service, the ``GcsAddressOverride``
condition (gcs_override.py; an Event when it changes), an ``UnmetDemand`` Event when the unmet
demand changed, and the metrics their values. The disruption notices' Events (a drain accepted,
pods named for deletion, the head's notice once) and their ``Disruption`` condition
(disruptions.py). The texts are made in pure modules (texts.py and
those named); this module posts and writes them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from rayscale.api.names import RAYRESOURCEREQUEST
from rayscale.autoscaler.compat import compat_condition, compat_event, find_condition
from rayscale.autoscaler.disruptions import disruption_condition, events_to_post, head_key
from rayscale.autoscaler.gcs_link import GcsLink
from rayscale.autoscaler.gcs_override import find_override, override_condition, override_event
from rayscale.autoscaler.history import decision_record
from rayscale.autoscaler.idle_apply import IdleTermination
from rayscale.autoscaler.lifecycle import next_lives, notices, replica_summary, unit
from rayscale.autoscaler.memory import Shared
from rayscale.autoscaler.patch import ClusterPatch
from rayscale.autoscaler.ray_report import launch_failures, remember
from rayscale.autoscaler.refusals import quota_condition
from rayscale.autoscaler.request_reader import read_request
from rayscale.autoscaler.requests import INVALID_BUNDLES, status_patch
from rayscale.autoscaler.scheduling.model import Decision, RemovalCause, Snapshot
from rayscale.autoscaler.snapshot import is_unborn
from rayscale.autoscaler.spec_reader import ScalingSpec
from rayscale.autoscaler.spec_removals import removal_condition
from rayscale.autoscaler.status import (
    GcsHealth,
    autoscaler_patch,
    autoscaler_status,
    finished_condition,
    unmet_by_reason,
    unmet_key,
    unmet_notice,
    waiting_bundles,
)
from rayscale.autoscaler.status_writer import StatusWriter
from rayscale.autoscaler.texts import backing_off, quota_refused, ray_node_died, refused, resized
from rayscale.autoscaler.trust import Hold
from rayscale.autoscaler.view import Observed
from rayscale.common.types import ClusterKey, Obj
from rayscale.disruption.plan import DisruptionPlan
from rayscale.kube import ops
from rayscale.ray.model import ClusterState

__all__ = ["Planned", "Reporter"]

log = logging.getLogger(__name__)


class Planned(NamedTuple):
    """A round's decision once applied, and what it was made from."""

    snapshot: Snapshot  # the cluster as it is
    scheduled: Snapshot  # what the scheduler saw (under a hold: nothing due to go)
    decision: Decision
    pods: list[Obj]
    now: datetime
    written: bool  # the patch was written


class Reporter:
    def __init__(self, shared: Shared, link: GcsLink) -> None:
        self.shared = shared
        self.memories = shared.memories
        self.link = link  # which GCS methods answered (the RayCompatible condition)
        pace = shared.config.status_pace_seconds
        self.writer = StatusWriter(self._write_status, shared.clock, pace=pace)  # status.autoscaler
        self.idle = IdleTermination(shared)  # idle clusters end; its condition joins the status

    def refused(self, key: ClusterKey, cluster: Obj, refusal: str) -> None:
        """An ``AutoscalingRefused`` Warning, once per refusal."""
        memory = self.memories.of(key)
        if memory.refused != refusal:
            memory.refused = refusal
            self.shared.events.post(cluster, *refused(refusal))

    def applied(
        self,
        key: ClusterKey,
        cluster: ScalingSpec,
        snapshot: Snapshot,
        decision: Decision,
        patch: ClusterPatch,
        now: datetime,
    ) -> None:
        """Events and metrics of a patch that landed; launch failures it names start their group's
        backoff and are remembered for Ray's "Recent failures"."""
        subject = cluster.meta.subject()
        named = patch.removed
        # group -> (its spec, the new replicas)
        grown = {g.name: (g.spec, g.replicas) for g in patch.groups if g.replicas is not None}
        # pods named in workersToDelete, and replicas whose pods never existed (dropped from replicas)
        written = [r for r in decision.terminate if r.name in named or is_unborn(r.name)]
        for group, (spec, new) in grown.items():
            old = spec.replicas or 0
            causes = {str(r.reason) for r in written if r.group == group}
            event = resized(group, old, new, causes)
            if event is not None:
                self.shared.events.post(subject, *event)
            if new > old:
                self.shared.metrics.scaled(key, group, up=(new - old) * (spec.num_of_hosts or 1))
        for group in sorted({r.group for r in written}):  # every pod removed, replaced or not
            self.shared.metrics.scaled(
                key, group, down=Counter(str(r.reason) for r in written if r.group == group)
            )
        for removal in written:
            if removal.reason is RemovalCause.NODE_DEAD:
                self.shared.events.post(subject, *ray_node_died(removal.group, removal.name))
        landed = launch_failures(snapshot, decision, now, landed=[r.name for r in written])
        memory = self.memories.of(key)
        memory.failures = remember(memory.failures, landed, now)
        failed = Counter(r.group for r in written if r.reason is RemovalCause.LAUNCH_FAILED)
        for group, nodes in sorted(failed.items()):
            self.shared.metrics.launches_failed(key, group, nodes)
            refused = memory.blocked.get(group)
            if refused is not None:  # the refusal holds the group until it ends: no backoff
                self.shared.events.post(subject, *quota_refused(refused.text(), nodes))
                continue
            entry = memory.backoff.failed(group)
            memory.backoff_until[group] = self.shared.wall_clock() + timedelta(seconds=entry.duration)
            self.shared.events.post(subject, *backing_off(group, entry.duration))

    def disrupted(
        self,
        key: ClusterKey,
        cluster: ScalingSpec,
        plan: DisruptionPlan,
        *,
        accepted: Collection[str] = (),
        removed: Collection[str] = (),
    ) -> None:
        """The Events of what a round did about disruption notices: the drains `accepted`, the
        units whose every pod the patch `removed`, and the head's notice once per notice."""
        memory = self.memories.of(key)
        head = head_key(plan)
        posted, memory.head_notice = head == memory.head_notice, head
        for event in events_to_post(plan, accepted, removed, head_posted=posted):
            self.shared.events.post(cluster.meta.subject(), event.type, event.reason, event.message)

    def observe(
        self,
        key: ClusterKey,
        cluster: ScalingSpec,
        planned: Planned,
        state: ClusterState | None,
        held: Hold | None,
        trigger: str,
    ) -> Observed:
        """Keep what the round saw and decided for the view; the replicas' Events."""
        memory = self.memories.of(key)
        served = self.memories.served(key)
        written = planned.decision.terminate if planned.written else ()
        removed = {unit(r.name, r.replica): r.reason for r in written}
        slow = self.shared.config.slow_start_seconds
        lives = next_lives(
            served.lives, planned.snapshot, planned.pods, state, removed, planned.now, slow_after=slow
        )
        for notice in notices(served.lives, lives, planned.now):
            self.shared.events.post(cluster.meta.subject(), "Warning", notice.reason, notice.message)
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

    async def report(self, key: ClusterKey, cluster: ScalingSpec, seen: Observed) -> None:
        """The RayCluster's ``status.autoscaler``, its conditions' Events, ``UnmetDemand``, metrics."""
        now = datetime.now(UTC)
        old = self.writer.latest(key, cluster.written)  # with the status on its way, if any
        snapshot, decision = seen.snapshot, seen.decision
        compat = self._compatible(key, cluster, old, now)
        override = self._overridden(key, cluster, old, now)
        conditions = [compat] if override is None else [compat, override]
        if cluster.finished is not None:  # its RayJob ended: why the workers went
            conditions.append(finished_condition(cluster.finished, now, old))
        idle = self.idle.condition(key)
        if idle is not None:
            conditions.append(idle)
        disruption = self.memories.of(key).disruption
        disrupted = disruption_condition(disruption, now, old) if disruption is not None else None
        if disrupted is not None:
            conditions.append(disrupted)
        removal = removal_condition(self.memories.of(key).removal_problem, now, old)
        if removal is not None:  # rayscale.io/removal-drain-seconds not implemented
            conditions.append(removal)
        quota = quota_condition(list(self.memories.of(key).blocked.values()), now, old)
        if quota is not None:  # a ResourceQuota refuses a group, or a scaleGate holds one
            conditions.append(quota)
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
        memory = self.memories.of(key)
        previous = memory.unmet
        if previous is None and old is not None:  # after a restart: what the status already says
            previous = unmet_key(old.get("unmetDemand") or [])
        memory.unmet, message = unmet_notice(previous, new)
        if message is not None:
            self.shared.events.post(cluster.meta.subject(), "Warning", "UnmetDemand", message)
        pending, unmet = waiting_bundles(decision), unmet_by_reason(decision)
        backing_off = sum(1 for g in snapshot.groups if g.backoff)
        self.shared.metrics.round(key, pending=pending, unmet=unmet, backing_off=backing_off)
        if autoscaler_patch(old, new, now, refresh_seconds=self.shared.config.status_refresh_seconds):
            self.writer.submit(key, cluster.written, new)

    def _compatible(self, key: ClusterKey, cluster: ScalingSpec, old: Obj | None, now: datetime) -> Obj:
        """The RayCompatible condition now; an Event when it changed since the last one reported."""
        memory = self.memories.of(key)
        was = memory.compat or find_condition(old)  # after a restart: the one written
        condition = compat_condition(cluster.spec, self.link.support(key, old), now, was)
        memory.compat = condition
        event = compat_event(was, condition)
        if event is not None:
            self.shared.events.post(cluster.meta.subject(), *event)
        return condition

    def _overridden(
        self, key: ClusterKey, cluster: ScalingSpec, old: Obj | None, now: datetime
    ) -> Obj | None:
        """The GcsAddressOverride condition now (None: the annotation names no other address, or the
        address could not be worked out); an Event when it changed since the last one reported."""
        memory = self.memories.of(key)
        was = memory.override if memory.override_reported else find_override(old)  # after a restart
        target = memory.target
        condition = override_condition(target, now, was) if target is not None else None
        memory.override, memory.override_reported = condition, True
        event = override_event(was, condition)
        if event is not None:
            self.shared.events.post(cluster.meta.subject(), *event)  # the recorder logs it too
        return condition

    async def _write_status(self, key: ClusterKey, patch: dict[str, Any]) -> None:
        await ops.patch_raycluster_status(self.shared.api, key[0], key[1], patch)

    async def write_cluster_status(self, key: ClusterKey, patch: dict[str, Any] | None) -> None:
        """Write `patch` now (what the writer had on its way for `key` is dropped)."""
        self.writer.forget(key)
        if patch is None:
            return
        try:
            await ops.patch_raycluster_status(self.shared.api, key[0], key[1], patch)
        except ops.KubeError as exc:
            log.warning("status.autoscaler of %s/%s not written: %s", *key, exc)

    async def write_statuses(
        self, key: ClusterKey, requests: Sequence[Obj], status: Callable[[Obj], dict[str, Any]]
    ) -> None:
        """Write each request's status when it changed; a request that became InvalidBundles also
        gets a Warning Event saying which field. A status already written from the same version of
        the request is not written again (the watch has not delivered the write yet)."""
        memory = self.memories.of(key)
        last, memory.written = memory.written, {}
        written: dict[str, tuple[Any, dict[str, Any]]] = {}
        for request in requests:
            new = status(request)
            patch = status_patch(request, new)
            if patch is None:
                continue
            read = read_request(request)
            name, version = read.name, read.resource_version
            if last.get(name) == (version, patch):
                written[name] = last[name]
                continue
            try:
                await ops.patch_rayresourcerequest_status(self.shared.api, read.namespace, name, patch)
            except ops.KubeError as exc:
                log.warning("status of rayresourcerequests %s not written: %s", read.unit, exc)
                continue
            written[name] = (version, patch)
            if new.get("reason") == INVALID_BUNDLES:
                self.shared.events.post(
                    {**RAYRESOURCEREQUEST.type_meta(), **request},
                    "Warning",
                    INVALID_BUNDLES,
                    str(new["message"]),
                )
        memory.written = written
