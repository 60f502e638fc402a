"""New hosts for pending tasks and actors, packed tighter than Ray's greedy, under Ray's rules.

Existing hosts take what they can first, exactly as in Ray (``Placer.on_existing``). What is
left is packed shape by shape, not unit by unit. The most constrained shape left (accelerator
work first, then fewer possible groups, then the biggest) anchors the next launch. The groups
that may host it and can launch are narrowed as Ray's score ranks them: those matching its
earliest label selector, then those without accelerators it does not use (GPU hosts are kept
for GPU work). One replica of each is filled: the anchor, then the shapes meant for the group
in proportion to what is left of each (so CPU-heavy and memory-heavy shapes share a host
instead of stranding one resource), then topped up biggest first; shapes that would rather
avoid the group (CPU work on a GPU group) only take room left on a host that holds work meant
for it, never a host of their own. The replica that takes the most work per host wins (then
the group's priority, then the least left unused), and the same fill is launched for as many
replicas as the counts left allow: the work grows with distinct fills, not with units or hosts.

``place_demand`` runs both this packing and Ray's greedy for the new hosts and keeps the
packing only when it places every unit the greedy places and launches fewer hosts, no more
hosts of any accelerator kind and no more of any accelerator (so it never does worse than Ray).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rayscale.autoscaler.scheduling.catalog import GROUP_LABELS, Catalog, GroupInfo, Shape
from rayscale.autoscaler.scheduling.fleet import Fleet, HostKind
from rayscale.autoscaler.scheduling.greedy import DEMAND, Bin, Fill, Load, Placed, Placer, Result, Run
from rayscale.autoscaler.scheduling.space import EPS, Vec, fit_count, sub
from rayscale.cluster.accelerators import GPU, NEURON_CORES, TPU

ACCELERATORS = (GPU, TPU, NEURON_CORES)


@dataclass(frozen=True, slots=True)
class _Kinds:
    """Per snapshot: the accelerators each group carries, the largest host of every resource."""

    accelerators: tuple[int, ...]  # resource indexes
    carried: tuple[frozenset[int], ...]  # per group
    largest: Vec

    @classmethod
    def of(cls, catalog: Catalog) -> _Kinds:
        space = catalog.space
        acc = tuple(space.index[a] for a in ACCELERATORS if a in space.index)
        carried = tuple(frozenset(a for a in acc if any(h[a] > 0 for h in g.hosts)) for g in catalog.groups)
        hosts = [h for g in catalog.groups for h in g.hosts]
        largest = tuple(max((h[i] for h in hosts), default=0.0) for i in range(len(space.names)))
        return cls(acc, carried, largest)

    def uses(self, shape: Shape) -> frozenset[int]:
        return frozenset(a for a in self.accelerators if shape.vec[a] > 0)

    def avoids(self, shape: Shape, group: int) -> bool:
        """The group's hosts carry an accelerator the shape does not ask for."""
        carried = self.carried[group]
        return bool(carried) and not carried <= self.uses(shape)

    def weight(self, shape: Shape) -> float:
        """The dominant share of one unit against the largest host: the work it represents."""
        return max((shape.vec[i] / self.largest[i] for i in shape.idx if self.largest[i] > 0), default=0.0)

    def waste(self, free: Vec) -> float:
        return sum(f / m for f, m in zip(free, self.largest, strict=True) if m > 0)


