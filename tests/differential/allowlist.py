"""Deliberate differences from Ray: allowlist.yaml (id, reason) and one predicate per id.

A difference is allowlisted when the predicate of some entry recognises it in its case. Entries
are improvements over Ray only; a rayscale bug never goes here. ``markdown`` renders the list for
docs/autoscaling.md (between the ``differential-allowlist`` markers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from rayscale.autoscaler.scheduling.model import NodeState, Strategy
from tests.differential.compare import (
    RAY_CAP_CAUSES,
    Difference,
    Outcome,
)

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
        # Ray idles single hosts of a replica. Or it cut single hosts at the cap, where rayscale
        # cut whole replicas or other hosts: what is left differs, so the work lands elsewhere
        # and a host idle in Ray's plan holds work in rayscale's.
        replica = difference.subject in _replica_hosts(outcome)
        return (replica and _splits_replica(outcome, {"IDLE"})) or _splits_replica(
            outcome, set(RAY_CAP_CAUSES)
        )
    if difference.kind == "idle-only-rayscale":
        # Ray kept the host for work it placed with part of a replica (or beside a replica it
        # split at the cap); rayscale, unable to place that work whole, found the host idle.
        return _partial_launch(outcome) or _splits_replica(outcome, set(RAY_CAP_CAUSES))
    if difference.kind == "cap-removals":
        return _splits_replica(outcome, set(RAY_CAP_CAUSES))
    if difference.kind.startswith(PLACEMENT_KINDS):
        return _partial_launch(outcome) or _splits_replica(outcome, set(RAY_CAP_CAUSES))
    return False


@predicate("cap-keeps-minimum")
def _cap_keeps_minimum(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """Ray's worker cap removed hosts of a group below its minimum (the removals, and what they freed)."""
    snap, ray = outcome.snapshot, outcome.ray
    # The removals themselves, what they freed, and the idle hosts that freed room changed.
    kinds = ("cap-removals", "idle-only-ray", "idle-only-rayscale")
    if difference.kind not in kinds and not difference.kind.startswith(PLACEMENT_KINDS):
        return False
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


def _packs_with_selectors(outcome: Outcome) -> bool:
    return any(
        g.strategy is Strategy.STRICT_PACK and len(set(g.bundle_selectors)) > 1
        for g in outcome.snapshot.gangs
    )


@predicate("strict-pack-split-by-selectors")
def _strict_pack_split(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """Gone (or explained by another entry) when every bundle of a STRICT_PACK group carries all
    of the group's selectors, so that Ray packs them together too."""
    if not _packs_with_selectors(outcome):
        return False
    other = outcome.variant_outcome("merged-packs")
    if other is None:
        return False
    same = [d for d in other.differences if (d.kind, d.subject) == (difference.kind, difference.subject)]
    return all(allowlisted(other, d, others) is not None for d in same)
