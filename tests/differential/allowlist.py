"""Deliberate differences from Ray: allowlist.yaml (id, reason) and one predicate per id.

A difference is allowlisted when the predicate of some entry recognises it in its case. Entries
are improvements over Ray only; a rayscale bug never goes here. ``markdown`` renders the list for
docs/autoscaling.md (between the ``differential-allowlist`` markers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rayscale.autoscaler.scheduling.model import NodeState, Strategy, UnmetReason
from tests.differential.compare import (
    ACCELERATORS,
    RAY_CAP_CAUSES,
    Difference,
    Outcome,
    demand_index,
    gang_index,
    ray_hosts,
    rayscale_hosts,
)
from tests.differential.ray_case import pg_id

ALLOWLIST = Path(__file__).resolve().parent / "allowlist.yaml"
BEGIN = "<!-- differential-allowlist:begin -->"
END = "<!-- differential-allowlist:end -->"

# (the case, the difference, the other entries) -> whether this entry explains the difference
Predicate = Callable[[Outcome, Difference, list["Entry"]], bool]


@dataclass(frozen=True, slots=True)
class Entry:
    id: str
    reason: str


def load(path: Path = ALLOWLIST) -> list[Entry]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    out = []
    for item in data:
        if set(item) != {"id", "reason"}:
            raise ValueError(f"{path}: each entry has exactly an id and a reason: {item}")
        out.append(Entry(str(item["id"]), " ".join(str(item["reason"]).split())))
    return out


# ----------------------------------------------------------------------------- predicates


PREDICATES: dict[str, Predicate] = {}


def predicate(entry_id: str) -> Callable[[Predicate], Predicate]:
    def register(fn: Predicate) -> Predicate:
        PREDICATES[entry_id] = fn
        return fn

    return register


def allowlisted(outcome: Outcome, difference: Difference, entries: list[Entry]) -> str | None:
    """The id of the first entry whose predicate recognises ``difference``, or None."""
    if outcome.ray.get("error") or outcome.decision is None:
        return None
    for entry in entries:
        fn = PREDICATES.get(entry.id)
        if fn is not None and fn(outcome, difference, [e for e in entries if e is not entry]):
            return entry.id
    return None


def markdown(entries: list[Entry]) -> str:
    """The allowlist as a Markdown table."""
    lines = ["| id | why rayscale differs from Ray |", "|---|---|"]
    lines += [f"| `{e.id}` | {_cell(e.reason)} |" for e in entries]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def docs_section(text: str, entries: list[Entry]) -> str:
    """``text`` with the table between the markers replaced by the current list."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + markdown(entries) + text[end:]


# ----------------------------------------------------------------------------- the entries

PLACEMENT_KINDS = ("unplaced-", "more-hosts", "more-accelerators:")


