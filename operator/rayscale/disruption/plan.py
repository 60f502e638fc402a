"""What to do, for one RayCluster, about the disruptions Kubernetes announces (pure).

From the cluster's pods, the notices of their nodes and of the pods themselves (see notice.py),
Ray's view of each pod's node and the drains already asked, `plan_disruptions` decides one
round's `DisruptionPlan`: the Ray drains to ask, the worker pods to delete, the ones still
draining, how many replicas each group is losing, what to report of the head, and the Events.

The rules, for each disrupted unit (a multi-host replica as a whole, or one worker pod; see
units.py):

- Every host whose Ray node is alive and not draining is asked to drain with reason
  ``PREEMPTION``, the notice's message and its deadline (none: 0). ``PREEMPTION``, never
  ``IDLE_TERMINATION``: a notice is not rayscale's choice that Ray may refuse because the node
  has work (``IDLE_TERMINATION`` is refused by a busy node); a ``PREEMPTION`` drain cannot be
  refused, tells Ray to schedule nothing new on the node (new work goes to other nodes while the
  running work finishes) and tells it the deadline and why the node goes. A drain is asked once:
  again only when a newer notice brings the deadline forward.
- The unit is deleted, all its hosts in one round, when its deadline passed (hard or soft: the
  pods are killed then anyway), or when every host is done: Ray has no live node for it, or its
  node is idle after its drain was accepted (rayscale asked it in an earlier round, or Ray
  reports it draining). A soft notice without a deadline therefore waits as long as Ray's node
  is busy; a hard one deletes at its deadline whatever Ray says. The earliest deadline of a
  replica's hosts applies to the whole replica.
- Until then its hosts are `waiting`, and the unit counts once in its group's `replacements`
  (the replicas that are leaving: the autoscaler may start their replacements at once, on other
  nodes). It counts in the round that deletes it too, and no more once its pods are terminating.
- A terminating pod is neither drained nor deleted; a unit whose every host is terminating is left
  alone and not counted. A pod with no notice, on a node without one, is untouched unless it is
  a host of a disrupted multi-host replica.
- The head is never drained nor deleted (its Ray node cannot move to another node); a notice
  of the head's node or pod becomes a `HeadNotice` and a Warning Event.

Without Ray's state (``ray_known`` False: the GCS did not answer), nothing can be asked and no
host can be told done: no drain is planned and a unit is deleted only once its deadline passed
(its pods are killed then anyway); until then it waits.

The caller asks the drains first, remembers the accepted ones (`AskedDrain`, passed back in the
next round), then deletes the pods, without waiting: a unit deleted in the round its drain is
asked is one whose deadline passed, and the drain only tells Ray why the node goes. Each Event
names the pods it is about (`DisruptionEvent.pods`), so that the caller posts only what it did.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from rayscale.common.timefmt import rfc3339
from rayscale.common.types import Obj
from rayscale.disruption.notice import Notice
from rayscale.disruption.units import Host, RayNode, Unit, disrupted_units, head_notices, strongest

__all__ = [
    "DRAIN_REASON",
    "EVENT_DELETE",
    "EVENT_DRAIN",
    "EVENT_HEAD",
    "AskedDrain",
    "Delete",
    "DeleteWhy",
    "DisruptionEvent",
    "DisruptionInput",
    "DisruptionPlan",
    "Drain",
    "HeadNotice",
    "RayNode",
    "Waiting",
    "plan_disruptions",
    "when",
]

DRAIN_REASON = "PREEMPTION"  # rayscale.ray.model.DrainReason.PREEMPTION's value
#: Seconds after Ray accepted rayscale's drain during which an idle node is not taken at its word:
#: a task that began a moment before the drain shows in the GCS's view of the node's resources only
#: once its raylet reports it, and a round right after the drain would delete the busy pod.
SETTLE_SECONDS = 2.0
EVENT_DRAIN = "DisruptionDrain"
EVENT_DELETE = "DisruptionDelete"
EVENT_HEAD = "DisruptionHead"
NORMAL = "Normal"
WARNING = "Warning"


class DeleteWhy(StrEnum):
    IDLE = "idle"  # its Ray node is idle after accepting the drain
    NO_RAY_NODE = "no-ray-node"  # Ray has no live node for the pod
    DEADLINE = "deadline"  # the notice's deadline passed
    REPLICA = "replica"  # no notice of its own: another host of its replica must go


_WHY = {
    DeleteWhy.IDLE: "its Ray node is idle after draining",
    DeleteWhy.NO_RAY_NODE: "Ray has no live node for it",
    DeleteWhy.DEADLINE: "the notice's deadline passed",
    DeleteWhy.REPLICA: "another host of its replica must go",
}


@dataclass(frozen=True, slots=True)
class AskedDrain:
    """A drain rayscale asked of a pod's Ray node and Ray accepted. `node_id`: that Ray node (None:
    not known, taken as the pod's node now). A Ray node that started again in the pod (its
    ``ray start`` exits once Ray stopped the idle drained node, and the kubelet runs it again) is
    another node: it is asked to drain in its turn."""

    asked: datetime
    deadline: datetime | None
    node_id: str | None = None


@dataclass(frozen=True, slots=True)
class DisruptionInput:
    pods: Sequence[Obj]  # the RayCluster's pods
    node_notices: Mapping[str, Notice]  # node name -> its notice
    pod_notices: Mapping[str, Notice]  # pod name -> its notice
    ray_nodes: Mapping[str, RayNode]  # pod name -> its live Ray node (absent: none)
    asked: Mapping[str, AskedDrain]  # pod name -> the drain asked and accepted
    now: datetime  # timezone-aware
    hosts_per_group: Mapping[str, int] = field(default_factory=dict)  # group -> numOfHosts
    ray_known: bool = True  # False: Ray's state could not be read (`ray_nodes` says nothing)


@dataclass(frozen=True, slots=True)
class Drain:
    pod: str
    node_id: str
    reason: str  # DRAIN_REASON
    message: str
    deadline: datetime | None

    @property
    def deadline_ms(self) -> int:
        """The deadline as Ray's DrainNode takes it: Unix time in ms, 0 for none."""
        return 0 if self.deadline is None else max(0, int(self.deadline.timestamp() * 1000))


