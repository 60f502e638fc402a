"""Choosing new replicas for demand that existing hosts cannot take.

Shape-grouped greedy packing. The most constrained remaining shape (accelerators first, then
fewest groups, then biggest) anchors the next launch. The groups that may host it and can
launch are narrowed to those matching its earliest selector (its preferred label selector,
then its fallbacks), then to those without accelerators it does not use. For each of them one
replica is filled: first with the shapes the group is meant for, in proportion to what is left
of each (so CPU-heavy and memory-heavy shapes share a host instead of stranding one resource),
then topped up largest first; shapes that avoid the group (CPU work on a GPU group) only fill
room left on a host that already holds work meant for it. The replica that takes the most
work wins (ties: higher priority, then less unused capacity), and the same fill is repeated
for as many replicas as the remaining counts allow, so the work grows with the number of
distinct fills, not with units or hosts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rayscale.autoscaler.scheduling.catalog import Catalog, GroupInfo, Shape
from rayscale.autoscaler.scheduling.fleet import Fleet
from rayscale.autoscaler.scheduling.model import UnmetReason
from rayscale.autoscaler.scheduling.pool import NEW, Pool
from rayscale.autoscaler.scheduling.space import EPS, Vec, fit_count, sub

HostFill = dict[int, int]  # shape index -> units on one host


@dataclass(slots=True)
class Launch:
    """``copies`` new replicas of ``group``, each host filled as ``fills`` says."""

    group: int
    copies: int
    fills: list[HostFill]
    free: list[Vec]  # per host, what is left after the fill
    replicas: list[int]


def shape_order(catalog: Catalog, shape: Shape) -> tuple[bool, int, float, Vec]:
    """Most constrained first: accelerator work, fewer possible groups, bigger, then the vector."""
    uses_accel = any(shape.vec[i] > 0 for i in catalog.space.accelerators)
    return (not uses_accel, len(shape.eligible), -shape.weight, tuple(-a for a in shape.vec))


def blocked_reason(fleet: Fleet, groups: Sequence[int]) -> UnmetReason:
    """The unmet reason for work whose possible groups are all unable to launch."""
    if not groups:
        return UnmetReason.NO_MATCHING_GROUP
    reasons = {fleet.blocked(g) for g in groups}
    for reason in (UnmetReason.MAX_WORKERS, UnmetReason.UPSCALING_LIMIT, UnmetReason.MAX_REPLICAS):
        if reason in reasons:
            return reason
    return UnmetReason.BACKOFF


def _add(fill: HostFill, shape: int, units: int) -> None:
    if units > 0:
        fill[shape] = fill.get(shape, 0) + units


def _proportional(free: Vec, shapes: Sequence[Shape], left: dict[int, int], fill: HostFill) -> Vec:
    """Fill with units of every shape in proportion to how many are left, then top up."""
    if not shapes:
        return free
    totals = [0.0] * len(free)
    for s in shapes:
        for i in s.idx:
            totals[i] += s.vec[i] * left[s.index]
    t = min((free[i] / totals[i] for i in range(len(free)) if totals[i] > EPS), default=0.0)
    if t > EPS:
        for s in shapes:
            units = min(left[s.index], int(t * left[s.index]))
            units = min(units, fit_count(free, s.vec, s.idx))
            if units:
                free = sub(free, s.vec, units)
                left[s.index] -= units
                _add(fill, s.index, units)
    for s in shapes:  # top up, most constrained first
        units = min(left[s.index], fit_count(free, s.vec, s.idx))
        if units:
            free = sub(free, s.vec, units)
            left[s.index] -= units
            _add(fill, s.index, units)
    return free


def fill_host(
    capacity: Vec,
    anchor: Shape | None,
    primary: Sequence[Shape],
    filler: Sequence[Shape],
    left: dict[int, int],
    one_per_host: bool,
) -> tuple[HostFill, Vec]:
    """What one new host of a group takes from ``left`` (updated in place)."""
    fill: HostFill = {}
    free = capacity
    if one_per_host:
        for s in primary:
            if left[s.index] and fit_count(free, s.vec, s.idx):
                left[s.index] -= 1
                return {s.index: 1}, sub(free, s.vec)
        return fill, free
    if anchor is not None and left[anchor.index] and fit_count(free, anchor.vec, anchor.idx):
        free = sub(free, anchor.vec)
        left[anchor.index] -= 1
        _add(fill, anchor.index, 1)
    free = _proportional(free, [s for s in primary if left[s.index]], left, fill)
    if fill:
        free = _proportional(free, [s for s in filler if left[s.index]], left, fill)
    return fill, free


def fill_replica(
    group: GroupInfo, anchor: Shape, pending: Sequence[Shape], counts: dict[int, int], one_per_host: bool
) -> tuple[list[HostFill], list[Vec]]:
    primary = [s for s in pending if group.index in s.preferred]
    filler = [s for s in pending if group.index in s.eligible and group.index not in s.preferred]
    if group.index not in anchor.preferred:  # the anchor itself avoids this group: it leads
        primary = [anchor, *[s for s in primary if s is not anchor]]
        filler = [s for s in filler if s is not anchor]
    left = dict(counts)
    fills: list[HostFill] = []
    frees: list[Vec] = []
    for capacity in group.hosts:
        first = anchor if not fills or not any(anchor.index in f for f in fills) else None
        fill, free = fill_host(capacity, first, primary, filler, left, one_per_host)
        fills.append(fill)
        frees.append(free)
    return fills, frees


def _work(catalog: Catalog, fills: list[HostFill]) -> float:
    return sum(catalog.shapes[s].weight * n for fill in fills for s, n in fill.items())


def _best_tier(shape: Shape, groups: list[int]) -> list[int]:
    """The groups matching the shape's earliest selector, and among them those it does not avoid."""
    if not groups:
        return groups
    tier = min((shape.ranks[g], shape.avoids(g)) for g in groups)
    return [g for g in groups if (shape.ranks[g], shape.avoids(g)) == tier]