def _ray_nodes_with_work(ray: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [n for n in ray.get("nodes", []) if n.get("demand") or n.get("constraint")]


@predicate("ray-cut-node-absorbs")
def _cut_node_absorbs(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """Gone (or explained by another entry) when Ray keeps the nodes it removes out of the packing."""
    if not any(t["cause"] != "IDLE" for t in outcome.ray.get("terminate", [])):
        return False
    other = outcome.variant_outcome("no-cut-absorb")
    if other is None:
        return False
    same = [d for d in other.differences if (d.kind, d.subject) == (difference.kind, difference.subject)]
    return all(allowlisted(other, d, others) is not None for d in same)


def _hosts_of(outcome: Outcome, replica: str) -> set[str]:
    return {n.name for n in outcome.snapshot.nodes if (n.replica or n.name) == replica}


def _rayscale_worked(outcome: Outcome, hosts: set[str]) -> bool:
    """rayscale gave pending work (tasks, actors, placement groups) to one of ``hosts``."""
    assert outcome.decision is not None
    return any(
        hosts & set(t.nodes) for p in outcome.decision.placements if p.kind != "constraint" for t in p.targets
    )


def _idle_seconds(outcome: Outcome, replica: str) -> float:
    return min(
        (n.idle_seconds for n in outcome.snapshot.nodes if (n.replica or n.name) == replica), default=0.0
    )


@predicate("work-avoids-idle-hosts")
def _work_avoids_idle(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """Ray kept an idle replica busy with work that rayscale places elsewhere, launching no more."""
    if any(d.kind.startswith(PLACEMENT_KINDS) for d in outcome.differences):
        return False
    if difference.kind == "idle-only-rayscale":
        hosts = _hosts_of(outcome, difference.subject)
        return any(n.get("node") in hosts for n in _ray_nodes_with_work(outcome.ray))
    if difference.kind == "idle-only-ray":
        # A swap: rayscale keeps this one (it got the work) and removes a longer idle one instead.
        if not _rayscale_worked(outcome, _hosts_of(outcome, difference.subject)):
            return False
        mine = _idle_seconds(outcome, difference.subject)
        return any(
            d.kind == "idle-only-rayscale" and _idle_seconds(outcome, d.subject) > mine
            for d in outcome.differences
        )
    return False


@predicate("running-hosts-first")
def _running_hosts_first(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """rayscale ran work on an idle running host that Ray sent to a host still starting."""
    if difference.kind != "idle-only-ray" or any(
        d.kind.startswith(PLACEMENT_KINDS) for d in outcome.differences
    ):
        return False
    if not _rayscale_worked(outcome, _hosts_of(outcome, difference.subject)):
        return False
    starting = {n.name for n in outcome.snapshot.nodes if n.state is NodeState.PENDING}
    return any(
        n.get("demand") and (n.get("status") == "TO_LAUNCH" or n.get("node") in starting)
        for n in outcome.ray.get("nodes", [])
    )


def _replica_hosts(outcome: Outcome) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n in outcome.snapshot.nodes:
        if n.replica is not None:
            out.setdefault(n.replica, []).append(n.name)
    return out


def _splits_replica(outcome: Outcome, causes: set[str]) -> bool:
    """Ray removes some but not all hosts of a multi-host replica (for one of ``causes``)."""
    gone = {t["instance"] for t in outcome.ray.get("terminate", []) if t["cause"] in causes}
    return any(0 < len(gone & set(hosts)) < len(hosts) for hosts in _replica_hosts(outcome).values())


def _partial_launch(outcome: Outcome) -> bool:
    """Ray plans a number of hosts of a multi-host group that is not whole replicas."""
    launch = outcome.ray.get("launch", {})
    return any(g.num_of_hosts > 1 and launch.get(g.name, 0) % g.num_of_hosts for g in outcome.snapshot.groups)


@predicate("whole-replicas")
def _whole_replicas(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """Ray planned, capped or idled single hosts of a multi-host replica."""
    if difference.kind == "idle-only-ray":
        return difference.subject in _replica_hosts(outcome) and _splits_replica(outcome, {"IDLE"})
    if difference.kind == "cap-removals":
        return _splits_replica(outcome, set(RAY_CAP_CAUSES))
    if difference.kind.startswith(PLACEMENT_KINDS):
        return _partial_launch(outcome) or _splits_replica(outcome, set(RAY_CAP_CAUSES))
    return False


@predicate("cap-keeps-minimum")
def _cap_keeps_minimum(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """Ray's worker cap removed hosts of a group below its minimum (the removals, and what they freed)."""
    if difference.kind != "cap-removals" and not difference.kind.startswith(PLACEMENT_KINDS):
        return False
    snap, ray = outcome.snapshot, outcome.ray
    gone: dict[str, int] = {}
    for t in ray.get("terminate", []):
        if t["cause"] in RAY_CAP_CAUSES and t["instance"]:
            gone[t["type"]] = gone.get(t["type"], 0) + 1
    live_states = (NodeState.RUNNING, NodeState.PENDING)
    for g in snap.groups:
        live = sum(1 for n in snap.nodes if n.group == g.name and n.state in live_states)
        left = live + ray.get("launch", {}).get(g.name, 0) - gone.get(g.name, 0)
        if gone.get(g.name) and left < g.min_replicas * g.num_of_hosts:
            return True
    return False


def _unmet_counts(outcome: Outcome) -> tuple[dict[int, int], dict[int, int], int]:
    """rayscale's unmet units per demand, placement groups per gang, constraint bundles."""
    snap, decision = outcome.snapshot, outcome.decision
    assert decision is not None
    demands: dict[int, int] = {}
    gangs: dict[int, int] = {}
    constraints = 0
    for u in decision.unmet:
        if u.kind == "demand":
            i = demand_index(snap, u)
            if i is not None:
                demands[i] = demands.get(i, 0) + u.count
        elif u.kind == "gang":
            i = gang_index(snap, u)
            if i is not None:
                gangs[i] = gangs.get(i, 0) + u.count
        elif u.kind == "constraint":
            constraints += u.count
    return demands, gangs, constraints


def _ray_gangs_left(outcome: Outcome) -> dict[int, int]:
    failed = set(outcome.ray["infeasible_pgs"])
    return {
        i: sum(1 for c in range(g.count) if pg_id(outcome.case_id, i, c) in failed)
        for i, g in enumerate(outcome.snapshot.gangs)
    }


def _extra_units(outcome: Outcome) -> dict[str, float]:
    """Units rayscale places that Ray leaves infeasible ("units"), and the resources they ask for."""
    snap, ray = outcome.snapshot, outcome.ray
    unmet_demand, unmet_gang, constraint_unmet = _unmet_counts(outcome)
    out: dict[str, float] = {"units": 0.0}

    def add(resources: Mapping[str, float], units: int) -> None:
        out["units"] += units
        for k, v in resources.items():
            out[k] = out.get(k, 0.0) + v * units

    for i, d in enumerate(snap.demands):
        add(d.resources, max(ray["infeasible_demands"][i] - unmet_demand.get(i, 0), 0))
    for i, gang in enumerate(snap.gangs):
        for b in gang.bundles:
            add(b, max(_ray_gangs_left(outcome)[i] - unmet_gang.get(i, 0), 0))
    if ray["constraint_infeasible"] and not constraint_unmet:
        for c in snap.constraints:
            add(c.resources, c.count)
    return out


@predicate("places-more-work")
def _places_more_work(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """rayscale's extra launches carry work Ray leaves infeasible: at least one more unit per host."""
    if outcome.decision is None:
        return False
    extra = _extra_units(outcome)
    if not extra["units"]:
        return False
    if difference.kind == "more-hosts":
        mine = sum(rayscale_hosts(outcome.snapshot, outcome.decision).values())
        theirs = sum(ray_hosts(outcome.snapshot, outcome.ray).values())
        return mine - theirs <= extra["units"]
    if difference.kind.startswith("more-accelerators:"):
        return extra.get(difference.kind.split(":", 1)[1], 0.0) > 0
    return False


def _split_packs(outcome: Outcome) -> list[int]:
    """STRICT_PACK gangs whose bundles carry different selectors and that no single host can hold."""
    snap = outcome.snapshot
    by_group = {g.name: g for g in snap.groups}
    hosts: list[tuple[Mapping[str, float], Mapping[str, str]]] = [
        (g.resources, g.labels) for g in snap.groups
    ]
    if snap.head is not None:
        hosts.append((snap.head.resources, snap.head.labels))
    hosts += [(by_group[n.group].resources, n.labels) for n in snap.nodes if n.labels is not None]
    out = []
    for i, gang in enumerate(snap.gangs):
        if gang.strategy is not Strategy.STRICT_PACK or len(set(gang.bundle_selectors)) < 2:
            continue
        total: dict[str, float] = {}
        for b in gang.bundles:
            for k, v in b.items():
                total[k] = total.get(k, 0.0) + v
        every = [c for sel in gang.bundle_selectors for c in sel]
        if not any(
            all(total[k] <= res.get(k, 0.0) for k in total) and all(c.matches(labels) for c in every)
            for res, labels in hosts
        ):
            out.append(i)
    return out


@predicate("fewer-accelerators")
def _fewer_accelerators(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """rayscale's extra hosts save accelerators: it launches fewer of one kind and no more of any."""
    if difference.kind != "more-hosts" or outcome.decision is None:
        return False
    snap = outcome.snapshot
    mine, theirs = rayscale_hosts(snap, outcome.decision), ray_hosts(snap, outcome.ray)
    amounts = [
        (
            sum(mine[g.name] * g.resources.get(acc, 0.0) for g in snap.groups),
            sum(theirs[g.name] * g.resources.get(acc, 0.0) for g in snap.groups),
        )
        for acc in ACCELERATORS
    ]
    return all(a <= b for a, b in amounts) and any(a < b for a, b in amounts)


@predicate("strict-pack-split-by-selectors")
def _strict_pack_split(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """Such a group Ray 'placed' split over nodes: rayscale leaves it unmet and keeps no node for it."""
    split = _split_packs(outcome)
    if difference.kind == "unplaced-gang":
        return int(difference.subject.split("[", 1)[1].rstrip("]")) in split
    if difference.kind == "idle-only-ray" and split:
        # Ray sent the work rayscale gives this replica to nodes it launches for such a group.
        failed = set(outcome.ray["infeasible_pgs"])
        placed = any(
            pg_id(outcome.case_id, i, c) not in failed
            for i in split
            for c in range(outcome.snapshot.gangs[i].count)
        )
        return placed and _rayscale_worked(outcome, _hosts_of(outcome, difference.subject))
    if difference.kind == "idle-only-rayscale" and split:
        # Ray kept the idle replica because it put a bundle of such a group on it.
        labels = {
            f"_PG_{pg_id(outcome.case_id, i, c)}"
            for i in split
            for c in range(outcome.snapshot.gangs[i].count)
        }
        hosts = _hosts_of(outcome, difference.subject)
        return any(
            n.get("node") in hosts and any(r.get("affinity") in labels for r in n.get("demand", []))
            for n in outcome.ray.get("nodes", [])
        )
    return False


@predicate("other-work-left-at-cap")
def _other_work_left(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """At a cap, rayscale leaves other work unplaced: no more units than Ray, or no less of any resource."""
    if not difference.kind.startswith(("unplaced-demand", "unplaced-gang")) or outcome.decision is None:
        return False
    index = int(difference.subject.split("[", 1)[1].rstrip("]"))
    kind = difference.kind.removeprefix("unplaced-")
    capped = (UnmetReason.MAX_REPLICAS, UnmetReason.MAX_WORKERS)
    for u in outcome.decision.unmet:
        finder = demand_index if u.kind == "demand" else gang_index if u.kind == "gang" else None
        if (
            u.kind == kind
            and finder is not None
            and finder(outcome.snapshot, u) == index
            and u.reason not in capped
        ):
            return False
    snap, ray = outcome.snapshot, outcome.ray
    mine_demand, mine_gang, _ = _unmet_counts(outcome)
    ray_gang = _ray_gangs_left(outcome)
    mine_left = sum(mine_demand.values()) + sum(n * len(snap.gangs[i].bundles) for i, n in mine_gang.items())
    ray_left = sum(ray["infeasible_demands"]) + sum(
        n * len(snap.gangs[i].bundles) for i, n in ray_gang.items()
    )
    if mine_left <= ray_left:
        return True
    mine_placed: dict[str, float] = {}
    ray_placed: dict[str, float] = {}

    def add(into: dict[str, float], resources: Mapping[str, float], units: int) -> None:
        for k, v in resources.items():
            into[k] = into.get(k, 0.0) + v * units

    for i, d in enumerate(snap.demands):
        add(mine_placed, d.resources, d.count - mine_demand.get(i, 0))
        add(ray_placed, d.resources, d.count - ray["infeasible_demands"][i])
    for i, g in enumerate(snap.gangs):
        for b in g.bundles:
            add(mine_placed, b, g.count - mine_gang.get(i, 0))
            add(ray_placed, b, g.count - ray_gang[i])
    return all(mine_placed.get(k, 0.0) >= v - 1e-9 for k, v in ray_placed.items())
