"""The judge's checks that make fewer hosts than Ray an improvement only when it is one.

- ``unaccounted-<demand|gang|constraint>`` / ``silent-drop``: every unit asked for is placed or
  reported unmet (a decision that places part of the work and says nothing about the rest
  fails; ``silent-drop`` when it also launches nothing while Ray launches hosts);
- ``placement-replay``: the placements fit the hosts they are put on (``replay``);
- ``more-hosts:<CPU|GPU|TPU>``: hosts kept plus hosts launched, per accelerator kind, are no
  more than Ray's (Ray's launches rounded up to whole replicas); the subject names the groups of
  that kind where rayscale has more than Ray;
- ``below-minimum``: a group ends below its minimum where Ray's does not;
- ``removes-busy-draining``: a host drained by someone else that still runs work stays;
- ``cap-churn``: no replica of pending hosts with no labels of their own (what a new replica
  is) goes for the worker cap while its group launches a replica in the same pass.

Hosts that neither side counts: draining, dead and terminating ones, and pending hosts past
their provisioning (or boot) limit (Ray's instance manager has failed them: ``ray_case``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayscale.autoscaler.scheduling.model import (
    Decision,
    DemandKind,
    Group,
    LabelConstraint,
    Node,
    NodeState,
    Options,
    RemovalCause,
    Snapshot,
    drained_while_working,
)
from rayscale.cluster.accelerators import TPU, is_gpu_key
from tests.differential.replay import Undecided, replay

KINDS = ("CPU", "GPU", "TPU")


@dataclass(frozen=True, slots=True)
class Difference:
    kind: str
    subject: str  # what it is about: "demand[0]", "gang[1]", "constraint", groups, a replica, ""
    detail: str


def resources_key(resources: Mapping[str, float] | None) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((k, float(v)) for k, v in (resources or {}).items() if v))


def bundles_key(
    bundles: tuple[Mapping[str, float], ...] | None,
) -> tuple[tuple[tuple[str, float], ...], ...]:
    return tuple(resources_key(b) for b in bundles or ())


def demand_of(
    snapshot: Snapshot, resources: Mapping[str, float] | None, selector: tuple[LabelConstraint, ...]
) -> int | None:
    """Which demand a placement or unmet entry is about: same resources and first selector."""
    res = resources_key(resources)
    same = [i for i, d in enumerate(snapshot.demands) if resources_key(d.resources) == res]
    for i in same:
        if snapshot.demands[i].label_selector == selector:
            return i
    for i in same:
        if selector in snapshot.demands[i].selectors:
            return i
    return same[0] if len(same) == 1 else None


def gang_of(
    snapshot: Snapshot, strategy: object, bundles: tuple[Mapping[str, float], ...] | None
) -> int | None:
    key = (strategy, bundles_key(bundles))
    for i, g in enumerate(snapshot.gangs):
        if (g.strategy, bundles_key(g.bundles)) == key:
            return i
    return None


def accelerator_kind(group: Group) -> str:
    if group.resources.get(TPU, 0) > 0:
        return "TPU"
    if any(is_gpu_key(k) and v > 0 for k, v in group.resources.items()):
        return "GPU"
    return "CPU"


def stuck(node: Node, options: Options) -> bool:
    """A pending host past its limit: the boot limit once scheduled, else provisioning."""
    limit = options.max_node_boot_seconds if node.booting else options.max_node_provision_seconds
    return node.state is NodeState.PENDING and node.pending_seconds > limit


def counted(snapshot: Snapshot) -> list[Node]:
    """The existing hosts both sides count: running or pending, not past a launch limit."""
    live = (NodeState.RUNNING, NodeState.PENDING)
    return [n for n in snapshot.nodes if n.state in live and not stuck(n, snapshot.options)]


def host_counts(snapshot: Snapshot, decision: Decision, ray: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Per group: (rayscale's, Ray's) hosts kept plus hosts launched. Ray plans single hosts of
    multi-host replicas; a replica of which either side keeps a host, and Ray's launches, count as
    whole replicas (the least that could run what Ray put there; KubeRay's controller replaces the
    missing hosts of a replica it keeps). A replica with a host drained while it works is going:
    neither side counts it; nor does Ray's side count a broken replica (`broken_replica_hosts`)."""
    mine_gone = {r.name for r in decision.terminate}
    ray_gone = {t["instance"] for t in ray["terminate"] if t["instance"]}
    out: dict[str, tuple[int, int]] = {}
    held = {(n.group, n.replica or n.name) for n in snapshot.nodes if drained_while_working(n)}
    nodes = [n for n in counted(snapshot) if (n.group, n.replica or n.name) not in held]  # going
    broken = {n.name for n in broken_replica_hosts(snapshot)}  # KubeRay deletes these replicas whole
    for g in snapshot.groups:
        decided = decision.groups.get(g.name)
        launched = decided.launch if decided else 0
        replicas: dict[str, list[str]] = {}
        for n in nodes:
            if n.group == g.name:
                replicas.setdefault(n.replica or n.name, []).append(n.name)
        mine = sum(g.num_of_hosts for hosts in replicas.values() if set(hosts) - mine_gone)
        mine += launched * g.num_of_hosts
        theirs = sum(g.num_of_hosts for hosts in replicas.values() if set(hosts) - ray_gone - broken)
        theirs += math.ceil(int(ray["launch"].get(g.name, 0)) / g.num_of_hosts) * g.num_of_hosts
        out[g.name] = (mine, theirs)
    return out


