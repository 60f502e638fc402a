"""rayscale's decision against Ray's answer for one case: the differences that matter.

Checks (the kinds of difference they report):

- ``unplaced-demand`` / ``unplaced-gang`` / ``unplaced-constraint``: everything Ray places,
  rayscale places. Per demand (resources and selectors), per placement group shape and for the
  ``request_resources`` unit, rayscale's unmet count must not exceed Ray's infeasible count.
- the checks of ``checks``: every unit placed or reported unmet (``unaccounted-*``,
  ``silent-drop``), placements that fit their hosts (``placement-replay``), hosts kept plus
  launched per accelerator kind no more than Ray's (``more-hosts:<kind>``), minimums kept
  (``below-minimum``), busy draining hosts kept (``removes-busy-draining``). Ray plans single
  hosts; KubeRay turns them into whole replicas of ``numOfHosts`` hosts, so Ray's hosts per
  group are counted rounded up to whole replicas: the least that could run the work Ray put there.
- ``more-accelerators:<GPU|TPU>``: rayscale's launched accelerators do not dominate Ray's (as
  many of every kind and more of one, with the same rounding): the per-group rule that matters,
  since the group choice may differ.
- ``idle-only-ray`` / ``idle-only-rayscale``: both remove the same idle nodes (as replicas:
  KubeRay deletes a multi-host replica whole); an idle replica the other side removes for a cap
  counts as removed.
- ``cap-removals``: the same replicas removed for ``maxReplicas`` / the worker cap, up to ties in
  Ray's removal order (no Ray node first, longest idle, least used).
- ``rayscale-error`` / ``ray-error``: either side raised.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rayscale.autoscaler.scheduling.model import (
    Decision,
    Gang,
    Group,
    Node,
    NodeState,
    RemovalCause,
    Selector,
    Snapshot,
    Unmet,
)
from tests.differential.checks import Difference, demand_of, gang_of, judge
from tests.differential.ray_case import pg_id

__all__ = ["Difference", "Outcome", "compare"]

ACCELERATORS = ("GPU", "TPU")
RAY_CAP_CAUSES = {"MAX_NUM_NODE_PER_TYPE", "MAX_NUM_NODES"}
RAYSCALE_CAP_CAUSES = {RemovalCause.MAX_REPLICAS, RemovalCause.MAX_WORKERS}


@dataclass(slots=True)
class Outcome:
    """One case run on both sides."""

    case_id: str
    snapshot: Snapshot
    decision: Decision | None
    ray: dict[str, Any]
    error: str | None = None
    differences: list[Difference] = field(default_factory=list)
    # Asks the oracle for a counterfactual answer (``ray_case.variant``); cached per name.
    ask_variant: Callable[[str], dict[str, Any]] | None = None
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)

    def ray_variant(self, name: str) -> dict[str, Any] | None:
        if name not in self.variants:
            if self.ask_variant is None:
                return None
            self.variants[name] = self.ask_variant(name)
        return self.variants[name]

    def variant_outcome(self, name: str) -> Outcome | None:
        """The case compared with Ray's answer to its ``name`` variant; a variant it asks for in
        turn is the two together (``name+other``), so that entries combine."""
        answer = self.ray_variant(name)
        if answer is None or answer.get("error"):
            return None
        other = Outcome(self.case_id, self.snapshot, self.decision, answer, self.error)

        def ask(more: str) -> dict[str, Any]:
            key = name if more in name.split("+") else f"{name}+{more}"
            return self.ray_variant(key) or {"error": f"no answer to the variant {key}"}

        other.ask_variant = ask
        other.differences = compare(other)
        return other


def demand_index(snapshot: Snapshot, unmet: Unmet) -> int | None:
    """Which demand an unmet entry is about: same resources and first selector (then any selector)."""
    return demand_of(snapshot, unmet.resources, unmet.label_selector)


def gang_index(snapshot: Snapshot, unmet: Unmet) -> int | None:
    return gang_of(snapshot, unmet.strategy, unmet.bundles)


def replica_key(snapshot: Snapshot, name: str) -> str:
    for n in snapshot.nodes:
        if n.name == name:
            return n.replica or n.name
    return name


def ray_hosts(snapshot: Snapshot, ray: Mapping[str, Any]) -> dict[str, int]:
    """Ray's launches per group, in hosts rounded up to whole replicas."""
    out: dict[str, int] = {}
    for g in snapshot.groups:
        hosts = int(ray["launch"].get(g.name, 0))
        out[g.name] = math.ceil(hosts / g.num_of_hosts) * g.num_of_hosts
    return out


