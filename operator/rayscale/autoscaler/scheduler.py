"""The embedded scheduler: ``schedule(snapshot) -> Decision``, pure and deterministic.

Steps, in order (DESIGN.md, "The scheduler"):

1. pending hosts older than ``maxNodeProvisionSeconds`` go (LAUNCH_FAILED; the group backs off);
2. groups below ``minReplicas`` launch the missing replicas;
3. groups above ``maxReplicas``, then the cluster above ``maxWorkers``, lose their surplus;
4. ``request_resources`` constraints, all or nothing, against total capacity;
5. placement groups, one at a time, atomic;
6. tasks and actors, existing and in-flight hosts first, then new replicas;
7. idle replicas go (IDLE), unless they got work in steps 4-6 or their group is at min.

Work grows with distinct shapes times classes of hosts (same group, kind and free resources),
not with requests times hosts.
"""

from __future__ import annotations

from collections import Counter

from rayscale.autoscaler.scheduling.catalog import Catalog, Shape
from rayscale.autoscaler.scheduling.explain import Explainer
from rayscale.autoscaler.scheduling.fleet import Fleet, Host
from rayscale.autoscaler.scheduling.model import (
    Decision,
    Gang,
    GroupDecision,
    NodeState,
    Removal,
    RemovalCause,
    Snapshot,
    Strategy,
    UnmetReason,
)
from rayscale.autoscaler.scheduling.packing import Launch, pack_new, shape_order
from rayscale.autoscaler.scheduling.pool import NEW, PENDING, RUNNING, Move, Pool
from rayscale.autoscaler.scheduling.removal import Removed, idle, launch_failures, over_caps
from rayscale.autoscaler.scheduling.space import Space, Vec, add

__all__ = ["schedule"]


def _space(snapshot: Snapshot) -> Space:
    names: set[str] = set()
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
    return Space(names, [g.resources for g in snapshot.groups])


class _Pass:
    """The mutable state of one scheduling pass."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.catalog = Catalog(_space(snapshot), snapshot.groups)
        self.fleet = Fleet(self.catalog, snapshot.options)
        self.explain = Explainer()
        self.removed: Removed = {}
        self.demand_pool = Pool(self.catalog.space)
        self.constraint_pool = Pool(self.catalog.space)
        self._free: dict[int, tuple[Vec, Vec]] = {}  # host -> (capacity, free)
        self._load_nodes()

    # -- input -----------------------------------------------------------------------
    def _load_nodes(self) -> None:
        by_replica: dict[tuple[str, str], list[tuple[Host, Vec]]] = {}
        space = self.catalog.space
        for node in self.snapshot.nodes:
            info = self.catalog.by_name.get(node.group)
            if info is None or node.state is NodeState.TERMINATING:
                continue  # terminating hosts absorb nothing and are not counted
            members = by_replica.setdefault((node.group, node.replica or node.name), [])
            capacity = info.hosts[min(len(members), info.num_hosts - 1)]
            running = node.state is NodeState.RUNNING
            free = capacity
            if running and node.available is not None:
                free = tuple(min(a, c) for a, c in zip(space.vec(node.available), capacity, strict=True))
                free = tuple(  # absent implicit resources count as free (as in Ray)
                    capacity[i] if i in space.implicit and space.names[i] not in node.available else a
                    for i, a in enumerate(free)
                )
            used = [(c - f) / c for c, f in zip(capacity, free, strict=True) if c > 0]
            host = Host(
                node.name,
                info.index,
                RUNNING if running else PENDING,
                -1,
                node.idle_seconds if running else 0.0,
                node.pending_seconds if not running else 0.0,
                sum(used) / len(used) if used else 0.0,
            )
            members.append((host, free))
        for (group, name), members in sorted(by_replica.items()):
            gi = self.catalog.by_name[group].index
            rid = self.fleet.add_existing(gi, [h for h, _ in members], name)
            hosts = self.fleet.replicas[rid].hosts
            for i, (host_id, (_, free)) in enumerate(zip(hosts, members, strict=True)):
                self._free[host_id] = (self.catalog.groups[gi].hosts[i], free)
        self._fill_pools()

    def _fill_pools(self) -> None:
        """Add hosts least idle first: work and constraints go there, so idle hosts stay free to go."""
        hosts = self.fleet.hosts
        for hid in sorted(self._free, key=lambda h: (hosts[h].idle_seconds, hosts[h].name or "")):
            total, free = self._free[hid]
            self.constraint_pool.add(hid, hosts[hid].group, hosts[hid].rank, total)
            self.demand_pool.add(hid, hosts[hid].group, hosts[hid].rank, free)

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

    def _record_moves(self, key: tuple[object, ...], moves: list[Move]) -> None:
        hosts, replicas = self.fleet.hosts, self.fleet.replicas
        for m in moves:
            names = [hosts[h].name or "" for h in m.hosts] if m.rank != NEW else []
            self.explain.placed(key, self.catalog.groups[m.group].name, m.rank, m.units, names)
            for h in m.hosts:
                replicas[hosts[h].replica].worked = True

    def _record_launches(self, keys: dict[int, tuple[object, ...]], launches: list[Launch]) -> None:
        for launch in launches:
            name = self.catalog.groups[launch.group].name
            for fill in launch.fills:
                for shape, units in fill.items():
                    self.explain.placed(keys[shape], name, NEW, units * launch.copies, [])

    def constraints(self) -> None:
        counts: Counter[int] = Counter()
        keys: dict[int, tuple[object, ...]] = {}
        for c in self.snapshot.constraints:
            shape = self.catalog.shape(c.resources)
            keys[shape.index] = self.explain.entry(
                "constraint", resources=self.catalog.space.mapping(shape.vec)
            )
            counts[shape.index] += c.count
        if not counts:
            return
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
            key = self.explain.entry("gang", bundles=gang.bundles, strategy=gang.strategy)
            for done in range(gang.count):
                reason = self._place_gang(key, gang)
                if reason is not None:
                    self.explain.unmet(key, gang.count - done, reason)
                    break
                self.explain.finish(key, 1)

    def _place_gang(self, key: tuple[object, ...], gang: Gang) -> UnmetReason | None:
        if gang.strategy is Strategy.STRICT_PACK:
            total: Vec = tuple(0.0 for _ in self.catalog.space.names)
            for b in gang.bundles:
                total = add(total, self.catalog.space.vec(b))
            shapes = [self.catalog.shape(self.catalog.space.mapping(total))]
        else:
            shapes = sorted(
                (self.catalog.shape(b) for b in gang.bundles), key=lambda s: shape_order(self.catalog, s)
            )
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
        hosts = fleet.hosts
        for host in moves:
            fleet.replicas[hosts[host].replica].worked = True
            name = [hosts[host].name or ""] if hosts[host].rank != NEW else []
            self.explain.placed(key, self.catalog.groups[hosts[host].group].name, hosts[host].rank, 1, name)
        self._record_launches(dict.fromkeys(left, key), launches)
        return None

    def demands(self) -> None:
        counts: Counter[int] = Counter()
        keys: dict[int, tuple[object, ...]] = {}
        for d in self.snapshot.demands:
            shape = self.catalog.shape(d.resources, d.label_selector)
            keys[shape.index] = self.explain.entry(
                "demand", resources=self.catalog.space.mapping(shape.vec), selector=d.label_selector
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
    state.group_minimums()
    over_caps(state.fleet, state.removed)
    state.drop_removed()
    state.constraints()
    state.gangs()
    state.demands()
    idle(state.fleet, state.removed)
    return state.decision()
