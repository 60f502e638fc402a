"""Pods the spec no longer wants, drained before they go (pure): the workers of a group removed
from the RayCluster's spec, and the busy replicas above a lowered ``maxReplicas``.

Each such pod is **leaving** (`Leaving`), remembered from the round that first saw it so (its
``since`` never moves later; an operator restart starts it again), and becomes a soft disruption
notice of its own pod (`notices`): source ``group-removed`` or ``max-replicas``, a message naming
the group and the cause, and a deadline ``since`` + ``rayscale.io/removal-drain-seconds`` (none
when the annotation is unset). rayscale.disruption.plan does the rest as for any notice: its Ray
nodes are asked to drain for ``PREEMPTION``, they take no new work, and the unit (a pod, or a
multi-host replica as a whole) is deleted once every host is idle after the drain or has no live
Ray node, or at the deadline. With ``"0"`` the pods go at once and no drain is asked
(`without_drains`).

- A removed group (`leaving`): every worker pod whose ``ray.io/group`` names no group of the spec
  (rayscale.cluster.removed_groups). Its deletion cannot be a ``workersToDelete`` (the group is
  not in the spec): the autoscaler deletes the pods itself (`direct_deletes`).
- Above ``maxReplicas`` (`busy_surplus`): the scheduler removes the surplus (``MAX_REPLICAS``)
  idle ones first, as Ray orders them; the removals with a busy host (a Ray node alive and not
  idle; without Ray's state, any running host) are taken back from the decision and leave
  instead. Held while they drain (snapshot.py's ``leaving``), they count towards ``maxReplicas``
  and not towards the group's live replicas, so nothing replaces them and no further surplus is
  picked because of them. The idle ones go through the decision (drain.py asks them to drain for
  idleness first: one that got work meanwhile refuses, stays, and is busy surplus next round).

A pod once leaving stays so until it is gone (a Ray drain for preemption cannot be taken back).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta

from rayscale.api.disruption_annotations import REMOVAL_DRAIN_ANNOTATION
from rayscale.autoscaler.scheduling.model import Decision, NodeState, RemovalCause, Snapshot
from rayscale.cluster.removed_groups import removed_group_pods
from rayscale.common.pods import is_terminating, pod_name
from rayscale.common.timefmt import rfc3339
from rayscale.common.types import Obj
from rayscale.disruption.notice import Notice
from rayscale.disruption.plan import DisruptionPlan, RayNode

__all__ = [
    "CONDITION",
    "GROUP_REMOVED",
    "MAX_REPLICAS",
    "Leaving",
    "busy_surplus",
    "direct_deletes",
    "leaving",
    "merged",
    "notices",
    "removal_condition",
    "without_drains",
]

GROUP_REMOVED = "group-removed"
MAX_REPLICAS = "max-replicas"
CONDITION = "RemovalDrain"  # status.autoscaler's condition of an annotation value not implemented


@dataclasses.dataclass(frozen=True, slots=True)
class Leaving:
    """A pod the spec no longer wants, draining until it goes."""

    source: str  # GROUP_REMOVED or MAX_REPLICAS
    group: str
    since: datetime  # when rayscale first saw it leave: the deadline counts from here
    message: str  # the cause, naming the group (the drain's message, the Events')


def _removed_message(group: str) -> str:
    return f"Worker group {group} was removed from the RayCluster's spec."


def leaving(
    pods: Sequence[Obj], groups: Collection[str], remembered: Mapping[str, Leaving], now: datetime
) -> dict[str, Leaving]:
    """Pod -> why it leaves: the worker pods of removed groups (since when first seen), and the
    remembered pods still there and not terminating."""
    existing = {pod_name(p): p for p in pods if not is_terminating(p)}
    out = {pod: was for pod, was in remembered.items() if pod in existing}
    for group, names in removed_group_pods(pods, groups).items():
        for pod in names:
            if pod not in out:
                out[pod] = Leaving(GROUP_REMOVED, group, now, _removed_message(group))
    return out


def notices(leaving: Mapping[str, Leaving], seconds: int | None) -> dict[str, Notice]:
    """Pod -> the soft notice each leaving pod is planned with (`seconds`: the annotation's)."""
    out = {}
    for pod, why in leaving.items():
        deadline = None if seconds is None else why.since + timedelta(seconds=seconds)
        message = why.message
        if seconds == 0:
            message += f" {REMOVAL_DRAIN_ANNOTATION} is 0: deleted at once, without a drain."
        out[pod] = Notice(why.source, message, deadline, hard=False)
    return out


def without_drains(plan: DisruptionPlan, pods: Collection[str]) -> DisruptionPlan:
    """`plan` asking no drain of `pods` (their removal drains nothing: the annotation is 0)."""
    if not pods or not any(d.pod in pods for d in plan.drains):
        return plan
    return dataclasses.replace(plan, drains=tuple(d for d in plan.drains if d.pod not in pods))


def direct_deletes(plan: DisruptionPlan, groups: Collection[str]) -> tuple[str, ...]:
    """The pods `plan` deletes whose group the spec no longer has: no ``workersToDelete`` can name
    them, so the autoscaler deletes them itself."""
    return tuple(d.pod for d in plan.deletes if d.group not in groups)


def busy_surplus(
    decision: Decision,
    snapshot: Snapshot,
    ray: Mapping[str, RayNode],
    ray_known: bool,
    max_replicas: Mapping[str, int],
    now: datetime,
) -> dict[str, Leaving]:
    """Pod -> Leaving for every host of the ``MAX_REPLICAS`` removals of `decision` whose replica
    has a busy host: running, and its Ray node alive and not idle (`ray`; any running host when
    Ray's state is not known, `ray_known` False)."""
    nodes = {n.name: n for n in snapshot.nodes}

    def busy(pod: str) -> bool:
        node = nodes.get(pod)
        if node is None or node.state is not NodeState.RUNNING:
            return False
        found = ray.get(pod)
        return not ray_known or (found is not None and not found.idle)

    units: dict[tuple[str, str], list[str]] = {}
    for removal in decision.terminate:
        if removal.reason is RemovalCause.MAX_REPLICAS:
            units.setdefault((removal.group, removal.replica or removal.name), []).append(removal.name)
    out = {}
    for (group, _), pods in sorted(units.items()):
        if any(busy(p) for p in pods):
            cap = max_replicas.get(group)
            message = f"Worker group {group} has more replicas than its maxReplicas ({cap}) allows."
            out.update({p: Leaving(MAX_REPLICAS, group, now, message) for p in pods})
    return out


def merged(first: DisruptionPlan, second: DisruptionPlan) -> DisruptionPlan:
    """Two plans of one round over different pods as one (the head's notice: the first's)."""
    replacements = dict(first.replacements)
    for group, count in second.replacements.items():
        replacements[group] = replacements.get(group, 0) + count
    return DisruptionPlan(
        drains=first.drains + second.drains,
        deletes=first.deletes + second.deletes,
        waiting=first.waiting + second.waiting,
        replacements=replacements,
        head=first.head,
        events=first.events + second.events,
    )


def removal_condition(problem: str | None, now: datetime, old: Obj | None) -> dict[str, str] | None:
    """The ``RemovalDrain`` condition of ``status.autoscaler`` while the annotation's value is not
    implemented (status False, reason ``InvalidAnnotation``); None when it is fine. `old`: the
    ``status.autoscaler`` written, whose condition keeps its time while its message holds."""
    if problem is None:
        return None
    was = next((c for c in (old or {}).get("conditions") or () if c.get("type") == CONDITION), None)
    since = (was or {}).get("lastTransitionTime") if (was or {}).get("message") == problem else None
    return {
        "type": CONDITION,
        "status": "False",
        "reason": "InvalidAnnotation",
        "message": problem,
        "lastTransitionTime": since or rfc3339(now),
    }