def rayscale_hosts(snapshot: Snapshot, decision: Decision) -> dict[str, int]:
    return {g.name: decision.groups[g.name].launch * g.num_of_hosts for g in snapshot.groups}


def _gang_infeasible(case_id: str, gi: int, gang: Gang, ray: Mapping[str, Any]) -> int:
    failed = set(ray["infeasible_pgs"])
    return sum(1 for copy in range(gang.count) if pg_id(case_id, gi, copy) in failed)


def _sel(s: Selector) -> str:
    return ",".join(f"{c.key} {c.op} {'|'.join(c.values)}" for c in s) or "-"


def describe_demand(snapshot: Snapshot, i: int) -> str:
    d = snapshot.demands[i]
    sels = " / ".join(_sel(s) for s in d.selectors)
    return f"demand[{i}] {dict(d.resources)} x{d.count}" + (f" selectors {sels}" if sels else "")


def describe_gang(snapshot: Snapshot, i: int) -> str:
    g = snapshot.gangs[i]
    sels = f" bundle selectors {[_sel(s) for s in g.bundle_selectors]}" if g.bundle_selectors else ""
    return f"gang[{i}] {g.strategy} {[dict(b) for b in g.bundles]} x{g.count}{sels}"


def _placement(outcome: Outcome) -> list[Difference]:
    snap, decision, ray = outcome.snapshot, outcome.decision, outcome.ray
    assert decision is not None
    out: list[Difference] = []
    demand_unmet: Counter[int] = Counter()
    gang_unmet: Counter[int] = Counter()
    constraint_unmet = 0
    for u in decision.unmet:
        if u.kind == "demand":
            di = demand_index(snap, u)
            if di is None:
                out.append(Difference("harness", "", f"unmet demand matches no demand: {u}"))
            else:
                demand_unmet[di] += u.count
        elif u.kind == "gang":
            gi = gang_index(snap, u)
            if gi is None:
                out.append(Difference("harness", "", f"unmet gang matches no gang: {u}"))
            else:
                gang_unmet[gi] += u.count
        elif u.kind == "constraint":
            constraint_unmet += u.count
    for i in range(len(snap.demands)):
        ray_left = int(ray["infeasible_demands"][i])
        if demand_unmet[i] > ray_left:
            out.append(
                Difference(
                    "unplaced-demand",
                    f"demand[{i}]",
                    f"{describe_demand(snap, i)}: rayscale leaves {demand_unmet[i]}, Ray {ray_left}",
                )
            )
    for i, g in enumerate(snap.gangs):
        ray_left = _gang_infeasible(outcome.case_id, i, g, ray)
        if gang_unmet[i] > ray_left:
            out.append(
                Difference(
                    "unplaced-gang",
                    f"gang[{i}]",
                    f"{describe_gang(snap, i)}: rayscale leaves {gang_unmet[i]}, Ray {ray_left}",
                )
            )
    if constraint_unmet and not ray["constraint_infeasible"]:
        out.append(
            Difference(
                "unplaced-constraint",
                "constraint",
                f"request_resources {[(dict(c.resources), c.count) for c in snap.constraints]}: "
                f"rayscale leaves {constraint_unmet} bundles, Ray satisfies it",
            )
        )
    return out


def accelerators(
    snap: Snapshot, decision: Decision, ray: Mapping[str, Any], skip: frozenset[str] = frozenset()
) -> list[Difference]:
    """Flagged when rayscale's launched accelerators dominate Ray's (at least as many of each
    kind, more of one), leaving out the groups in ``skip``; trading one kind for another is a
    choice, not a loss."""
    mine = {k: v for k, v in rayscale_hosts(snap, decision).items() if k not in skip}
    theirs = {k: v for k, v in ray_hosts(snap, ray).items() if k not in skip}
    out: list[Difference] = []
    amounts = {
        acc: (_accelerators(snap, mine, acc), _accelerators(snap, theirs, acc)) for acc in ACCELERATORS
    }
    if all(a >= b for a, b in amounts.values()):
        for acc, (a, b) in amounts.items():
            if a > b:
                over = [g for g in mine if mine[g] > theirs[g] and snap_group(snap, g).resources.get(acc)]
                out.append(
                    Difference(
                        f"more-accelerators:{acc}",
                        ",".join(over),
                        f"rayscale launches {a:g} {acc} {_nonzero(mine)}, Ray {b:g} {_nonzero(theirs)}",
                    )
                )
    return out


