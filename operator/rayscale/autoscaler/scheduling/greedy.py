"""Best-node greedy placement, the algorithm Ray's own autoscaler uses.

A *batch* is what is placed together: Ray's ``request_resources`` (or one RayResourceRequest),
one placement group, or all pending tasks and actors. Its requests are sorted as Ray sorts them
(placement constraints, then selector length, then number of resource kinds, then the plain sum
of the amounts, then the amounts by name; biggest first) and placed in rounds. In each round
every candidate host takes, in that order, every request that still fits it (labels,
STRICT_SPREAD marks, resources); the host whose result scores best is kept and leaves the
candidates. The score is Ray's, compared in this order:

1. the best label selector (preferred before fallbacks) a request placed there matches;
2. no GPU host used for work that asks for no GPU;
3. how many resource kinds the work placed there uses;
4. the smallest, then the mean, of ``capacity * utilisation**3`` over the host's resources;

then the group's priority; remaining ties go to the earlier candidate. Existing hosts (the
head, running and pending hosts, hosts launched earlier in this pass) are candidates first, in
the order the pass keeps; then new hosts: one fresh host of every group that may still grow.
Picking a fresh host launches a whole replica of its group (KubeRay creates replicas, not
hosts); the other hosts of that replica are *spares*: from then on they stand in for fresh
hosts of their group, taking its place among the groups (a group just picked goes last, as in
Ray), so that what would launch a new host of the group fills a host already launched.

Hosts in the same state (group, free resources, labels, what they hold) give the same result,
so each state is tried once per round: the work of a round grows with distinct host states
and request shapes, not with hosts or units.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from rayscale.autoscaler.scheduling.catalog import GROUP_LABELS, Catalog, Shape
from rayscale.autoscaler.scheduling.fleet import Fleet, HostKind
from rayscale.autoscaler.scheduling.model import UnmetReason
from rayscale.autoscaler.scheduling.space import BIG, Vec, fit_count, sub
from rayscale.cluster.accelerators import GPU

DEMAND, CONSTRAINT = 0, 1  # what a host's free resources are counted against
COUNTED = 1 << 40  # the host id of a host that is only counted, never built

Score = tuple[int, bool, int, float, float]
Fill = list[tuple[int, int]]  # (run index, units) one host takes
Placed = tuple["Bin", Fill, int]  # a host, what it took, and how many new hosts took the same


@dataclass(frozen=True, slots=True)
class Run:
    """``count`` requests of one shape, adjacent in Ray's order."""

    shape: Shape
    count: int
    tag: tuple[object, ...]  # the explain key of what was asked for
    constrained: bool = False  # carries a placement constraint (STRICT_PACK or STRICT_SPREAD)
    spread: int | None = None  # STRICT_SPREAD mark: at most one per host, never where the mark is


@dataclass(frozen=True, slots=True)
class Load:
    """A host's free resources for one source and what the score reads of the work put there."""

    free: Vec
    kinds: frozenset[int] = frozenset()  # resource kinds the work uses
    gpu_work: bool = False  # some of it asks for GPUs
    label_score: int = 0  # from the first request whose selectors the host matches


@dataclass(slots=True)
class Bin:
    """One host that can take work, with what this pass has put on it so far."""

    host: int  # fleet host id
    group: int  # group index, HEAD_GROUP for the head
    rank: HostKind
    total: Vec
    label_set: int
    priority: int
    loads: tuple[Load, Load]  # by DEMAND / CONSTRAINT
    marks: frozenset[int] = frozenset()  # STRICT_SPREAD marks of the bundles it holds
    running: bool = False  # Ray runs there (the head or a running host)

    def key(self, source: int) -> tuple[object, ...]:
        return (self.group, self.running, self.total, self.label_set, self.marks, self.loads[source])

    def moved(self, host: int) -> Bin:
        """The same state on another host (a plain constructor call: it runs once per new host)."""
        b = self
        return Bin(host, b.group, b.rank, b.total, b.label_set, b.priority, b.loads, b.marks, b.running)

    def with_load(self, source: int, load: Load, marks: frozenset[int]) -> Bin:
        b = self
        loads = (load, b.loads[1]) if source == DEMAND else (b.loads[0], load)
        return Bin(b.host, b.group, b.rank, b.total, b.label_set, b.priority, loads, marks, b.running)