@dataclass(frozen=True, slots=True)
class Delete:
    pod: str
    group: str
    why: DeleteWhy
    source: str  # the unit's notice's source


@dataclass(frozen=True, slots=True)
class Waiting:
    pod: str
    source: str
    deadline: datetime | None


@dataclass(frozen=True, slots=True)
class HeadNotice:
    pod: str
    source: str
    message: str
    deadline: datetime | None


@dataclass(frozen=True, slots=True)
class DisruptionEvent:
    type: str  # NORMAL or WARNING
    reason: str  # EVENT_DRAIN, EVENT_DELETE or EVENT_HEAD
    message: str
    pods: tuple[str, ...] = ()  # the pods it is about: drained, deleted, or the head


@dataclass(frozen=True, slots=True)
class DisruptionPlan:
    drains: tuple[Drain, ...] = ()
    deletes: tuple[Delete, ...] = ()
    waiting: tuple[Waiting, ...] = ()
    replacements: Mapping[str, int] = field(default_factory=dict)  # group -> replicas leaving
    head: HeadNotice | None = None
    events: tuple[DisruptionEvent, ...] = ()


def when(deadline: datetime | None) -> str:
    """A notice's deadline as Events and conditions say it."""
    return "no deadline" if deadline is None else "deadline " + rfc3339(deadline.astimezone(UTC))


def _earlier(new: datetime | None, old: datetime | None) -> bool:
    return new is not None and (old is None or new < old)


def _asked_of(host: Host, asked: Mapping[str, AskedDrain]) -> AskedDrain | None:
    """The drain accepted by `host`'s present Ray node, if any (one of an earlier node of the
    pod is not this node's)."""
    before = asked.get(host.pod)
    if before is None or before.node_id is None or host.ray is None:
        return before
    return before if before.node_id == host.ray.node_id else None


def _to_ask(host: Host, deadline: datetime | None, asked: Mapping[str, AskedDrain]) -> bool:
    """Whether `host`'s Ray node is to be asked to drain: alive, not draining, not asked yet (or
    asked with a later deadline than the notice's now)."""
    if host.ray is None or host.ray.draining:
        return False
    before = _asked_of(host, asked)
    return before is None or _earlier(deadline, before.deadline)


def _done(host: Host, asked: Mapping[str, AskedDrain], now: datetime) -> bool:
    """No live Ray node, or an idle one whose drain was accepted: by Ray (it says DRAINING) or, at
    least `SETTLE_SECONDS` ago, asked by rayscale (earlier, an idle view may not show work that
    began just before the drain)."""
    ray = host.ray
    if ray is None:
        return True
    if not ray.idle:
        return False
    mine = _asked_of(host, asked)
    if mine is not None:
        return (now - mine.asked).total_seconds() >= SETTLE_SECONDS
    return ray.draining


def _why(host: Host, overdue: bool) -> DeleteWhy:
    if host.notice is None:
        return DeleteWhy.REPLICA
    if overdue:
        return DeleteWhy.DEADLINE
    return DeleteWhy.NO_RAY_NODE if host.ray is None else DeleteWhy.IDLE