def more_hosts(
    snapshot: Snapshot, decision: Decision, ray: Mapping[str, Any], skip: frozenset[str] = frozenset()
) -> list[Difference]:
    """Per accelerator kind, rayscale's hosts against Ray's, leaving out the groups in ``skip``."""
    counts = host_counts(snapshot, decision, ray)
    out = []
    for kind in KINDS:
        groups = [g.name for g in snapshot.groups if accelerator_kind(g) == kind and g.name not in skip]
        mine = sum(counts[g][0] for g in groups)
        theirs = sum(counts[g][1] for g in groups)
        if mine > theirs:
            over = [g for g in groups if counts[g][0] > counts[g][1]]
            detail = {g: counts[g] for g in groups if counts[g] != (0, 0)}
            out.append(
                Difference(
                    f"more-hosts:{kind}",
                    ",".join(over),
                    f"{kind} hosts kept + launched: rayscale {mine}, Ray {theirs} "
                    f"(per group (rayscale, Ray): {detail}; Ray's launches {ray['launch']})",
                )
            )
    return out


def below_minimum(snapshot: Snapshot, decision: Decision, ray: Mapping[str, Any]) -> list[Difference]:
    """A group ends below its minimum where Ray's does not: within the room under maxReplicas that
    replicas held by a host drained while it works leave (KubeRay never runs more pods)."""
    counts = host_counts(snapshot, decision, ray)
    held: dict[str, set[str]] = {}
    for n in snapshot.nodes:
        if drained_while_working(n):
            held.setdefault(n.group, set()).add(n.replica or n.name)
    held_hosts = sum(1 for n in snapshot.nodes if (n.replica or n.name) in set().union(*held.values()))
    cap = snapshot.options.max_workers
    out: list[Difference] = []
    if cap is not None and held and _minimums_share_the_room(snapshot, counts, cap - held_hosts):
        return out
    for g in snapshot.groups:
        mine, theirs = counts[g.name]
        room = max(g.max_replicas - len(held.get(g.name, ())), 0)
        floor = min(g.min_replicas, room) * g.num_of_hosts
        if cap is not None and held:  # the room the held pods and the other groups' hosts leave
            room_hosts = cap - held_hosts - sum(1 for n in counted(snapshot) if n.group != g.name)
            floor = min(floor, max(room_hosts, 0) // g.num_of_hosts * g.num_of_hosts)
        if mine < min(floor, theirs):
            out.append(
                Difference("below-minimum", g.name, f"{g.name}: rayscale keeps {mine} hosts, minimum {floor}")
            )
    return out


def _minimums_share_the_room(snapshot: Snapshot, counts: Mapping[str, tuple[int, int]], room: int) -> bool:
    """The minimums the groups are short of need more hosts than the worker cap leaves beside the
    held pods, and rayscale fills that room (up to one replica): which group stays short is the
    cap's choice (rayscale gives the room to the later groups first, as Ray's cut does)."""
    existing = Counter(n.group for n in counted(snapshot))
    short = sum(max(g.min_replicas * g.num_of_hosts - existing[g.name], 0) for g in snapshot.groups)
    widest = max((g.num_of_hosts for g in snapshot.groups), default=1)
    free = room - sum(existing.values())
    return short > free and sum(c[0] for c in counts.values()) > room - widest


def accounting(snapshot: Snapshot, decision: Decision, ray: Mapping[str, Any]) -> list[Difference]:
    """Every unit asked for is placed or reported unmet."""
    demand: Counter[int] = Counter()
    gang: Counter[int] = Counter()
    constraint = 0
    for entries in (decision.placements, decision.unmet):
        for e in entries:
            if e.kind is DemandKind.DEMAND:
                i = demand_of(snapshot, e.resources, e.label_selector)
                if i is not None:
                    demand[i] += e.count
            elif e.kind is DemandKind.GANG:
                j = gang_of(snapshot, e.strategy, e.bundles)
                if j is not None:
                    gang[j] += e.count
            else:
                constraint += e.count
    asked = [("demand", i, d.count, demand[i]) for i, d in enumerate(snapshot.demands)]
    asked += [("gang", j, g.count, gang[j]) for j, g in enumerate(snapshot.gangs)]
    out = [
        Difference(
            f"unaccounted-{what}",
            f"{what}[{i}]",
            f"{what}[{i}] asks {want}, the decision places or reports {got}",
        )
        for what, i, want, got in asked
        if want != got
    ]
    bundles = sum(c.count for c in snapshot.constraints)
    if constraint != bundles:
        out.append(
            Difference(
                "unaccounted-constraint",
                "constraint",
                f"request_resources asks {bundles} bundles, the decision places or reports {constraint}",
            )
        )
    launches = sum(g.launch for g in decision.groups.values())
    if out and not launches and not decision.unmet and sum(ray["launch"].values()):
        out.append(
            Difference(
                "silent-drop",
                "",
                f"rayscale launches nothing and reports nothing unmet; Ray launches {ray['launch']}",
            )
        )
    return out


def replay_check(snapshot: Snapshot, decision: Decision) -> list[Difference]:
    try:
        return [Difference("placement-replay", "", why) for why in replay(snapshot, decision)]
    except Undecided:
        return []


def busy_draining_removed(snapshot: Snapshot, decision: Decision) -> list[Difference]:
    busy = {n.name for n in snapshot.nodes if drained_while_working(n)}
    return [
        Difference(
            "removes-busy-draining", r.name, f"rayscale removes {r.name} ({r.reason}) while work runs on it"
        )
        for r in decision.terminate
        if r.name in busy
    ]


def cap_churn(snapshot: Snapshot, decision: Decision) -> list[Difference]:
    """Groups that remove a replica like a new one for the worker cap and launch one."""
    hosts: dict[str, list[Node]] = {}
    for n in snapshot.nodes:
        hosts.setdefault(n.replica or n.name, []).append(n)
    width = {g.name: g.num_of_hosts for g in snapshot.groups}
    cut = {
        r.group: r.replica or r.name
        for r in decision.terminate
        if r.reason is RemovalCause.MAX_WORKERS
        and decision.groups[r.group].launch > 0
        and len(hosts[r.replica or r.name]) == width[r.group]
        and all(n.state is NodeState.PENDING and n.labels is None for n in hosts[r.replica or r.name])
    }
    return [
        Difference("cap-churn", g, f"rayscale removes {key} for the worker cap and launches a replica of {g}")
        for g, key in sorted(cut.items())
    ]


def judge(snapshot: Snapshot, decision: Decision, ray: Mapping[str, Any]) -> list[Difference]:
    """The checks of this module, in order."""
    return (
        accounting(snapshot, decision, ray)
        + replay_check(snapshot, decision)
        + more_hosts(snapshot, decision, ray)
        + below_minimum(snapshot, decision, ray)
        + busy_draining_removed(snapshot, decision)
        + cap_churn(snapshot, decision)
    )


def broken_replica_hosts(snapshot: Snapshot) -> list[Node]:
    """The hosts Ray still counts of multi-host replicas that have a dead, idle draining or failed
    host (past its launch limit): rayscale removes such a replica whole, as KubeRay deletes it."""
    broken = {
        (n.group, n.replica)
        for n in snapshot.nodes
        if n.replica is not None
        and (
            n.state is NodeState.DEAD
            or (n.state is NodeState.DRAINING and not drained_while_working(n))
            or stuck(n, snapshot.options)
        )
    }
    return [n for n in counted(snapshot) if (n.group, n.replica) in broken]