@dataclass(slots=True)
class Result:
    """What one batch did: the new order of existing hosts, fills per host, what is left."""

    order: list[Bin]
    spares: list[Bin]
    fills: list[Placed]
    left: list[int]  # per run


def ray_key(catalog: Catalog, run: Run) -> tuple[object, ...]:
    """Ray's sort key for a request (sorted biggest first)."""
    shape = run.shape
    names = catalog.space.names
    amounts = tuple(sorted((names[i], shape.vec[i]) for i in shape.idx))
    first = len(shape.selectors[0]) if shape.selectors else 0
    return (1 if run.constrained else 0, first, len(shape.idx), sum(shape.vec[i] for i in shape.idx), amounts)


def ordered(catalog: Catalog, runs: Sequence[Run]) -> list[Run]:
    """Runs in Ray's order, adjacent runs of the same request merged."""
    out: list[Run] = []
    for run in sorted(runs, key=lambda r: ray_key(catalog, r), reverse=True):
        if run.count <= 0:
            continue
        last = out[-1] if out else None
        if last is not None and (last.shape, last.tag, last.constrained, last.spread) == (
            run.shape,
            run.tag,
            run.constrained,
            run.spread,
        ):
            out[-1] = replace(last, count=last.count + run.count)
        else:
            out.append(run)
    return out


def blocked_reason(fleet: Fleet, groups: Sequence[int]) -> UnmetReason:
    """The unmet reason for work whose possible groups cannot launch."""
    if not groups:
        return UnmetReason.NO_MATCHING_GROUP
    reasons = {fleet.blocked(g) for g in groups}
    for reason in (UnmetReason.MAX_WORKERS, UnmetReason.UPSCALING_LIMIT, UnmetReason.MAX_REPLICAS):
        if reason in reasons:
            return reason
    for reason in (UnmetReason.QUOTA, UnmetReason.BACKOFF):
        if reason in reasons:
            return reason
    return UnmetReason.MAX_WORKERS if fleet.options.max_workers is not None else UnmetReason.NO_MATCHING_GROUP


