"""Replays rayscale's placements against the hosts they are put on: do they fit?

A decision says, per demand shape, gang or constraint bundle, how many units went to which kind
of host of which group (``PlacementTarget``: the head, named running or pending hosts, or hosts
the decision launches). The replay looks for one assignment of every unit to one host such that

- a host only takes work if it may: the head, a running or pending host the decision keeps, or
  one of the ``launch x numOfHosts`` new hosts of the target's group (a draining, dead,
  terminating or removed host takes nothing);
- what a host takes fits its free resources (running: what Ray reports free; pending and new:
  the group's capacity for that host, ``TPU-<type>-head`` only on host 0 of a replica; the head:
  its free resources), or, for ``request_resources`` bundles (a separate ledger, as Ray keeps),
  its total capacity;
- the host's labels satisfy the unit's selector (a demand: any of its selectors; a gang bundle:
  its bundle selector; a STRICT_PACK gang: every bundle's selector);
- a STRICT_SPREAD gang puts at most one bundle per host, a STRICT_PACK gang all on one host.

The search is exhaustive (with symmetry breaking over identical new hosts and identical units)
up to ``BUDGET`` steps; a case that exhausts it is reported as undecided, never as a failure.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from rayscale.autoscaler.scheduling.model import (
    Decision,
    DemandKind,
    Group,
    LabelConstraint,
    NodeState,
    Placement,
    Selector,
    Snapshot,
    Strategy,
    Target,
)
from rayscale.cluster.accelerators import is_tpu_slice_head_resource

BUDGET = 200_000
EPS = 1e-9
LIVE = (NodeState.RUNNING, NodeState.PENDING)


class Undecided(Exception):
    """The search ran out of budget."""


@dataclass(slots=True)
class Host:
    name: str
    group: str  # "" for the head
    free: dict[str, float]  # free resources (the demand ledger)
    total: dict[str, float]  # capacity (the constraint ledger)
    labels: Mapping[str, str]
    usable: bool  # may take work in this decision
    why_not: str = ""
    twin: tuple[object, ...] | None = None  # new hosts: interchangeable with same-twin hosts


@dataclass(slots=True)
class Unit:
    need: Mapping[str, float]
    options: list[tuple[int, int]]  # (target slot, host index)
    selectors: tuple[Selector, ...]  # the host must match one; () for anywhere
    spread: tuple[int, int] | None  # (placement, copy) of a STRICT_SPREAD gang
    what: str
    sig: tuple[object, ...] = field(default=())


def host_capacity(group: Group, index: int) -> dict[str, float]:
    """Host ``index`` of a replica of ``group``: only host 0 of a multi-host replica has
    ``TPU-<type>-head``."""
    if group.num_of_hosts > 1 and index > 0:
        return {k: float(v) for k, v in group.resources.items() if not is_tpu_slice_head_resource(k)}
    return {k: float(v) for k, v in group.resources.items()}


def hosts(snapshot: Snapshot, decision: Decision) -> list[Host]:
    """Every host work could be put on: the head, the existing hosts, the launched ones."""
    by_group = {g.name: g for g in snapshot.groups}
    gone = {r.name for r in decision.terminate}
    out: list[Host] = []
    if snapshot.head is not None:
        h = snapshot.head
        free = dict(h.available if h.available is not None else h.resources)
        out.append(Host("(head)", "", free, dict(h.resources), h.labels, True))
    position: dict[str, int] = {}
    for n in snapshot.nodes:
        g = by_group[n.group]
        index = position.get(n.replica or n.name, 0)
        position[n.replica or n.name] = index + 1
        total = host_capacity(g, index)
        free = dict(n.available) if (n.state is NodeState.RUNNING and n.available is not None) else total
        labels = n.labels if (n.state is NodeState.RUNNING and n.labels is not None) else g.labels
        usable, why = True, ""
        if n.state not in LIVE:
            usable, why = False, f"it is {n.state}"
        elif n.name in gone:
            usable, why = False, "the decision removes it"
        out.append(Host(n.name, g.name, free, total, labels, usable, why))
    for g in snapshot.groups:
        decided = decision.groups.get(g.name)
        for r in range(decided.launch if decided is not None else 0):
            for i in range(g.num_of_hosts):
                cap = host_capacity(g, i)
                out.append(
                    Host(f"new:{g.name}/{r}/{i}", g.name, dict(cap), cap, g.labels, True, "", (g.name, i))
                )
    return out


def _matches(selector: Selector, labels: Mapping[str, str]) -> bool:
    return all(c.matches(labels) for c in selector)


def _ok_labels(selectors: tuple[Selector, ...], labels: Mapping[str, str]) -> bool:
    return not selectors or any(_matches(s, labels) for s in selectors)


def fits(need: Mapping[str, float], free: Mapping[str, float]) -> bool:
    return all(v <= free.get(k, 0.0) * (1 + EPS) + EPS for k, v in need.items() if v > 0)


def _target_hosts(all_hosts: list[Host], p: Placement, t_index: int, problems: list[str]) -> list[int]:
    t = p.targets[t_index]
    where = f"{p.kind} placement {_what(p)} target {t.on}/{t.group or 'head'}"
    if t.on is Target.HEAD:
        found = [i for i, h in enumerate(all_hosts) if h.group == ""]
    elif t.on is Target.NEW:
        found = [i for i, h in enumerate(all_hosts) if h.twin is not None and h.group == t.group]
    else:
        found = []
        for name in t.nodes:
            i = next((i for i, h in enumerate(all_hosts) if h.name == name and h.twin is None), None)
            if i is None or all_hosts[i].group != t.group:
                problems.append(f"{where}: host {name} is not a host of {t.group}")
            elif not all_hosts[i].usable:
                problems.append(f"{where}: host {name} takes work although {all_hosts[i].why_not}")
            else:
                found.append(i)
    if not found and not problems:
        problems.append(f"{where}: no such host ({t.count} units placed)")
    return found


def _what(p: Placement) -> str:
    if p.kind is DemandKind.GANG:
        return f"{p.strategy} {[dict(b) for b in p.bundles or ()]}"
    return str(dict(p.resources or {}))


def _merged(selectors: Sequence[Selector]) -> Selector:
    out: list[LabelConstraint] = []
    for s in selectors:
        out += [c for c in s if c not in out]
    return tuple(out)


def units(
    all_hosts: list[Host], placements: Sequence[Placement], constraint: bool
) -> tuple[list[Unit], list[int], list[str]]:
    """The units to assign, the count of each target slot, and the problems found on the way."""
    problems: list[str] = []
    out: list[Unit] = []
    slots: list[int] = []
    for pi, p in enumerate(placements):
        if (p.kind is DemandKind.CONSTRAINT) != constraint:
            continue
        per_target: list[list[tuple[int, int]]] = []
        for ti, t in enumerate(p.targets):
            slot = len(slots)
            slots.append(t.count)
            per_target.append([(slot, h) for h in _target_hosts(all_hosts, p, ti, problems)])
        options = [o for opts in per_target for o in opts]
        placed = sum(t.count for t in p.targets)
        if p.kind is DemandKind.GANG:
            bundles = tuple(p.bundles or ())
            sels = tuple(p.bundle_selectors) or ((),) * len(bundles)
            if p.strategy is Strategy.STRICT_PACK:
                total: dict[str, float] = {}
                for b in bundles:
                    for k, v in b.items():
                        total[k] = total.get(k, 0.0) + float(v)
                per_copy: list[tuple[Mapping[str, float], Selector]] = [(total, _merged(sels))]
            else:
                per_copy = list(zip(bundles, sels, strict=False))
            if placed != p.count * len(per_copy):
                problems.append(
                    f"gang placement {_what(p)}: {p.count} placed but {placed} units on hosts "
                    f"(expected {p.count * len(per_copy)})"
                )
                continue
            spread = p.strategy is Strategy.STRICT_SPREAD
            for copy in range(p.count):
                for bi, (need, sel) in enumerate(per_copy):
                    out.append(
                        Unit(
                            need,
                            options,
                            (sel,) if sel else (),
                            (pi, copy) if spread else None,
                            f"{_what(p)} copy {copy} bundle {bi}",
                            (pi, bi),
                        )
                    )
            continue
        if placed != p.count:
            problems.append(f"{p.kind} placement {_what(p)}: {p.count} placed but {placed} units on hosts")
            continue
        selectors = (p.label_selector, *p.fallbacks) if (p.label_selector or p.fallbacks) else ()
        for ti, t in enumerate(p.targets):
            for _ in range(t.count):
                out.append(Unit(p.resources or {}, per_target[ti], selectors, None, _what(p), (pi, ti)))
    return out, slots, problems


@dataclass(slots=True)
class _Search:
    hosts: list[Host]
    units: list[Unit]
    left: list[int]  # per target slot
    ledger: list[dict[str, float]]
    steps: int = 0
    spread: dict[tuple[int, int], set[int]] = field(default_factory=dict)
    used: list[int] = field(default_factory=list)
    chosen: list[int] = field(default_factory=list)  # option index per unit

    def run(self, i: int = 0) -> bool:
        self.steps += 1
        if self.steps > BUDGET:
            raise Undecided
        if i == len(self.units):
            return True
        u = self.units[i]
        # Identical units in a row take options in non-decreasing order (no permutations).
        start = self.chosen[i - 1] if i and self.units[i - 1].sig == u.sig and u.spread is None else 0
        twins: set[tuple[object, ...]] = set()
        taken = self.spread.setdefault(u.spread, set()) if u.spread is not None else None
        for k in range(start, len(u.options)):
            slot, h = u.options[k]
            host = self.hosts[h]
            if self.left[slot] == 0 or (taken is not None and h in taken):
                continue
            if not _ok_labels(u.selectors, host.labels) or not fits(u.need, self.ledger[h]):
                continue
            if host.twin is not None and not self.used[h]:
                key = (host.twin, slot)
                if key in twins:
                    continue
                twins.add(key)
            self._apply(u, h, slot, -1.0)
            if taken is not None:
                taken.add(h)
            self.chosen.append(k)
            if self.run(i + 1):
                return True
            self.chosen.pop()
            if taken is not None:
                taken.discard(h)
            self._apply(u, h, slot, 1.0)
        return False

    def _apply(self, u: Unit, h: int, slot: int, sign: float) -> None:
        for key, v in u.need.items():
            self.ledger[h][key] = self.ledger[h].get(key, 0.0) + sign * float(v)
        self.left[slot] += int(sign)
        self.used[h] -= int(sign)


def _order(us: list[Unit]) -> list[Unit]:
    def key(u: Unit) -> tuple[object, ...]:
        return (u.spread is None, len(u.options), -sum(float(v) for v in u.need.values()), u.sig)

    return sorted(us, key=key)


def replay(snapshot: Snapshot, decision: Decision) -> Iterator[str]:
    """What does not fit (nothing when every placement fits). Raises Undecided on a huge search."""
    all_hosts = hosts(snapshot, decision)
    for constraint in (False, True):
        us, slots, problems = units(all_hosts, decision.placements, constraint)
        yield from problems
        if problems or not us:
            continue
        ledger = [dict(h.total if constraint else h.free) for h in all_hosts]
        search = _Search(all_hosts, _order(us), list(slots), ledger, used=[0] * len(all_hosts))
        if search.run():
            continue
        what = "request_resources bundles" if constraint else "work"
        spread = [u for u in us if u.spread is not None]
        detail = ""
        if spread:
            relaxed = [Unit(u.need, u.options, u.selectors, None, u.what, u.sig) for u in us]
            loose = _Search(all_hosts, _order(relaxed), list(slots), [dict(x) for x in ledger])
            loose.used = [0] * len(all_hosts)
            if loose.run():
                detail = " (it would, with two bundles of a STRICT_SPREAD gang on one host)"
        names = sorted({all_hosts[h].name for u in us for _, h in u.options})
        yield f"the {what} placed does not fit the hosts it is put on{detail}: hosts {names}"