def pack_new(
    catalog: Catalog,
    fleet: Fleet,
    pools: Sequence[Pool],
    counts: dict[int, int],
    *,
    one_per_host: bool = False,
    repeat: bool = True,
) -> tuple[list[Launch], dict[int, UnmetReason]]:
    """Launch replicas for ``counts`` (shape index -> units; emptied as units are placed).

    New hosts are added to every pool in ``pools``: the first with what the fill left free,
    the others with their full capacity. Returns the launches and, per shape that could
    not be placed, the reason.
    """
    launches: list[Launch] = []
    unmet: dict[int, UnmetReason] = {}
    pending = sorted(
        (catalog.shapes[i] for i, n in counts.items() if n > 0), key=lambda s: shape_order(catalog, s)
    )
    while pending:
        anchor = pending[0]
        groups = _best_tier(anchor, [g for g in anchor.eligible if fleet.room(g, 1)])
        if not groups:
            unmet[anchor.index] = blocked_reason(fleet, anchor.eligible)
            pending.pop(0)
            continue
        best: tuple[tuple[float, int, float, int], GroupInfo, list[HostFill], list[Vec]] | None = None
        for g in groups:
            info = catalog.groups[g]
            fills, frees = fill_replica(info, anchor, pending, counts, one_per_host)
            work = _work(catalog, fills) / info.num_hosts
            if work <= 0:
                continue
            waste = sum(catalog.space.size(f) for f in frees)
            rank = (-work, -info.spec.priority, waste, g)
            if best is None or rank < best[0]:
                best = (rank, info, fills, frees)
        if best is None:  # cannot happen: an eligible group always holds one anchor unit
            unmet[anchor.index] = UnmetReason.NO_MATCHING_GROUP
            pending.pop(0)
            continue
        _, info, fills, frees = best
        per_replica: dict[int, int] = {}
        for fill in fills:
            for s, n in fill.items():
                per_replica[s] = per_replica.get(s, 0) + n
        copies = min(counts[s] // n for s, n in per_replica.items()) if repeat else 1
        copies = fleet.room(info.index, max(copies, 1))
        launch = Launch(info.index, copies, fills, frees, [])
        for _ in range(copies):
            rid = fleet.launch(info.index)
            launch.replicas.append(rid)
            for i, (host, free) in enumerate(zip(fleet.replicas[rid].hosts, frees, strict=True)):
                pools[0].add(host, info.index, NEW, free)
                for other in pools[1:]:
                    other.add(host, info.index, NEW, info.hosts[i])
        for s, n in per_replica.items():
            counts[s] -= n * copies
        launches.append(launch)
        pending = [s for s in pending if counts[s.index] > 0]
    return launches, unmet
