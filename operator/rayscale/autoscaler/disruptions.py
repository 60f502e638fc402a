"""The disruption notices in an autoscaling round (pure): what rayscale.disruption.plan is given
and what the round does with its answer.

`plan_round` builds one cluster's `DisruptionInput` (its pods, the notices of the nodes they run
on and their own ``DisruptionTarget`` notices, Ray's live node for each worker pod from the GCS
state, the drains asked and accepted in earlier rounds, ``numOfHosts`` per group) and plans. The
round then:

- asks the plan's drains (``PREEMPTION``, the notice's message and deadline) and remembers the
  accepted ones (`remember_asked`), so a drain is not asked again;
- hands the scheduler the pods the plan deletes (`deleting`: draining, they go as ``DRAINED``,
  through the same ``workersToDelete`` patch as every removal) and the ones still leaving
  (`leaving`: held, no new work, not counted towards their group's ``minReplicas``, so their
  replacements start at once, within ``maxReplicas``);
- posts the Events of what it did (`events_to_post`): a drain Event once a host of the unit
  accepted, a delete Event once the patch named every pod of the unit, the head's Warning once
  per notice;
- shows what is still leaving, and the head's notice, as the ``Disruption`` condition of
  ``status.autoscaler`` (`disruption_condition`).

Without Ray's state (``state`` None) the plan asks nothing and deletes a unit only at its
deadline.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime

from rayscale.autoscaler.scheduling.model import Group
from rayscale.autoscaler.snapshot import still_working
from rayscale.common.pods import is_worker, pod_name
from rayscale.common.timefmt import rfc3339
from rayscale.common.types import Obj
from rayscale.disruption.notice import Notice, pod_notice
from rayscale.disruption.plan import (
    EVENT_DELETE,
    EVENT_DRAIN,
    AskedDrain,
    DisruptionEvent,
    DisruptionInput,
    DisruptionPlan,
    Drain,
    RayNode,
    plan_disruptions,
    when,
)
from rayscale.disruption.units import strongest
from rayscale.ray import model as ray

__all__ = [
    "CONDITION",
    "deleting",
    "disruption_condition",
    "events_to_post",
    "head_key",
    "leaving",
    "plan_round",
    "ray_nodes",
    "remember_asked",
]

CONDITION = "Disruption"
HeadKey = tuple[str, str, datetime | None]  # the head pod, its notice's source and deadline


def ray_nodes(pods: Sequence[Obj], state: ray.ClusterState) -> dict[str, RayNode]:
    """Worker pod -> its live Ray node: idle (Ray says IDLE, or DRAINING with no work left) and
    draining (Ray says DRAINING)."""
    out: dict[str, RayNode] = {}
    for pod in pods:
        if not is_worker(pod):
            continue
        found = state.node_by_instance(pod_name(pod))
        if found is None or not found.alive:
            continue
        draining = found.status is ray.NodeStatus.DRAINING
        idle = found.status is ray.NodeStatus.IDLE or (draining and not still_working(found))
        out[pod_name(pod)] = RayNode(found.node_id, idle=idle, draining=draining)
    return out


def _notices(
    pods: Sequence[Obj], nodes: Mapping[str, Notice], now: datetime
) -> tuple[dict[str, Notice], dict[str, Notice]]:
    """The notices of the nodes `pods` run on, and the pods' own."""
    by_node: dict[str, Notice] = {}
    by_pod: dict[str, Notice] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and node in nodes:
            by_node[node] = nodes[node]
        own = pod_notice(pod, now)
        if own is not None:
            by_pod[pod_name(pod)] = own
    return by_node, by_pod


