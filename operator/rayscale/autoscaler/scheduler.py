"""The embedded scheduler: ``schedule(snapshot) -> Decision``, pure and deterministic.

Steps, in order (those of Ray 2.60's autoscaler, with KubeRay's whole replicas):

1. pending hosts past their limit go (LAUNCH_FAILED; the group backs off): the boot limit once
   the pod is scheduled, the provisioning limit before;
2. replicas with a draining host (DRAINED) or a dead Ray node (NODE_DEAD) go, no backoff; one
   with a host drained by someone else while it works stays, held: it takes no work and counts
   only towards ``maxReplicas`` and ``maxWorkers`` (``drained_while_working``);
3. groups below ``minReplicas`` launch the missing replicas (a backoff does not hold them back);
4. groups above ``maxReplicas``, then the cluster above ``maxWorkers``, lose their surplus;
5. constraints against total capacity (the head's included), one all-or-nothing unit at a
   time: Ray's ``request_resources`` first, then each RayResourceRequest by name;
6. placement groups, one at a time, atomic, each bundle on a host its selector matches;
7. tasks and actors;
8. a replica the worker cap cut in step 4 stays in place of a new one of its group that
   steps 5-7 launched, when it is the same as a new one (``scheduling/reuse.py``);
9. idle replicas go (IDLE), unless they got work in steps 5-8 or their group is at min.

Steps 5-7 place each batch with Ray's best-node greedy (``scheduling/greedy.py``): existing
hosts first, then new replicas. In step 7 the new replicas are packed by shape instead
(``scheduling/packing.py``) when that places all the greedy would on fewer hosts.
"""

from __future__ import annotations

from rayscale.autoscaler.scheduling.catalog import Shape
from rayscale.autoscaler.scheduling.explain import Explainer
from rayscale.autoscaler.scheduling.fleet import NO_REPLICA, Fleet, HostKind
from rayscale.autoscaler.scheduling.greedy import (
    CONSTRAINT,
    DEMAND,
    Bin,
    Placer,
    Result,
    Run,
    blocked_reason,
    ordered,
)
from rayscale.autoscaler.scheduling.index import catalog_of, merged, one_selector
from rayscale.autoscaler.scheduling.loading import by_group, load
from rayscale.autoscaler.scheduling.model import (
    RAY_REQUEST_UNIT,
    Constraint,
    Decision,
    DemandKind,
    Gang,
    GroupDecision,
    Removal,
    RemovalCause,
    Snapshot,
    Strategy,
    UnmetReason,
)
from rayscale.autoscaler.scheduling.packing import place_demand
from rayscale.autoscaler.scheduling.removal import (
    Removed,
    idle,
    launch_failures,
    lost_nodes,
    over_max_replicas,
    over_max_workers,
)
from rayscale.autoscaler.scheduling.reuse import Reuse
from rayscale.autoscaler.scheduling.space import Vec, add

__all__ = ["schedule"]