class _Packer:
    def __init__(self, catalog: Catalog, fleet: Fleet, runs: Sequence[Run], left: list[int]) -> None:
        self.catalog = catalog
        self.fleet = fleet
        self.runs = runs
        self.left = left
        self.kinds = _Kinds.of(catalog)

    def _order(self, k: int) -> tuple[bool, int, float, Vec]:
        shape = self.runs[k].shape
        return (
            not self.kinds.uses(shape),
            len(shape.eligible),
            -self.kinds.weight(shape),
            tuple(-a for a in shape.vec),
        )

    def _tier(self, k: int) -> tuple[tuple[int, bool], list[int]]:
        """The groups that can launch and that Ray's score would rank first for run ``k``."""
        shape = self.runs[k].shape
        groups = [g for g in shape.eligible if self._room[g]]
        if not groups:
            return (0, False), []
        best = min((shape.ranks[g], self.kinds.avoids(shape, g)) for g in groups)
        return best, [g for g in groups if (shape.ranks[g], self.kinds.avoids(shape, g)) == best]

    def _proportional(self, free: Vec, ks: Sequence[int], left: list[int], fill: dict[int, int]) -> Vec:
        """Take units of every run in proportion to how many are left, then top up in order."""
        runs = self.runs
        totals = [0.0] * len(free)
        for k in ks:
            shape = runs[k].shape
            for i in shape.idx:
                totals[i] += shape.vec[i] * left[k]
        share = min((free[i] / t for i, t in enumerate(totals) if t > EPS), default=0.0)
        for proportional in (share > EPS, False):
            for k in ks:
                shape = runs[k].shape
                units = min(left[k], fit_count(free, shape.vec, shape.idx))
                if proportional:
                    units = min(units, int(share * left[k]))
                if units > 0:
                    free = sub(free, shape.vec, units)
                    left[k] -= units
                    fill[k] = fill.get(k, 0) + units
        return free

    def _replica(
        self, info: GroupInfo, anchor: int, pending: Sequence[int]
    ) -> tuple[list[dict[int, int]], list[Vec]]:
        """One replica of the group filled: per host, units by run and what stays free."""
        g = info.index
        meant, extra = [], []
        for k in pending:
            shape = self.runs[k].shape
            if g not in shape.ranks or k == anchor:
                continue
            rank, avoids = self._tiers[k]
            if (shape.ranks[g], self.kinds.avoids(shape, g)) == (rank, avoids):
                meant.append(k)
            elif shape.ranks[g] == rank and not avoids:
                extra.append(k)
        left = list(self.left)
        fills: list[dict[int, int]] = []
        frees: list[Vec] = []
        anchored = False
        anchor_shape = self.runs[anchor].shape
        for capacity in info.hosts:
            fill: dict[int, int] = {}
            free = capacity
            if not anchored and left[anchor] and fit_count(free, anchor_shape.vec, anchor_shape.idx):
                free = sub(free, anchor_shape.vec)
                left[anchor] -= 1
                fill[anchor] = 1
                anchored = True
            free = self._proportional(free, [anchor, *meant] if anchored else meant, left, fill)
            if fill:
                free = self._proportional(free, extra, left, fill)
            fills.append(fill)
            frees.append(free)
        return fills, frees

    def pack(self) -> list[tuple[int, list[dict[int, int]], list[Vec], list[int]]]:
        """Launch replicas for what is left; returns per launch the group, the fill and free
        resources of each host of a replica, and the replicas launched."""
        out = []
        left = self.left
        pending = sorted((k for k, n in enumerate(left) if n > 0), key=self._order)
        while pending:
            anchor = pending[0]
            self._room = [self.fleet.room(g.index, 1) > 0 for g in self.catalog.groups]
            self._tiers = {k: self._tier(k)[0] for k in pending}
            _, groups = self._tier(anchor)
            best: tuple[tuple[float, int, float, int], GroupInfo, list[dict[int, int]], list[Vec]] | None = (
                None
            )
            for g in groups:
                info = self.catalog.groups[g]
                fills, frees = self._replica(info, anchor, pending)
                work = sum(self.kinds.weight(self.runs[k].shape) * n for f in fills for k, n in f.items())
                if work <= 0:
                    continue
                waste = sum(self.kinds.waste(f) for f in frees)
                rank = (-work / info.num_hosts, -info.spec.priority, waste, g)
                if best is None or rank < best[0]:
                    best = (rank, info, fills, frees)
            if best is None:  # no group can launch for it: it stays unplaced
                pending.pop(0)
                continue
            _, info, fills, frees = best
            per_replica: dict[int, int] = {}
            for fill in fills:
                for k, n in fill.items():
                    per_replica[k] = per_replica.get(k, 0) + n
            copies = min(left[k] // n for k, n in per_replica.items())
            rids = self.fleet.launch_copies(info.index, self.fleet.room(info.index, max(copies, 1)))
            for k, n in per_replica.items():
                left[k] -= n * len(rids)
            out.append((info.index, fills, frees, rids))
            pending = [k for k in pending if left[k] > 0]
        return out

    _tiers: dict[int, tuple[int, bool]]  # per run left: its best (selector rank, avoids), this launch
    _room: list[bool]  # per group: may launch, this launch


def _launched(catalog: Catalog, fleet: Fleet, before: Sequence[int]) -> dict[object, float]:
    """Hosts launched since ``before`` (launches per group) by the accelerators they carry, and
    the amount launched of each accelerator (keyed by its resource index)."""
    kinds = _Kinds.of(catalog)
    out: dict[object, float] = {}
    for info in catalog.groups:
        replicas = fleet.launched[info.index] - before[info.index]
        key = kinds.carried[info.index]
        out[key] = out.get(key, 0) + replicas * info.num_hosts
        for a in kinds.accelerators:
            out[a] = out.get(a, 0.0) + replicas * sum(h[a] for h in info.hosts)
    return out


def _hosts(launched: dict[object, float]) -> float:
    return sum(n for kind, n in launched.items() if isinstance(kind, frozenset))


def _packed(placer: Placer, runs: Sequence[Run], left: list[int]) -> tuple[list[Placed], list[Bin]]:
    """Pack what is left onto new replicas (``left`` is updated)."""
    catalog, fleet = placer.catalog, placer.fleet
    fills: list[Placed] = []
    done: list[Bin] = []
    for group, host_fills, frees, rids in _Packer(catalog, fleet, runs, left).pack():
        info = catalog.groups[group]
        for position, (fill, free) in enumerate(zip(host_fills, frees, strict=True)):
            total = info.hosts[position]
            hosts = [fleet.replicas[rid].hosts[position] for rid in rids]
            loads = (Load(free), Load(total))
            bins = [
                Bin(h, group, HostKind.NEW, total, GROUP_LABELS, info.spec.priority, loads) for h in hosts
            ]
            done += bins
            if fill and bins:
                placed: Fill = sorted(fill.items())
                fills.append((bins[0], placed, len(bins)))
    return fills, done


def _accelerator_first(
    placer: Placer, runs: Sequence[Run], left: Sequence[int], fills: Sequence[Placed]
) -> tuple[list[Placed], list[int]] | None:
    """The existing hosts' fills redone so that hosts with an accelerator left free take the
    accelerator work still waiting first, then what they took before as far as it still fits
    (what no longer fits goes back to ``left``, for new hosts). Hosts keep holding work, so
    none becomes idle; None when no fill changes."""
    kinds = _Kinds.of(placer.catalog)
    left = list(left)
    out: list[Placed] = []
    for after, fill, copies in fills:
        pre = placer.before.get(after.host)
        free = after.loads[DEMAND].free
        carried = [a for a in kinds.accelerators if free[a] > EPS]
        wanted = [k for k, n in enumerate(left) if n > 0 and any(runs[k].shape.vec[a] > 0 for a in carried)]
        if pre is None or not wanted:
            out.append((after, fill, copies))
            continue
        placed = dict(fill)
        cap = [placed.get(k, 0) + (left[k] if k in wanted else 0) for k in range(len(runs))]
        order = wanted + [k for k, _ in fill if k not in wanted]
        got, redone = placer.try_bin(pre, runs, cap, DEMAND, order)
        now = dict(got)
        if sum(now.get(k, 0) - placed.get(k, 0) for k in wanted) <= 0:
            out.append((after, fill, copies))
            continue
        for k in set(placed) | set(now):
            left[k] += placed.get(k, 0) - now.get(k, 0)
        out.append((redone, sorted(got), copies))
    return (out, left) if out != list(fills) else None


def _better(
    packed: dict[object, float], packed_left: list[int], greedy: dict[object, float], greedy_left: list[int]
) -> bool:
    """Everything the greedy places is placed, on fewer hosts, no more of any kind or accelerator."""
    return (
        all(p <= g for p, g in zip(packed_left, greedy_left, strict=True))
        and _hosts(packed) < _hosts(greedy)
        and all(n <= greedy.get(kind, 0) + EPS for kind, n in packed.items())
    )


def place_demand(placer: Placer, runs: Sequence[Run]) -> Result:
    """Place pending tasks and actors: existing hosts as Ray does, then new hosts packed, or as
    Ray's greedy launches them where that is no worse. The packing is tried first with the
    existing hosts' accelerators given to accelerator work (``_accelerator_first``), then with
    Ray's fills."""
    fleet, catalog = placer.fleet, placer.catalog
    left = [r.count for r in runs]
    fills, done = placer.on_existing(runs, left, DEMAND)
    if placer.spares or not any(left):  # replicas launched earlier have hosts to fill first: Ray's way
        spares = list(placer.spares)
        placer.grow(runs, left, DEMAND, fills, done, spares)
        return Result(done, spares, fills, left)
    before = list(fleet.launched)
    fleet.checkpoint()
    greedy_left = list(left)
    placer.grow(runs, greedy_left, DEMAND, [], None, [])
    greedy = _launched(catalog, fleet, before)
    fleet.rollback()
    options = [(fills, left)]
    redo = _accelerator_first(placer, runs, left, fills)
    if redo is not None:
        options.insert(0, redo)
    for option_fills, option_left in options:
        fleet.checkpoint()
        packed_left = list(option_left)
        new_fills, new_done = _packed(placer, runs, packed_left)
        if _better(_launched(catalog, fleet, before), packed_left, greedy, greedy_left):
            fleet.commit()
            redone = {b.host: b for b, _, _ in option_fills}
            kept = [redone.get(b.host, b) for b in done]
            return Result(kept + new_done, [], list(option_fills) + new_fills, packed_left)
        fleet.rollback()
    fresh: list[Bin] = []
    placer.grow(runs, left, DEMAND, fills, done, fresh)
    return Result(done, fresh, fills, left)