def plan_round(
    groups: Iterable[Group],
    pods: Sequence[Obj],
    state: ray.ClusterState | None,
    nodes: Mapping[str, Notice],
    asked: Mapping[str, AskedDrain],
    now: datetime,
    own: Mapping[str, Notice] | None = None,
) -> DisruptionPlan:
    """The round's disruption plan of a cluster with `groups` and `pods`; `nodes`: every node's
    notice (node name -> notice); `asked`: the drains asked and accepted before; `own`: notices
    of pods rayscale gives them itself (pod name -> notice: a removed worker group's, a replica
    above a lowered maxReplicas, see spec_removals.py), beside their ``DisruptionTarget``."""
    by_node, by_pod = _notices(pods, nodes, now)
    for pod, notice in (own or {}).items():
        found = strongest((by_pod.get(pod), notice))
        if found is not None:
            by_pod[pod] = found
    if not by_node and not by_pod:
        return DisruptionPlan()
    return plan_disruptions(
        DisruptionInput(
            pods=pods,
            node_notices=by_node,
            pod_notices=by_pod,
            ray_nodes=ray_nodes(pods, state) if state is not None else {},
            asked=asked,
            now=now,
            hosts_per_group={g.name: g.num_of_hosts for g in groups},
            ray_known=state is not None,
        )
    )


def deleting(plan: DisruptionPlan) -> frozenset[str]:
    """The pods the plan deletes this round."""
    return frozenset(d.pod for d in plan.deletes)


def leaving(plan: DisruptionPlan) -> frozenset[str]:
    """The pods the plan takes but does not delete yet."""
    return frozenset(w.pod for w in plan.waiting)


def remember_asked(
    asked: Mapping[str, AskedDrain],
    drains: Sequence[Drain],
    accepted: Collection[str],
    pods: Sequence[Obj],
    now: datetime,
) -> dict[str, AskedDrain]:
    """The drains asked and accepted, kept while their pods exist: `asked` and the `drains` whose
    pod is in `accepted`."""
    existing = {pod_name(p) for p in pods}
    out = {pod: drain for pod, drain in asked.items() if pod in existing}
    out.update({d.pod: AskedDrain(now, d.deadline, d.node_id) for d in drains if d.pod in accepted})
    return out


def head_key(plan: DisruptionPlan) -> HeadKey | None:
    """What identifies the head's notice (its Warning is posted once per key)."""
    head = plan.head
    return None if head is None else (head.pod, head.source, head.deadline)


def events_to_post(
    plan: DisruptionPlan, accepted: Collection[str], removed: Collection[str], head_posted: bool
) -> list[DisruptionEvent]:
    """The plan's Events of what the round did: a drain Event when a host of its unit accepted
    (`accepted`), a delete Event when the patch named every pod of its unit (`removed`), the
    head's unless it was posted for the same notice already (`head_posted`)."""
    out = []
    for event in plan.events:
        if event.reason == EVENT_DRAIN:
            wanted = any(p in accepted for p in event.pods)
        elif event.reason == EVENT_DELETE:
            wanted = bool(event.pods) and all(p in removed for p in event.pods)
        else:
            wanted = not head_posted
        if wanted:
            out.append(event)
    return out


def _message(plan: DisruptionPlan) -> str:
    parts = []
    if plan.waiting:
        pods = ", ".join(f"{w.pod} ({w.source}, {when(w.deadline)})" for w in plan.waiting)
        parts.append(f"Draining before deletion, deleted when idle or at the deadline: {pods}.")
    if plan.head is not None:
        parts.append(f"The head pod {plan.head.pod} has a notice rayscale cannot drain it for "
                     f"({when(plan.head.deadline)}): {plan.head.message}")  # fmt: skip
    return " ".join(parts)


def disruption_condition(plan: DisruptionPlan, now: datetime, old: Obj | None) -> dict[str, str] | None:
    """The ``Disruption`` condition of ``status.autoscaler`` while pods are leaving for a notice
    (reason ``Draining``) or the head has one (``HeadNotice``); None when neither. `old`: the
    ``status.autoscaler`` written, whose condition keeps its time while its reason holds."""
    if not plan.waiting and plan.head is None:
        return None
    reason = "Draining" if plan.waiting else "HeadNotice"
    was = next((c for c in (old or {}).get("conditions") or () if c.get("type") == CONDITION), None)
    since = (was or {}).get("lastTransitionTime") if (was or {}).get("reason") == reason else None
    return {
        "type": CONDITION,
        "status": "True",
        "reason": reason,
        "message": _message(plan)[:2000],
        "lastTransitionTime": since or rfc3339(now),
    }
