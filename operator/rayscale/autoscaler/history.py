"""The autoscaler's recent decisions per cluster, bounded, for people to read (pure).

A `DecisionRecord` says, for one round: when it ran and what triggered it (an event of the
RayCluster, one of its pods, RayResourceRequests or RayVirtualClusters; else ``periodic``), the
demand it saw (pending tasks and actors, placement groups, ``request_resources`` and
RayResourceRequest bundles, counted by shape), what it launched per group and for what, what it
removed and why (pod, RemovalCause), what stayed unmet and why (UnmetReason and its text), whether
the round was held (Ray's view could not be trusted, trust.py) and whether its patch was written.
Every list is bounded (`MAX_ENTRIES`, `MAX_REMOVED`; what is left out is counted).

`DecisionHistory` keeps the last `HISTORY_LIMIT` records of one cluster. A round that decided the
same as the previous record on the same demand adds nothing: the previous record's ``repeats``
and ``last_seen`` move instead, so a steady cluster does not push out the interesting records.
Its hold counts by kind (the reason's text up to its first ``:``, which is where a countdown
follows). The latest `SCENARIO_LIMIT` records also keep the scheduler's input (for a held round,
the snapshot with nothing due to go that the scheduler saw), returned as a scenario document
(docs/scenario-format.md) that ``rayscale simulate`` replays.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from rayscale.autoscaler.scenario_write import to_scenario
from rayscale.autoscaler.scheduling.model import (
    Decision,
    DemandKind,
    Placement,
    RemovalCause,
    Snapshot,
    Target,
    Unmet,
    UnmetReason,
)
from rayscale.autoscaler.status import WHAT, WHY, shape_text, work_shape
from rayscale.common.timefmt import rfc3339

__all__ = [
    "HISTORY_LIMIT",
    "MAX_ENTRIES",
    "MAX_REMOVED",
    "PERIODIC",
    "SCENARIO_LIMIT",
    "DecisionHistory",
    "DecisionRecord",
    "DemandEntry",
    "Launch",
    "RemovalEntry",
    "UnmetEntry",
    "WorkKind",
    "decision_record",
    "demand_dict",
    "demand_entries",
    "record_dict",
    "unmet_dict",
    "unmet_entries",
]

HISTORY_LIMIT = 50  # records kept per cluster
SCENARIO_LIMIT = 5  # of which the newest keep the scheduler's input
MAX_ENTRIES = 20  # demand shapes, unmet entries and groups launched per record
MAX_REMOVED = 50  # removals per record
PERIODIC = "periodic"


class WorkKind(StrEnum):
    """A kind of work as the view (and the decision history) names it."""

    TASK = "task"  # pending tasks and actors
    PLACEMENT_GROUP = "placementGroup"
    REQUEST = "request"  # bundles of request_resources or of a RayResourceRequest


# The scheduler's kinds of work, as the view names them.
KINDS = {
    DemandKind.DEMAND: WorkKind.TASK,
    DemandKind.GANG: WorkKind.PLACEMENT_GROUP,
    DemandKind.CONSTRAINT: WorkKind.REQUEST,
}
_WHAT = {ours: WHAT[theirs] for theirs, ours in KINDS.items()}

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class DemandEntry:
    """`count` units of one shape of work.

    ``task``: pending tasks and actors (Ray reports them together), `resources` each;
    ``placementGroup``: pending placement groups of `bundles` and `strategy`;
    ``request``: bundles of Ray's ``request_resources`` (`unit` "") or of one RayResourceRequest
    (`unit` "<namespace>/<name>"), `resources` each.
    """

    kind: WorkKind
    count: int
    resources: Mapping[str, float] | None = None
    bundles: tuple[Mapping[str, float], ...] | None = None
    strategy: str | None = None
    unit: str | None = None

    def text(self) -> str:
        if self.bundles is not None:
            what = f"{self.strategy} [{', '.join(shape_text(b) for b in self.bundles)}]"
        else:
            what = shape_text(self.resources)
        return f"{self.count} x {what} ({_WHAT[self.kind]})"


@dataclass(frozen=True, slots=True)
class UnmetEntry:
    what: DemandEntry
    reason: UnmetReason
    why: str  # status.WHY's text of the reason


@dataclass(frozen=True, slots=True)
class Launch:
    group: str
    replicas: int  # replicas launched
    why: tuple[str, ...]  # the work placed on them, or minReplicas


@dataclass(frozen=True, slots=True)
class RemovalEntry:
    group: str
    pod: str  # the pod name (unborn:<group>:<n> for a replica whose pod was never created)
    replica: str | None
    cause: RemovalCause


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    at: datetime  # when the round ran (UTC); the first of the repeats
    trigger: str  # what marked the cluster ("RayCluster", "pod", ...), or "periodic"
    demand: tuple[DemandEntry, ...]
    launched: tuple[Launch, ...]
    removed: tuple[RemovalEntry, ...]
    unmet: tuple[UnmetEntry, ...]
    held: str | None  # why the round was held, None when it was not
    written: bool  # whether the round's patch of the RayCluster was written
    omitted: Mapping[str, int] = dataclasses.field(default_factory=dict)  # entries left out, per list
    last_seen: datetime | None = None  # the latest round that decided the same (None: this one)
    repeats: int = 0  # further rounds that decided the same
    snapshot: Snapshot | None = None  # the scheduler's input (kept on the newest records only)

    def same(self, other: DecisionRecord) -> bool:
        """Whether `other` decided the same on the same demand (times and triggers aside). Rounds
        that launched and removed nothing are the same whether or not they wrote a patch (one that
        only tidies ``workersToDelete`` after the pods went is no decision a person looks for)."""
        idle = not (self.launched or self.removed)
        return (
            self.demand == other.demand
            and self.launched == other.launched
            and self.removed == other.removed
            and self.unmet == other.unmet
            and _hold_kind(self.held) == _hold_kind(other.held)
            and (idle or self.written == other.written)
            and self.omitted == other.omitted
        )


def _hold_kind(reason: str | None) -> str | None:
    return None if reason is None else reason.partition(":")[0]


def _bounded(items: Iterable[T], limit: int, name: str, omitted: dict[str, int]) -> tuple[T, ...]:
    listed = list(items)
    if len(listed) > limit:
        omitted[name] = len(listed) - limit
    return tuple(listed[:limit])


def _key(resources: Mapping[str, float] | None) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((resources or {}).items()))


def _summed(entries: Iterable[DemandEntry]) -> list[DemandEntry]:
    """Entries of the same shape (label selectors aside) counted together, the largest first."""
    total: dict[tuple[Any, ...], DemandEntry] = {}
    for e in entries:
        key = (e.kind, _key(e.resources), tuple(_key(b) for b in e.bundles or ()), e.strategy, e.unit)
        was = total.get(key)
        total[key] = e if was is None else dataclasses.replace(was, count=was.count + e.count)
    return sorted(total.values(), key=lambda e: -e.count)


def demand_entries(snapshot: Snapshot) -> list[DemandEntry]:
    """The demand of `snapshot` by shape: tasks and actors, placement groups, requested bundles."""
    entries = [DemandEntry(WorkKind.TASK, d.count, resources=d.resources) for d in snapshot.demands]
    entries += [
        DemandEntry(WorkKind.PLACEMENT_GROUP, g.count, bundles=g.bundles, strategy=str(g.strategy))
        for g in snapshot.gangs
    ]
    entries += [
        DemandEntry(WorkKind.REQUEST, c.count, resources=c.resources, unit=c.unit)
        for c in snapshot.constraints
    ]
    return _summed(entries)


def _what(u: Unmet | Placement) -> DemandEntry:
    return DemandEntry(
        KINDS[u.kind],
        u.count,
        resources=u.resources,
        bundles=u.bundles,
        strategy=None if u.strategy is None else str(u.strategy),
        unit=u.unit if u.kind == DemandKind.CONSTRAINT else None,
    )


def unmet_entries(decision: Decision) -> list[UnmetEntry]:
    return [UnmetEntry(_what(u), u.reason, WHY.get(u.reason, str(u.reason))) for u in decision.unmet]


def _launches(snapshot: Snapshot, decision: Decision) -> list[Launch]:
    groups = {g.name: g for g in snapshot.groups}
    out = []
    for name, chosen in decision.groups.items():
        if chosen.launch <= 0:
            continue
        placed = [
            dataclasses.replace(_what(p), count=t.count)
            for p in decision.placements
            for t in p.targets
            if t.on is Target.NEW and t.group == name
        ]
        why = [e.text() for e in _summed(placed)]
        group = groups.get(name)
        short = (group.min_replicas if group else 0) - (chosen.current - chosen.terminate)
        if short > 0:
            why.append(f"{short} to reach minReplicas {group.min_replicas if group else 0}")
        out.append(Launch(name, chosen.launch, tuple(why) or ("a virtual cluster's share of the group",)))
    return out


def decision_record(
    snapshot: Snapshot,
    decision: Decision,
    now: datetime,
    *,
    trigger: str = PERIODIC,
    held: str | None = None,
    written: bool = False,
    scheduled: Snapshot | None = None,
) -> DecisionRecord:
    """The record of one round: `snapshot` is the round's own, `scheduled` what the scheduler saw
    (default: `snapshot`), `decision` what it decided once applied (what the patch wrote)."""
    omitted: dict[str, int] = {}
    removed = (RemovalEntry(r.group, r.name, r.replica, r.reason) for r in decision.terminate)
    return DecisionRecord(
        at=now,
        trigger=trigger,
        demand=_bounded(demand_entries(snapshot), MAX_ENTRIES, "demand", omitted),
        launched=_bounded(_launches(snapshot, decision), MAX_ENTRIES, "launched", omitted),
        removed=_bounded(removed, MAX_REMOVED, "removed", omitted),
        unmet=_bounded(unmet_entries(decision), MAX_ENTRIES, "unmet", omitted),
        held=held,
        written=written,
        omitted=omitted,
        snapshot=scheduled if scheduled is not None else snapshot,
    )


class DecisionHistory:
    """The last `limit` records of one cluster, oldest first; the newest `scenarios` keep their input."""

    def __init__(self, limit: int = HISTORY_LIMIT, scenarios: int = SCENARIO_LIMIT) -> None:
        self._records: deque[DecisionRecord] = deque(maxlen=limit)
        self._scenarios = scenarios

    def __len__(self) -> int:
        return len(self._records)

    def add(self, record: DecisionRecord) -> bool:
        """Record a round; False when it decided the same as the last record (which then repeats)."""
        if self._records and self._records[-1].same(record):
            last = self._records[-1]
            self._records[-1] = dataclasses.replace(last, last_seen=record.at, repeats=last.repeats + 1)
            return False
        self._records.append(record)
        if len(self._records) > self._scenarios:
            old = self._records[-1 - self._scenarios]
            if old.snapshot is not None:
                self._records[-1 - self._scenarios] = dataclasses.replace(old, snapshot=None)
        return True

    def confirm(self, at: datetime) -> None:
        """A read of Ray's state that found nothing new (poll.py) stands for a round deciding the same:
        the newest record repeats."""
        if self._records:
            last = self._records[-1]
            self._records[-1] = dataclasses.replace(last, last_seen=at, repeats=last.repeats + 1)

    def newest_first(self) -> list[DecisionRecord]:
        return list(reversed(self._records))

    def scenario(self, index: int = 0) -> dict[str, Any] | None:
        """The scenario document of the `index`-th newest record (0: the latest), if it kept one."""
        if not 0 <= index < len(self._records):
            return None
        snapshot = self._records[-1 - index].snapshot
        return None if snapshot is None else to_scenario(snapshot)


# ----------------------------------------------------------------------------- as JSON


def demand_dict(entry: DemandEntry) -> dict[str, Any]:
    out = work_shape(entry.kind, entry.resources, entry.bundles, entry.strategy)
    if entry.kind == WorkKind.REQUEST:
        out["unit"] = entry.unit or ""
    out["count"] = entry.count
    return out


def unmet_dict(entry: UnmetEntry) -> dict[str, Any]:
    return {**demand_dict(entry.what), "reason": str(entry.reason), "why": entry.why}


def record_dict(record: DecisionRecord) -> dict[str, Any]:
    """A record as JSON-ready data (see view.py for the contract)."""
    return {
        "time": rfc3339(record.at),
        "lastSeen": rfc3339(record.last_seen or record.at),
        "repeats": record.repeats,
        "trigger": record.trigger,
        "demand": [demand_dict(e) for e in record.demand],
        "launched": [{"group": x.group, "replicas": x.replicas, "why": list(x.why)} for x in record.launched],
        "removed": [
            {"group": r.group, "pod": r.pod, "replica": r.replica, "cause": str(r.cause)}
            for r in record.removed
        ],
        "unmet": [unmet_dict(e) for e in record.unmet],
        "omitted": dict(record.omitted),
        "held": record.held,
        "written": record.written,
        "scenario": record.snapshot is not None,
    }