class _Pass:
    """The mutable state of one scheduling pass."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.catalog = catalog_of(snapshot)
        self.fleet = Fleet(self.catalog, snapshot.options)
        self.explain = Explainer()
        self.removed: Removed = {}
        self._short_hosts = 0  # hosts of minimums left unlaunched (Ray launches, then cuts them)
        self._trimmed: set[int] = set()  # groups that lost their surplus over maxReplicas
        self.placer = Placer(self.catalog, self.fleet, load(snapshot, self.catalog, self.fleet))
        self.reuse = Reuse(self.catalog, self.fleet)  # replicas the worker cap cut, new ones' work

    # -- steps -----------------------------------------------------------------------
    def _gone(self, b: Bin) -> bool:
        rid = self.fleet.hosts[b.host].replica
        return rid != NO_REPLICA and self.fleet.replicas[rid].removed

    def group_minimums(self) -> None:
        """Groups below minReplicas launch the missing replicas; their hosts come first.

        When the worker cap leaves room for only some of them, the later groups' go first:
        Ray launches every minimum and then cuts, at the cap, the earliest listed new hosts.
        """
        fresh: dict[int, list[Bin]] = {}
        for info in reversed(self.catalog.groups):
            wanted = info.spec.min_replicas - self.fleet.live(info.index)
            room = self.fleet.room(info.index, wanted, minimum=True)
            self._short_hosts += max(wanted - room, 0) * info.num_hosts
            for _ in range(room):
                rid = self.fleet.launch(info.index)
                for i, h in enumerate(self.fleet.replicas[rid].hosts):
                    fresh.setdefault(info.index, []).append(self.placer.fresh(info.index, h, i))
        first = [b for info in self.catalog.groups for b in fresh.get(info.index, [])]
        self.placer.order = first + [b for b in self.placer.order if not self._gone(b)]

    def _termination_order(self, b: Bin) -> tuple[bool, float, float]:
        """Ray's order for removals at a cap: no Ray node first, longest idle, least used."""
        free = b.loads[DEMAND].free
        used = [(t - f) / t for t, f in zip(b.total, free, strict=True) if t > 0]
        idle_seconds = self.fleet.hosts[b.host].idle_seconds
        return (b.running, -idle_seconds, sum(used) / len(used) if used else 0.0)

    def max_replicas(self) -> None:
        """Surplus over maxReplicas goes first, as in Ray: the minimums that follow have the
        room it leaves under the worker cap."""
        self._trimmed = over_max_replicas(self.fleet, self.removed)

    def caps(self) -> None:
        """Surplus over maxWorkers goes. The hosts left are listed by group (in order of first
        appearance), a trimmed group's and, after a cluster-wide cut, all of them in Ray's
        termination order with the head last, as Ray lists them. (Ray cuts too when the
        minimums it launched went over the cap, where rayscale launched fewer.)"""
        trimmed = self._trimmed
        cut = over_max_workers(self.fleet, self.removed)
        if cut:
            self.reuse.note_cut(self.removed, self.placer.order)
        cap = self.snapshot.options.max_workers
        cut = cut or (cap is not None and self.fleet.host_count() + self._short_hosts > cap)
        groups = by_group(b for b in self.placer.order if not self._gone(b))
        for group in trimmed:
            groups.get(group, []).sort(key=self._termination_order)
        order = [b for bins in groups.values() for b in bins]
        if cut:
            order = sorted((b for b in order if b.rank != HostKind.HEAD), key=self._termination_order) + [
                b for b in order if b.rank == HostKind.HEAD
            ]
        self.placer.order = order

    def _reason(self, shape: Shape) -> UnmetReason:
        return blocked_reason(self.fleet, shape.eligible)

    def _batch(
        self, runs: list[Run], source: int, atomic: bool, pack: bool = False
    ) -> tuple[Result, dict[int, UnmetReason]]:
        """Place one batch; an atomic one that leaves anything is undone. Returns the result
        and, per run left (partly) unplaced, why. ``pack``: new hosts packed (``packing.py``)."""
        fleet = self.fleet
        if atomic:
            fleet.checkpoint()
        result = place_demand(self.placer, runs) if pack else self.placer.place(runs, source)
        reasons = {i: self._reason(runs[i].shape) for i, n in enumerate(result.left) if n > 0}
        if atomic and reasons:
            fleet.rollback()
            return result, reasons
        if atomic:
            fleet.commit()
        self.placer.order = result.order
        self.placer.spares = result.spares
        for b, fill, copies in result.fills:
            name = fleet.hosts[b.host].name if b.rank in (HostKind.RUNNING, HostKind.PENDING) else None
            for i, units in fill:
                group = self.catalog.group_name(b.group)
                self.explain.placed(runs[i].tag, group, b.rank, units * copies, [name] if name else [])
            fleet.mark_worked(b.host)
            if b.rank is HostKind.NEW and b.group in self.reuse.cut:
                self.reuse.record(b, copies, [(runs[i].tag, units) for i, units in fill])
        return result, reasons

    def constraints(self) -> None:
        units: dict[str, list[Constraint]] = {}
        for c in self.snapshot.constraints:
            units.setdefault(c.unit, []).append(c)
        for unit in sorted(units, key=lambda u: (u != RAY_REQUEST_UNIT, u)):
            self._constraint_unit(unit, units[unit])

    def _constraint_unit(self, unit: str, constraints: list[Constraint]) -> None:
        """Place one all-or-nothing set of constraint bundles, or nothing of it."""
        runs = []
        totals: dict[tuple[object, ...], int] = {}
        for c in constraints:
            shape = self.catalog.shape(c.resources, one_selector(c.label_selector))
            key = self.explain.entry(
                DemandKind.CONSTRAINT,
                resources=self.catalog.space.mapping(shape.vec),
                selector=c.label_selector,
                unit=unit,
            )
            totals[key] = totals.get(key, 0) + c.count
            runs.append(Run(shape, c.count, key))
        runs = ordered(self.catalog, runs)
        _, reasons = self._batch(runs, CONSTRAINT, atomic=True)
        if reasons:
            first = next(iter(reasons.values()))
            by_key = {runs[i].tag: reason for i, reason in reasons.items()}
            for key, total in totals.items():
                self.explain.unmet(key, total, by_key.get(key, first))
            return
        for key, total in totals.items():
            self.explain.finish(key, total)

    def gangs(self) -> None:
        def order(gang: Gang) -> tuple[int, int]:
            strict = gang.strategy in (Strategy.STRICT_PACK, Strategy.STRICT_SPREAD)
            return (-(len(gang.bundles) if strict else 0), -len(gang.bundles))

        mark = 0
        for gang in sorted(self.snapshot.gangs, key=order):
            key = self.explain.entry(
                DemandKind.GANG,
                bundles=gang.bundles,
                strategy=gang.strategy,
                bundle_selectors=gang.bundle_selectors,
            )
            for done in range(gang.count):
                mark += 1
                reason = self._place_gang(key, gang, mark)
                if reason is not None:
                    self.explain.unmet(key, gang.count - done, reason)
                    break
                self.explain.finish(key, 1)

    def _gang_runs(self, key: tuple[object, ...], gang: Gang, mark: int) -> list[Run]:
        """A gang's requests: each bundle with its selector, or (STRICT_PACK) their sum on a
        host that matches every bundle's selector; STRICT_SPREAD bundles carry the gang's mark."""
        space = self.catalog.space
        missing = len(gang.bundles) - len(gang.bundle_selectors)
        selectors = tuple(gang.bundle_selectors[: len(gang.bundles)]) + ((),) * max(missing, 0)
        if gang.strategy is Strategy.STRICT_PACK:
            total: Vec = tuple(0.0 for _ in space.names)
            for b in gang.bundles:
                total = add(total, space.vec(b))
            shape = self.catalog.shape_of(total, one_selector(merged(selectors)))
            return [Run(shape, 1, key, constrained=True)]
        spread = gang.strategy is Strategy.STRICT_SPREAD
        return ordered(
            self.catalog,
            [
                Run(self.catalog.shape(b, one_selector(sel)), 1, key, spread, mark if spread else None)
                for b, sel in zip(gang.bundles, selectors, strict=True)
            ],
        )

    def _place_gang(self, key: tuple[object, ...], gang: Gang, mark: int) -> UnmetReason | None:
        _, reasons = self._batch(self._gang_runs(key, gang, mark), DEMAND, atomic=True)
        return next(iter(reasons.values()), None)

    def demands(self) -> None:
        runs = []
        totals: dict[tuple[object, ...], int] = {}
        for d in self.snapshot.demands:
            shape = self.catalog.shape(d.resources, d.selectors)
            key = self.explain.entry(
                DemandKind.DEMAND,
                resources=self.catalog.space.mapping(shape.vec),
                selector=d.label_selector,
                fallbacks=d.fallbacks,
            )
            totals[key] = totals.get(key, 0) + d.count
            runs.append(Run(shape, d.count, key))
        runs = ordered(self.catalog, runs)
        result, reasons = self._batch(runs, DEMAND, atomic=False, pack=True)
        left: dict[tuple[object, ...], int] = {}
        for i, n in enumerate(result.left):
            left[runs[i].tag] = left.get(runs[i].tag, 0) + n
        for key, total in totals.items():
            missing = left.get(key, 0)
            if missing:
                reason = next(reasons[i] for i, r in enumerate(runs) if r.tag == key and i in reasons)
                self.explain.unmet(key, missing, reason)
            self.explain.finish(key, total - missing)

    # -- output ----------------------------------------------------------------------
    def decision(self) -> Decision:
        fleet = self.fleet
        groups = {
            info.name: GroupDecision(
                current=fleet.existing[info.index] + fleet.held[info.index],
                replicas=fleet.pods(info.index),
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


def schedule(snapshot: Snapshot, *, keep_cut: bool = True) -> Decision:
    """Decide launches, removals and where every unit of demand goes. Pure and deterministic.

    ``keep_cut=False``: a replica the worker cap cut is not kept in place of a new one of its
    group (``scheduling/reuse.py``): the churn the differential judge compares against."""
    state = _Pass(snapshot)
    launch_failures(state.fleet, state.removed)
    lost_nodes(state.fleet, state.removed)
    state.max_replicas()
    state.group_minimums()
    state.caps()
    state.constraints()
    state.gangs()
    state.demands()
    if keep_cut:
        state.reuse.apply(state.removed, state.explain)
    idle(state.fleet, state.removed)
    return state.decision()
