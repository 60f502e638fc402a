"""The embedded scheduler: ``schedule(snapshot) -> Decision``, pure and deterministic.

Steps, in order (DESIGN.md, "The scheduler"):

1. pending hosts past their limit go (LAUNCH_FAILED; the group backs off): the boot limit once
   the pod is scheduled, the provisioning limit before;
2. replicas with a draining host (DRAINED) or a dead Ray node (NODE_DEAD) go, no backoff;
3. groups below ``minReplicas`` launch the missing replicas;
4. groups above ``maxReplicas``, then the cluster above ``maxWorkers``, lose their surplus;
5. constraints against total capacity (the head's included), one all-or-nothing unit at a
   time: Ray's ``request_resources`` first, then each RayResourceRequest by name;
6. placement groups, one at a time, atomic, each bundle on a host its selector matches;
7. tasks and actors: the head and existing and in-flight hosts first, then new replicas, hosts
   matching an earlier selector (preferred, then fallbacks) first;
8. idle replicas go (IDLE), unless they got work in steps 5-7 or their group is at min.

Work grows with distinct shapes times classes of hosts (same group, kind, free resources and
relevant labels), not with requests times hosts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from rayscale.autoscaler.scheduling.catalog import HEAD_GROUP, Catalog, Selectors, Shape
from rayscale.autoscaler.scheduling.explain import Explainer
from rayscale.autoscaler.scheduling.fleet import Fleet, Host
from rayscale.autoscaler.scheduling.model import (
    RAY_REQUEST_UNIT,
    Constraint,
    Decision,
    Gang,
    GroupDecision,
    LabelConstraint,
    Node,
    NodeState,
    Removal,
    RemovalCause,
    Selector,
    Snapshot,
    Strategy,
    UnmetReason,
)
from rayscale.autoscaler.scheduling.packing import Launch, pack_new, shape_order
from rayscale.autoscaler.scheduling.pool import HEAD, NEW, PENDING, RUNNING, Move, Pool
from rayscale.autoscaler.scheduling.removal import Removed, idle, launch_failures, lost_nodes, over_caps
from rayscale.autoscaler.scheduling.space import Space, Vec, add

__all__ = ["schedule"]

LOST = {NodeState.DRAINING: RemovalCause.DRAINED, NodeState.DEAD: RemovalCause.NODE_DEAD}


def _space(snapshot: Snapshot) -> Space:
    names: set[str] = set()
    capacities = [g.resources for g in snapshot.groups]
    for g in snapshot.groups:
        names.update(g.resources)
    for d in snapshot.demands:
        names.update(d.resources)
    for c in snapshot.constraints:
        names.update(c.resources)
    for gang in snapshot.gangs:
        for b in gang.bundles:
            names.update(b)
    for n in snapshot.nodes:
        names.update(n.available or {})
    if snapshot.head is not None:
        names.update(snapshot.head.resources)
        names.update(snapshot.head.available or {})
        capacities.append(snapshot.head.resources)
    return Space(names, capacities)


def _label_keys(snapshot: Snapshot) -> set[str]:
    """Every label key a selector of the snapshot mentions."""
    selectors: list[Selector] = []
    for d in snapshot.demands:
        selectors += d.selectors
    for gang in snapshot.gangs:
        selectors += gang.bundle_selectors
    for c in snapshot.constraints:
        selectors.append(c.label_selector)
    return {c.key for selector in selectors for c in selector}


def _catalog(snapshot: Snapshot) -> Catalog:
    space = _space(snapshot)
    head: frozenset[int] = frozenset()
    if snapshot.head is not None:
        total = space.vec(snapshot.head.resources)
        head = frozenset(a for a in space.accelerators if total[a] > 0)
    return Catalog(space, snapshot.groups, _label_keys(snapshot), head)


def _selectors(selector: Selector) -> Selectors:
    return (selector,) if selector else ()


def _merged(selectors: Iterable[Selector]) -> Selector:
    """One selector that holds where every one of ``selectors`` holds (their constraints joined)."""
    joined: set[LabelConstraint] = set()
    for selector in selectors:
        joined.update(selector)
    return tuple(sorted(joined, key=lambda c: (c.key, str(c.op), c.values)))


class _Pass:
    """The mutable state of one scheduling pass."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.catalog = _catalog(snapshot)
        self.fleet = Fleet(self.catalog, snapshot.options)
        self.explain = Explainer()
        self.removed: Removed = {}
        self.demand_pool = Pool(self.catalog)
        self.constraint_pool = Pool(self.catalog)
        self._free: dict[int, tuple[Vec, Vec, int]] = {}  # host -> (capacity, free, label set)
        self._load_nodes()

    # -- input -----------------------------------------------------------------------
    def _free_vec(self, capacity: Vec, available: Mapping[str, float] | None) -> Vec:
        """Free resources reported by Ray, capped at capacity; None: all free."""
        if available is None:
            return capacity
        space = self.catalog.space
        free = tuple(min(a, c) for a, c in zip(space.vec(available), capacity, strict=True))
        return tuple(  # absent implicit resources count as free (as in Ray)
            capacity[i] if i in space.implicit and space.names[i] not in available else a
            for i, a in enumerate(free)
        )

    def _host(self, node: Node, capacity: Vec, free: Vec) -> Host:
        running = node.state is NodeState.RUNNING
        used = [(c - f) / c for c, f in zip(capacity, free, strict=True) if c > 0]
        return Host(
            node.name,
            self.catalog.by_name[node.group].index,
            PENDING if node.state is NodeState.PENDING else RUNNING,
            -1,
            node.idle_seconds if running else 0.0,
            node.pending_seconds if node.state is NodeState.PENDING else 0.0,
            sum(used) / len(used) if used else 0.0,
            booting=node.booting,
            lost=LOST.get(node.state),
        )

    def _load_nodes(self) -> None:
        by_replica: dict[tuple[str, str], list[tuple[Host, Vec, int]]] = {}
        for node in self.snapshot.nodes:
            info = self.catalog.by_name.get(node.group)
            if info is None or node.state is NodeState.TERMINATING:
                continue  # terminating hosts absorb nothing and are not counted
            members = by_replica.setdefault((node.group, node.replica or node.name), [])
            capacity = info.hosts[min(len(members), info.num_hosts - 1)]
            free = self._free_vec(capacity, node.available if node.state is NodeState.RUNNING else None)
            labels = self.catalog.label_set(node.labels, info.index)
            members.append((self._host(node, capacity, free), free, labels))
        for (group, name), members in sorted(by_replica.items()):
            gi = self.catalog.by_name[group].index
            rid = self.fleet.add_existing(gi, [h for h, _, _ in members], name)
            hosts = self.fleet.replicas[rid].hosts
            for i, (host_id, (host, free, labels)) in enumerate(zip(hosts, members, strict=True)):
                if host.lost is None:  # draining and dead hosts take no work
                    self._free[host_id] = (self.catalog.groups[gi].hosts[i], free, labels)
        self._fill_pools()
        self._load_head()

    def _fill_pools(self) -> None:
        """Add hosts least idle first: work and constraints go there, so idle hosts stay free to go."""
        hosts = self.fleet.hosts
        for hid in sorted(self._free, key=lambda h: (hosts[h].idle_seconds, hosts[h].name or "")):
            total, free, labels = self._free[hid]
            self.constraint_pool.add(hid, hosts[hid].group, hosts[hid].rank, total, labels)
            self.demand_pool.add(hid, hosts[hid].group, hosts[hid].rank, free, labels)

    def _load_head(self) -> None:
        """The head: its free resources take work, its whole capacity counts for constraints."""
        head = self.snapshot.head
        if head is None:
            return
        total = self.catalog.space.capacity(head.resources)
        free = self._free_vec(total, head.available)
        hid = self.fleet.add_head()
        labels = self.catalog.label_set(head.labels)
        self.constraint_pool.add(hid, HEAD_GROUP, HEAD, total, labels)
        self.demand_pool.add(hid, HEAD_GROUP, HEAD, free, labels)

    # -- steps -----------------------------------------------------------------------
    def drop_removed(self) -> None:
        for rid in self.removed:
            for h in self.fleet.replicas[rid].hosts:
                self.demand_pool.discard(h)
                self.constraint_pool.discard(h)

    def group_minimums(self) -> None:
        for info in self.catalog.groups:
            wanted = info.spec.min_replicas - self.fleet.live(info.index)
            for _ in range(self.fleet.room(info.index, wanted)):
                rid = self.fleet.launch(info.index)
                for i, h in enumerate(self.fleet.replicas[rid].hosts):
                    self.demand_pool.add(h, info.index, NEW, info.hosts[i])
                    self.constraint_pool.add(h, info.index, NEW, info.hosts[i])

    def _placed_on(self, key: tuple[object, ...], hosts: list[int], units: int) -> None:
        """Record ``units`` put on existing (or earlier launched) ``hosts`` of one class."""
        fleet = self.fleet
        first = fleet.hosts[hosts[0]]
        names = [fleet.hosts[h].name or "" for h in hosts] if first.rank not in (NEW, HEAD) else []
        self.explain.placed(key, self.catalog.group_name(first.group), first.rank, units, names)
        for h in hosts:
            fleet.mark_worked(h)

    def _record_moves(self, key: tuple[object, ...], moves: list[Move]) -> None:
        for m in moves:
            self._placed_on(key, m.hosts, m.units)

    def _record_launches(self, keys: dict[int, tuple[object, ...]], launches: list[Launch]) -> None:
        for launch in launches:
            name = self.catalog.groups[launch.group].name
            for fill in launch.fills:
                for shape, units in fill.items():
                    self.explain.placed(keys[shape], name, NEW, units * launch.copies, [])

    def constraints(self) -> None:
        units: dict[str, list[Constraint]] = {}
        for c in self.snapshot.constraints:
            units.setdefault(c.unit, []).append(c)
        for unit in sorted(units, key=lambda u: (u != RAY_REQUEST_UNIT, u)):
            self._constraint_unit(unit, units[unit])

    def _constraint_unit(self, unit: str, constraints: list[Constraint]) -> None:
        """Place one all-or-nothing set of constraint bundles, or nothing of it."""
        counts: Counter[int] = Counter()
        keys: dict[int, tuple[object, ...]] = {}
        for c in constraints:
            shape = self.catalog.shape(c.resources, _selectors(c.label_selector))
            keys[shape.index] = self.explain.entry(
                "constraint",
                resources=self.catalog.space.mapping(shape.vec),
                selector=c.label_selector,
                unit=unit,
            )
            counts[shape.index] += c.count
        for pool in (self.constraint_pool, self.demand_pool):
            pool.checkpoint()
        self.fleet.checkpoint()
        moves: dict[int, list[Move]] = {}
        left: dict[int, int] = {}
        for shape in self._ordered(counts):
            moves[shape.index], left[shape.index] = self.constraint_pool.place_bulk(
                shape, counts[shape.index]
            )
        launches, unmet = pack_new(self.catalog, self.fleet, [self.constraint_pool, self.demand_pool], left)
        if unmet:
            for pool in (self.constraint_pool, self.demand_pool):
                pool.rollback()
            self.fleet.rollback()
            first = next(iter(unmet.values()))
            for index, total in counts.items():
                self.explain.unmet(keys[index], total, unmet.get(index, first))
            return
        for pool in (self.constraint_pool, self.demand_pool):
            pool.commit()
        self.fleet.commit()
        for index, total in counts.items():
            self._record_moves(keys[index], moves[index])
            self.explain.finish(keys[index], total)
        self._record_launches(keys, launches)

    def _ordered(self, counts: Counter[int] | dict[int, int]) -> list[Shape]:
        shapes = [self.catalog.shapes[i] for i in counts]
        return sorted(shapes, key=lambda s: shape_order(self.catalog, s))

    def gangs(self) -> None:
        def order(gang: Gang) -> tuple[int, int]:
            strict = gang.strategy in (Strategy.STRICT_PACK, Strategy.STRICT_SPREAD)
            return (-(len(gang.bundles) if strict else 0), -len(gang.bundles))

        for gang in sorted(self.snapshot.gangs, key=order):
            key = self.explain.entry(
                "gang", bundles=gang.bundles, strategy=gang.strategy, bundle_selectors=gang.bundle_selectors
            )
            for done in range(gang.count):
                reason = self._place_gang(key, gang)
                if reason is not None:
                    self.explain.unmet(key, gang.count - done, reason)
                    break
                self.explain.finish(key, 1)

    def _gang_shapes(self, gang: Gang) -> list[Shape]:
        """The units a gang places: each bundle with its selector, or (STRICT_PACK) their sum
        on a host that matches every bundle's selector."""
        space = self.catalog.space
        missing = len(gang.bundles) - len(gang.bundle_selectors)
        selectors = tuple(gang.bundle_selectors[: len(gang.bundles)]) + ((),) * max(missing, 0)
        if gang.strategy is Strategy.STRICT_PACK:
            total: Vec = tuple(0.0 for _ in space.names)
            for b in gang.bundles:
                total = add(total, space.vec(b))
            return [self.catalog.shape_of(total, _selectors(_merged(selectors)))]
        shapes = (
            self.catalog.shape(b, _selectors(sel)) for b, sel in zip(gang.bundles, selectors, strict=True)
        )
        return sorted(shapes, key=lambda s: shape_order(self.catalog, s))

    def _place_gang(self, key: tuple[object, ...], gang: Gang) -> UnmetReason | None:
        shapes = self._gang_shapes(gang)
        spread = gang.strategy is Strategy.STRICT_SPREAD
        pool, fleet = self.demand_pool, self.fleet
        pool.checkpoint()
        fleet.checkpoint()
        used: set[int] = set()
        moves: list[int] = []
        left: Counter[int] = Counter()
        for shape in shapes:
            host = pool.best_host(shape, used if spread else set())
            if host is None:
                left[shape.index] += 1
                continue
            moves.append(host)
            pool.place_one(host, shape.vec)
            used.add(host)
        launches, unmet = pack_new(self.catalog, fleet, [pool], dict(left), one_per_host=spread, repeat=False)
        if unmet:
            pool.rollback()
            fleet.rollback()
            return next(iter(unmet.values()))
        pool.commit()
        fleet.commit()
        for host in moves:
            self._placed_on(key, [host], 1)
        self._record_launches(dict.fromkeys(left, key), launches)
        return None

    def demands(self) -> None:
        counts: Counter[int] = Counter()
        keys: dict[int, tuple[object, ...]] = {}
        for d in self.snapshot.demands:
            shape = self.catalog.shape(d.resources, d.selectors)
            keys[shape.index] = self.explain.entry(
                "demand",
                resources=self.catalog.space.mapping(shape.vec),
                selector=d.label_selector,
                fallbacks=d.fallbacks,
            )
            counts[shape.index] += d.count
        left: dict[int, int] = {}
        for shape in self._ordered(counts):
            moves, left[shape.index] = self.demand_pool.place_bulk(shape, counts[shape.index])
            self._record_moves(keys[shape.index], moves)
        launches, unmet = pack_new(self.catalog, self.fleet, [self.demand_pool], left)
        self._record_launches(keys, launches)
        for index, total in counts.items():
            self.explain.unmet(keys[index], left[index], unmet.get(index, UnmetReason.NO_MATCHING_GROUP))
            self.explain.finish(keys[index], total - left[index])

    # -- output ----------------------------------------------------------------------
    def decision(self) -> Decision:
        fleet = self.fleet
        groups = {
            info.name: GroupDecision(
                current=fleet.existing[info.index],
                replicas=fleet.live(info.index),
                launch=fleet.launched[info.index],
                terminate=fleet.removed[info.index],
            )
            for info in self.catalog.groups
        }
        terminate = []
        for rid, cause in sorted(self.removed.items(), key=lambda item: fleet.replicas[item[0]].name or ""):
            replica = fleet.replicas[rid]
            info = self.catalog.groups[replica.group]
            for h in replica.hosts:
                host = fleet.hosts[h]
                terminate.append(
                    Removal(
                        name=host.name or "",
                        group=info.name,
                        reason=cause,
                        replica=replica.name if info.num_hosts > 1 else None,
                        idle_seconds=host.idle_seconds if cause is RemovalCause.IDLE else None,
                    )
                )
        return Decision(groups, tuple(terminate), self.explain.unmet_list(), self.explain.placements())


def schedule(snapshot: Snapshot) -> Decision:
    """Decide launches, removals and where every unit of demand goes. Pure and deterministic."""
    state = _Pass(snapshot)
    launch_failures(state.fleet, state.removed)
    lost_nodes(state.fleet, state.removed)
    state.group_minimums()
    over_caps(state.fleet, state.removed)
    state.drop_removed()
    state.constraints()
    state.gangs()
    state.demands()
    idle(state.fleet, state.removed)
    return state.decision()
