"""The spec's removals in an autoscaling round (I/O around spec_removals.py, which decides).

`SpecRemovals` does three things a round asks of it:

- `notices`: before the disruption plan, the leaving pods (a removed worker group's, and those
  above a lowered ``maxReplicas`` chosen in earlier rounds) as notices of their own pods, and
  the pods no drain may be asked of (``rayscale.io/removal-drain-seconds: "0"``). An annotation
  value not implemented is read as unset, with a Warning Event (once per value) and the
  ``RemovalDrain`` condition;
- `surplus`: after the scheduler, the ``MAX_REPLICAS`` removals with a busy host are taken back
  from the decision and leave instead: their Ray nodes are asked to drain for ``PREEMPTION`` at
  once (``DisruptionDrain`` Events), and they join the round's disruption plan (the ``Disruption``
  condition). Not for a cluster whose RayJob finished (its workers go as the job's end says), nor
  beside KubeRay's operator (its controller deletes the surplus above ``maxReplicas`` itself, at
  once, in a cluster without in-tree autoscaling), nor with the annotation at 0;
- `delete`: once the round is not held, the removed groups' pods the plan deletes are deleted
  here, through the operator's fenced client (no ``workersToDelete`` can name a group the spec
  does not have), with their ``DisruptionDelete`` Events.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from rayscale.api.disruption_annotations import removal_drain_seconds
from rayscale.autoscaler.disruptions import plan_round, ray_nodes, remember_asked
from rayscale.autoscaler.drain import without
from rayscale.autoscaler.gcs_link import GcsLink
from rayscale.autoscaler.memory import Shared
from rayscale.autoscaler.reporter import Reporter
from rayscale.autoscaler.scheduling.model import Decision, Snapshot
from rayscale.autoscaler.spec_reader import ScalingSpec
from rayscale.autoscaler.spec_removals import (
    busy_surplus,
    direct_deletes,
    leaving,
    merged,
    notices,
)
from rayscale.common.pods import pod_group, pod_name
from rayscale.common.types import ClusterKey, Obj
from rayscale.disruption.notice import Notice
from rayscale.disruption.plan import DisruptionPlan
from rayscale.kube import ops
from rayscale.ray.model import ClusterState

__all__ = ["SpecRemovals"]

log = logging.getLogger(__name__)
WARNING_REASON = "InvalidAnnotation"


def _group_names(scaling: ScalingSpec) -> frozenset[str]:
    return frozenset(g.group_name for g in scaling.spec.workers)


class SpecRemovals:
    def __init__(self, shared: Shared, link: GcsLink, reporter: Reporter) -> None:
        self.shared = shared
        self.link = link
        self.reporter = reporter

    def _seconds(self, key: ClusterKey, scaling: ScalingSpec) -> int | None:
        """The annotation's seconds (None: unset or not implemented, warned once per value)."""
        memory = self.shared.memories.of(key)
        seconds, problem = removal_drain_seconds(scaling.meta.annotations)
        if problem is not None and problem != memory.removal_problem:
            self.shared.events.post(scaling.meta.subject(), "Warning", WARNING_REASON, problem)
        memory.removal_problem = problem
        return seconds

    def drains_surplus(self, scaling: ScalingSpec) -> bool:
        """Whether the idle replicas above maxReplicas are asked to drain (for idleness) before
        they go: not with the annotation at 0 (deleted at once, without a drain)."""
        return removal_drain_seconds(scaling.meta.annotations)[0] != 0

    def notices(
        self, key: ClusterKey, scaling: ScalingSpec, pods: Sequence[Obj], now: datetime
    ) -> tuple[dict[str, Notice], frozenset[str]]:
        """The leaving pods' notices (pod -> notice), and the pods no drain may be asked of."""
        memory = self.shared.memories.of(key)
        seconds = self._seconds(key, scaling)
        memory.leaving = leaving(pods, _group_names(scaling), memory.leaving, now)
        undrained = frozenset(memory.leaving) if seconds == 0 else frozenset()
        return notices(memory.leaving, seconds), undrained

    async def surplus(
        self,
        key: ClusterKey,
        scaling: ScalingSpec,
        decision: Decision,
        snapshot: Snapshot,
        pods: Sequence[Obj],
        state: ClusterState | None,
        now: datetime,
    ) -> Decision:
        """`decision` without its busy ``MAX_REPLICAS`` removals, which leave (drained) instead."""
        seconds, _ = removal_drain_seconds(scaling.meta.annotations)
        if scaling.finished is not None or self.shared.config.beside_kuberay or seconds == 0:
            return decision
        ray = ray_nodes(pods, state) if state is not None else {}
        maxima = {g.name: g.max_replicas for g in scaling.groups}
        chosen = busy_surplus(decision, snapshot, ray, state is not None, maxima, now)
        if not chosen:
            return decision
        memory = self.shared.memories.of(key)
        memory.leaving.update(chosen)
        theirs = [p for p in pods if pod_name(p) in chosen]
        own = notices(chosen, seconds)
        plan = plan_round(scaling.groups, theirs, state, {}, memory.asked, now, own=own)
        accepted = await self.link.preempt(key, plan.drains)
        memory.asked = remember_asked(memory.asked, plan.drains, accepted, pods, now)
        memory.disruption = merged(memory.disruption or DisruptionPlan(), plan)
        self.reporter.disrupted(key, scaling, memory.disruption, accepted=accepted)
        log.info("%s/%s: replicas above maxReplicas drain before they go (busy): %s", *key,
                 ", ".join(sorted(chosen)))  # fmt: skip
        return without(decision, chosen)

    async def delete(
        self, key: ClusterKey, scaling: ScalingSpec, plan: DisruptionPlan, pods: Sequence[Obj]
    ) -> None:
        """Delete the removed groups' pods `plan` deletes (each once while it exists)."""
        memory = self.shared.memories.of(key)
        existing = {pod_name(p) for p in pods}
        memory.removed_directly = memory.removed_directly & existing
        todo = [p for p in direct_deletes(plan, _group_names(scaling)) if p not in memory.removed_directly]
        if not todo:
            return
        done = await asyncio.gather(*(self._delete(key, pod) for pod in todo))
        deleted = frozenset(pod for pod, ok in zip(todo, done, strict=True) if ok)
        memory.removed_directly = memory.removed_directly | deleted
        self.reporter.disrupted(key, scaling, plan, removed=deleted)
        groups = Counter(pod_group(p) for p in pods if pod_name(p) in deleted)
        for group, count in sorted(groups.items()):
            self.shared.metrics.scaled(key, group, down={"DRAINED": count})

    async def _delete(self, key: ClusterKey, pod: str) -> bool:
        try:
            await ops.delete_pod(self.shared.api, key[0], pod)
        except ops.KubeError as exc:
            log.warning("deleting pod %s of a removed worker group of %s/%s failed (the next round"
                        " tries again): %s", pod, *key, exc)  # fmt: skip
            return False
        log.info("deleted pod %s of a removed worker group of %s/%s", pod, *key)
        return True