def _no_time(deadline: datetime | None) -> str:
    """Why a unit goes whose deadline passed before any drain of it was accepted: a notice due at
    once (``node.kubernetes.io/out-of-service``, ``taint:KEY=0``), or one Ray could not be asked
    about in time."""
    return (
        f"the notice's deadline passed before its Ray nodes could be drained ({when(deadline)}; "
        "a notice due at once, such as out-of-service or a deadline of 0 s, leaves no time): "
        "nothing was drained, and the Ray work running there is not waited for"
    )


def _what(unit: Unit, hosts: Sequence[Host]) -> str:
    pods = ", ".join(h.pod for h in hosts)
    if unit.multi_host:
        return f"replica {unit.name} of worker group {unit.group} (pods {pods})"
    return f"pod {pods} of worker group {unit.group}"


@dataclass(slots=True)
class _Round:
    now: datetime
    asked: Mapping[str, AskedDrain]
    ray_known: bool = True
    drains: list[Drain] = field(default_factory=list)
    deletes: list[Delete] = field(default_factory=list)
    waiting: list[Waiting] = field(default_factory=list)
    replacements: Counter[str] = field(default_factory=Counter)
    events: list[DisruptionEvent] = field(default_factory=list)

    def unit(self, unit: Unit) -> None:
        live = unit.live
        if not live:
            return  # going already: someone else deletes it, and counts it
        notice = unit.notice
        self.replacements[unit.group] += 1
        overdue = notice.deadline is not None and notice.deadline <= self.now
        asking = [h for h in live if self.ray_known and _to_ask(h, notice.deadline, self.asked)]
        for host in asking:
            assert host.ray is not None
            self.drains.append(
                Drain(host.pod, host.ray.node_id, DRAIN_REASON, notice.message, notice.deadline)
            )
        what = _what(unit, live)
        pods = tuple(h.pod for h in live)
        if overdue or (self.ray_known and all(_done(h, self.asked, self.now) for h in live)):
            whys = [_why(h, overdue) for h in live]
            self.deletes.extend(
                Delete(h.pod, unit.group, w, notice.source) for h, w in zip(live, whys, strict=True)
            )
            texts = dict(_WHY)
            if overdue and not any(h.pod in self.asked for h in live):  # no drain accepted before
                texts[DeleteWhy.DEADLINE] = _no_time(notice.deadline)
            because = "; ".join(sorted({texts[w] for w in whys}))
            message = f"Deleting {what}: {because}. {notice.message}"
            self.events.append(DisruptionEvent(NORMAL, EVENT_DELETE, message, pods))
            return
        self.waiting.extend(Waiting(h.pod, notice.source, notice.deadline) for h in live)
        if asking:
            message = f"Draining the Ray nodes of {what}, {when(notice.deadline)}: {notice.message}"
            self.events.append(DisruptionEvent(NORMAL, EVENT_DRAIN, message, tuple(h.pod for h in asking)))


def _head(pods: Sequence[Obj], data: DisruptionInput) -> tuple[HeadNotice | None, DisruptionEvent | None]:
    found = head_notices(pods, data.node_notices, data.pod_notices)
    notice = strongest(n for _, n in found)
    if notice is None:
        return None, None
    pod = next(p for p, n in found if n is notice)
    message = (
        f"The head pod {pod} cannot be drained onto another node; rayscale leaves it and reports "
        f"the notice ({when(notice.deadline)}): {notice.message}"
    )
    return HeadNotice(pod, notice.source, notice.message, notice.deadline), DisruptionEvent(
        WARNING, EVENT_HEAD, message, (pod,)
    )


def plan_disruptions(data: DisruptionInput) -> DisruptionPlan:
    """One round's decisions about the notices of `data`'s RayCluster (see the module's rules)."""
    if data.now.tzinfo is None:
        raise ValueError(f"now must be timezone-aware, not {data.now!r}")
    units = disrupted_units(
        data.pods, data.node_notices, data.pod_notices, data.ray_nodes, data.hosts_per_group
    )
    plan = _Round(data.now, data.asked, data.ray_known)
    for unit in units:
        plan.unit(unit)
    head, head_event = _head(data.pods, data)
    events = (head_event, *plan.events) if head_event is not None else tuple(plan.events)
    return DisruptionPlan(
        drains=tuple(plan.drains),
        deletes=tuple(plan.deletes),
        waiting=tuple(plan.waiting),
        replacements=dict(plan.replacements),
        head=head,
        events=events,
    )