def snap_group(snap: Snapshot, name: str) -> Group:
    return next(g for g in snap.groups if g.name == name)


def _accelerators(snap: Snapshot, hosts: Mapping[str, int], acc: str) -> float:
    return sum(hosts.get(g.name, 0) * g.resources.get(acc, 0.0) for g in snap.groups)


def _nonzero(hosts: Mapping[str, int]) -> dict[str, int]:
    return {k: v for k, v in hosts.items() if v}


def _removals(outcome: Outcome) -> list[Difference]:
    snap, decision, ray = outcome.snapshot, outcome.decision, outcome.ray
    assert decision is not None
    out: list[Difference] = []
    # An idle replica the other side removes for another reason (a cap) goes all the same.
    ray_idle = {replica_key(snap, t["instance"]) for t in ray["terminate"] if t["cause"] == "IDLE"}
    ray_gone = {replica_key(snap, t["instance"]) for t in ray["terminate"] if t["instance"]}
    mine_idle = {r.replica or r.name for r in decision.terminate if r.reason is RemovalCause.IDLE}
    mine_gone = {r.replica or r.name for r in decision.terminate}
    for key in sorted(ray_idle - mine_gone):
        out.append(Difference("idle-only-ray", key, f"Ray removes idle {key}, rayscale keeps it"))
    for key in sorted(mine_idle - ray_gone):
        out.append(Difference("idle-only-rayscale", key, f"rayscale removes idle {key}, Ray keeps it"))

    by_group = {g.name: g for g in snap.groups}
    ray_caps: set[str] = set()
    for t in ray["terminate"]:
        # A termination without an instance is a launch Ray planned and cancelled in the same
        # pass (a minimum cut by the worker cap): it shows in the launches, not as a removal.
        if t["cause"] in RAY_CAP_CAUSES and t["type"] in by_group and t["instance"]:
            ray_caps.add(replica_key(snap, t["instance"]))
    mine_caps = {r.replica or r.name for r in decision.terminate if r.reason in RAYSCALE_CAP_CAUSES}
    # An idle replica one side removes for the cap and the other for its idle time goes all the same.
    same = ray_gone & mine_gone & (ray_idle | mine_idle)
    ray_caps, mine_caps = ray_caps - same, mine_caps - same
    # Among replicas that rank the same for removal (Ray's order: no Ray node first, longest
    # idle, least used) either may go: compare what is removed by rank, not by name.
    ranks = termination_ranks(snap)
    if sorted(ranks[k] for k in mine_caps) != sorted(ranks[k] for k in ray_caps):
        out.append(
            Difference(
                "cap-removals",
                ",".join(sorted(mine_caps ^ ray_caps)),
                f"removed for maxReplicas / the worker cap: rayscale {sorted(mine_caps)}, "
                f"Ray {sorted(ray_caps)}",
            )
        )
    return out


def termination_ranks(snap: Snapshot) -> dict[str, tuple[bool, float, float]]:
    """Per replica: its place in Ray's removal order."""
    by_group = {g.name: g for g in snap.groups}
    hosts: dict[str, list[Node]] = {}
    for n in snap.nodes:
        hosts.setdefault(n.replica or n.name, []).append(n)
    out = {}
    for key, members in hosts.items():
        group = by_group[members[0].group]
        running = all(n.state is NodeState.RUNNING for n in members)
        idle = min(n.idle_seconds for n in members) if running else 0.0
        used = []
        for n in members:
            free = (
                n.available if (n.available is not None and n.state is NodeState.RUNNING) else group.resources
            )
            used += [(v - free.get(k, 0.0)) / v for k, v in group.resources.items() if v > 0]
        out[key] = (running, -idle, round(sum(used) / len(used), 6) if used else 0.0)
    return out


def compare(outcome: Outcome) -> list[Difference]:
    if outcome.ray.get("error"):
        return [Difference("ray-error", "", str(outcome.ray["error"]).strip().splitlines()[-1])]
    if outcome.error is not None or outcome.decision is None:
        return [Difference("rayscale-error", "", outcome.error or "no decision")]
    out = _placement(outcome) + accelerators(outcome.snapshot, outcome.decision, outcome.ray)
    out += _removals(outcome)
    out += judge(outcome.snapshot, outcome.decision, outcome.ray)
    if outcome.ray.get("infeasible_unknown"):
        out.append(Difference("harness", "", "Ray reported an infeasible request that matches no demand"))
    return out