class Placer:
    """Places batches on the hosts of one pass, launching replicas through the fleet."""

    def __init__(self, catalog: Catalog, fleet: Fleet, order: list[Bin]) -> None:
        self.catalog = catalog
        self.fleet = fleet
        self.order = order  # existing hosts, in the order Ray would try them
        self.spares: list[Bin] = []  # hosts of replicas launched this pass that nothing used yet
        self.before: dict[int, Bin] = {}  # by host: the existing hosts before the latest batch
        self._tried: list[tuple[Bin, Fill]] = []  # the latest ``best``: each state tried, its fill
        self._fresh = [self.fresh(g.index) for g in catalog.groups]  # each group's new host
        self._gpu, names = catalog.space.index.get(GPU), catalog.space.names
        self._scored = tuple(i for i in range(len(names)) if i not in catalog.space.implicit)

    # -- one host --------------------------------------------------------------------
    def score(self, b: Bin, source: int) -> Score:
        load = b.loads[source]
        free = load.free
        terms = []
        for i in self._scored:
            t = b.total[i]
            if t > 0:
                u = (t - free[i]) / t
                terms.append(t * u**3)
        gpu_ok = not (self._gpu is not None and b.total[self._gpu] > 0 and not load.gpu_work)
        kinds = sum(1 for i in load.kinds if b.total[i] > 0)
        return (
            load.label_score,
            gpu_ok,
            kinds,
            min(terms) if terms else 0.0,
            sum(terms) / len(terms) if terms else 0.0,
        )

    def try_bin(
        self,
        b: Bin,
        runs: Sequence[Run],
        left: Sequence[int],
        source: int,
        order: Sequence[int] | None = None,
    ) -> tuple[Fill, Bin]:
        """What ``b`` takes of ``left``, in order (or the runs ``order`` lists, in its order),
        and the host afterwards."""
        load = b.loads[source]
        free = load.free
        kinds = set(load.kinds)
        gpu = load.gpu_work
        label_score = load.label_score
        marks = b.marks
        fill: Fill = []
        for i in range(len(runs)) if order is None else order:
            run = runs[i]
            if left[i] <= 0 or (run.spread is not None and run.spread in marks):
                continue
            shape = run.shape
            if b.label_set == GROUP_LABELS and b.group not in shape.ranks:
                continue  # no host of the group can ever hold it
            rank = self.catalog.rank(shape, b.group, b.label_set) if shape.selectors else 0
            if rank is None:
                continue
            units = min(left[i], fit_count(free, shape.vec, shape.idx))
            if run.spread is not None:
                units = min(units, 1)
            if units <= 0:
                continue
            free = sub(free, shape.vec, units)
            fill.append((i, units))
            kinds.update(shape.idx)
            gpu = gpu or (self._gpu is not None and shape.vec[self._gpu] > 0)
            if label_score == 0 and shape.selectors:
                label_score = len(shape.selectors) - rank
            if run.spread is not None:
                marks = marks | {run.spread}
        if not fill:
            return fill, b
        return fill, b.with_load(source, Load(free, frozenset(kinds), gpu, label_score), marks)

    def best(
        self,
        bins: Sequence[Bin],
        runs: Sequence[Run],
        left: Sequence[int],
        source: int,
        ids: Sequence[int] | None = None,
    ) -> tuple[int, Fill, Bin, bool] | None:
        """The candidate whose fill scores best (ties: the earlier one), or None if none takes
        any; and whether it beats every other candidate outright. ``ids``: each candidate's
        state, when known (candidates in the same state are tried once)."""
        best: tuple[tuple[Score, int], int, Fill, Bin] | None = None
        strict = True
        seen: set[object] = set()
        self._tried = []
        for i, b in enumerate(bins):
            key = b.key(source) if ids is None else ids[i]
            if key in seen:
                continue
            seen.add(key)
            fill, after = self.try_bin(b, runs, left, source)
            if not fill:
                continue
            self._tried.append((b, fill))
            rank = (self.score(after, source), b.priority)
            if best is None or rank > best[0]:
                strict = True
                best = (rank, i, fill, after)
            elif rank == best[0]:
                strict = False
        return None if best is None else (best[1], best[2], best[3], strict)

    # -- new hosts -------------------------------------------------------------------
    def fresh(self, group: int, host: int = -1, position: int = 0) -> Bin:
        info = self.catalog.groups[group]
        total = info.hosts[position]
        loads = (Load(total), Load(total))
        return Bin(host, group, HostKind.NEW, total, GROUP_LABELS, info.spec.priority, loads)

    # -- a batch ---------------------------------------------------------------------
    def place(self, runs: Sequence[Run], source: int) -> Result:
        """Place ``runs`` (already in Ray's order) on existing hosts, then on new replicas.

        Launches go through the fleet; the caller keeps or rolls them back and, to keep the
        result, sets ``order`` from it.
        """
        left = [r.count for r in runs]
        fills, done = self.on_existing(runs, left, source)
        spares = list(self.spares)
        self.grow(runs, left, source, fills, done, spares)
        return Result(done, spares, fills, left)

    def on_existing(
        self, runs: Sequence[Run], left: list[int], source: int
    ) -> tuple[list[Placed], list[Bin]]:
        """Place what existing hosts take (``left`` is updated); returns the fills and the
        existing hosts in their new order."""
        shapes = {(r.shape.vec, r.shape.idx) for r in runs}
        fills: list[Placed] = []
        done: list[Bin] = []
        candidates: list[Bin] = []
        exhausted: list[Bin] = []
        self.before = {b.host: b for b in self.order}
        for b in self.order:
            free = b.loads[source].free
            if b.running and not any(fit_count(free, vec, idx) for vec, idx in shapes):
                exhausted.append(b)
            else:
                candidates.append(b)
        states: dict[tuple[object, ...], int] = {}  # host states as small ints, hashed once
        ids = [states.setdefault(b.key(source), len(states)) for b in candidates]
        while any(left) and candidates:
            found = self.best(candidates, runs, left, source, ids)
            if found is None:
                break
            i, fill, after, strict = found
            # Hosts in the same state as a pick that wins outright win the next rounds in turn.
            same = [j for j in range(i, len(candidates)) if ids[j] == ids[i]] if strict else [i]
            if len(same) > 1:
                same = same[: self._repeats(runs, left, source, fill)]
            for j in same:
                b = candidates[j]
                fills.append((b.with_load(source, after.loads[source], after.marks), fill, 1))
                done.append(fills[-1][0])
                for k, units in fill:
                    left[k] -= units
            for j in reversed(same):
                candidates.pop(j)
                ids.pop(j)
        return fills, done + candidates + exhausted

    def grow(
        self,
        runs: Sequence[Run],
        left: list[int],
        source: int,
        fills: list[Placed],
        done: list[Bin] | None,
        spares: list[Bin],
    ) -> None:
        """New hosts group by group, in Ray's order of its node types (the group just picked goes
        last): a group's spares (no launch needed; they win ties), then a fresh host of it.

        A fresh single-host pick that beats every other candidate outright repeats, unchanged,
        for as long as no candidate's fill can change (``_repeats``): those rounds are taken at
        once. ``done`` gets the new hosts (None: only counting)."""
        fleet = self.fleet

        templates = [g.index for g in self.catalog.groups]
        while any(left):
            room = {g: fleet.room(g, 1) > 0 for g in templates}
            templates = [g for g in templates if room[g] or any(s.group == g for s in spares)]
            pool: list[Bin] = []
            for g in templates:
                pool += [s for s in spares if s.group == g]
                if room[g]:
                    pool.append(self._fresh[g])
            found = self.best(pool, runs, left, source) if pool else None
            if found is None:
                break
            i, fill, after, strict = found
            group = pool[i].group
            templates.remove(group)
            templates.append(group)
            if pool[i].host >= 0:  # a spare
                spares.remove(pool[i])
                hosts = [pool[i].host]
            else:
                single = self.catalog.groups[group].num_hosts == 1
                copies = self._repeats(runs, left, source, fill) if strict and single else 1
                copies = fleet.room(group, copies)
                if done is None:  # only counted: no host is built, spares stand for their hosts
                    fleet.count_copies(group, copies)
                    width = self.catalog.groups[group].num_hosts
                    hosts = [COUNTED] * copies
                    spares += [self.fresh(group, COUNTED, k) for _ in hosts for k in range(1, width)]
                else:
                    rids = fleet.launch_copies(group, copies)
                    hosts = [h for rid in rids for h in fleet.replicas[rid].hosts[:1]]
                    spares += [
                        self.fresh(group, h, k)
                        for rid in rids
                        for k, h in enumerate(fleet.replicas[rid].hosts)
                        if k > 0
                    ]
            for k, units in fill:
                left[k] -= units * len(hosts)
            after.host = hosts[0]
            fills.append((after, fill, len(hosts)))
            if done is not None:
                done += [after] + [after.moved(h) for h in hosts[1:]]

    def _repeats(self, runs: Sequence[Run], left: Sequence[int], source: int, fill: Fill) -> int:
        """How many rounds in a row a pick with ``fill`` that won the latest ``best`` outright
        wins again (a fresh host again, or the next host in the same state).

        Every candidate's fill stays what it is while each run the pick takes has, left, at
        least as many units as any candidate would take of it were it unlimited (runs it does
        not take keep their counts). A candidate that took less than what was left of each of
        those runs took what it would unlimited."""
        taken = dict(fill)
        relaxed = [BIG if k in taken else n for k, n in enumerate(left)]
        most = dict.fromkeys(taken, 0)
        for b, got in self._tried:
            if any(units >= left[k] for k, units in got if k in taken):
                got, _ = self.try_bin(b, runs, relaxed, source)
            for k, units in got:
                if k in most:
                    most[k] = max(most[k], units)
        if any(left[k] < most[k] for k in taken):
            return 1
        return 1 + min((left[k] - most[k]) // units for k, units in taken.items())
