"""Deliberately broken copies of a decision, for the judge's self-test: each must be caught.

Every mutation returns None when the decision has nothing it could break (no launch, no
placement on a running host, no STRICT_SPREAD gang on two hosts ...).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rayscale.autoscaler.scheduling.model import (
    Decision,
    DemandKind,
    GroupDecision,
    NodeState,
    PlacementTarget,
    Removal,
    RemovalCause,
    Snapshot,
    Strategy,
    Target,
)

Mutation = Callable[[Snapshot, Decision], Decision | None]


def _launching(decision: Decision, group: str, launch: int) -> dict[str, GroupDecision]:
    groups = dict(decision.groups)
    g = groups[group]
    groups[group] = dataclasses.replace(g, launch=launch, replicas=g.replicas + launch - g.launch)
    return groups


def drop_all_launches(snapshot: Snapshot, decision: Decision) -> Decision | None:
    """Launch nothing, say nothing: the work placed on new hosts vanishes."""
    if not any(g.launch for g in decision.groups.values()):
        return None
    groups = {
        k: dataclasses.replace(g, launch=0, replicas=g.replicas - g.launch)
        for k, g in decision.groups.items()
    }
    placements = []
    for p in decision.placements:
        targets = tuple(t for t in p.targets if t.on is not Target.NEW)
        dropped = sum(t.count for t in p.targets) - sum(t.count for t in targets)
        if p.kind is DemandKind.GANG and dropped:
            continue  # a gang is placed whole or not at all
        if targets:
            placements.append(dataclasses.replace(p, targets=targets, count=p.count - dropped))
    return dataclasses.replace(decision, groups=groups, placements=tuple(placements))


def drop_one_placement(snapshot: Snapshot, decision: Decision) -> Decision | None:
    if not decision.placements:
        return None
    return dataclasses.replace(decision, placements=decision.placements[1:])


def _running_hosts(snapshot: Snapshot, decision: Decision) -> list[str]:
    gone = {r.name for r in decision.terminate}
    return [n.name for n in snapshot.nodes if n.state is NodeState.RUNNING and n.name not in gone]


def overfill_host(snapshot: Snapshot, decision: Decision) -> Decision | None:
    """Put every unit of a demand on one running host (and launch nothing for it)."""
    for i, p in enumerate(decision.placements):
        if p.kind is not DemandKind.DEMAND:
            continue
        for host in _running_hosts(snapshot, decision):
            group = next(n.group for n in snapshot.nodes if n.name == host)
            moved = PlacementTarget(group, Target.RUNNING, p.count, (host,))
            placements = list(decision.placements)
            placements[i] = dataclasses.replace(p, targets=(moved,))
            return dataclasses.replace(decision, placements=tuple(placements))
    return None


def spread_onto_one_host(snapshot: Snapshot, decision: Decision) -> Decision | None:
    """Both bundles of a STRICT_SPREAD gang on one host (one that has room for both)."""
    for i, p in enumerate(decision.placements):
        if p.strategy is not Strategy.STRICT_SPREAD or p.count != 1 or len(p.bundles or ()) < 2:
            continue
        for host in sorted(_running_hosts(snapshot, decision), key=lambda h: -_room(snapshot, h)):
            group = next(n.group for n in snapshot.nodes if n.name == host)
            units = sum(t.count for t in p.targets)
            placements = list(decision.placements)
            placements[i] = dataclasses.replace(
                p, targets=(PlacementTarget(group, Target.RUNNING, units, (host,)),)
            )
            return dataclasses.replace(decision, placements=tuple(placements))
    return None


def _room(snapshot: Snapshot, host: str) -> float:
    node = next(n for n in snapshot.nodes if n.name == host)
    group = next(g for g in snapshot.groups if g.name == node.group)
    return sum((node.available if node.available is not None else group.resources).values())


def launch_one_more(snapshot: Snapshot, decision: Decision) -> Decision | None:
    g = snapshot.groups[0]
    decided = decision.groups[g.name]
    if decided.replicas >= g.max_replicas:
        return None
    return dataclasses.replace(decision, groups=_launching(decision, g.name, decided.launch + 1))


def remove_busy_node(snapshot: Snapshot, decision: Decision) -> Decision | None:
    gone = {r.name for r in decision.terminate}
    for n in snapshot.nodes:
        if n.state is NodeState.RUNNING and n.idle_seconds == 0 and n.name not in gone:
            removal = Removal(n.name, n.group, RemovalCause.IDLE, n.replica, 0.0)
            return dataclasses.replace(decision, terminate=(*decision.terminate, removal))
    return None


MUTATIONS: dict[str, Mutation] = {
    "drop all launches": drop_all_launches,
    "drop one placement": drop_one_placement,
    "overfill a host": overfill_host,
    "STRICT_SPREAD bundle onto a host that has one": spread_onto_one_host,
    "launch one extra host": launch_one_more,
    "remove a busy node": remove_busy_node,
}
