"""Known rayscale issues the judge finds (known.yaml: id, issue, reason; one predicate per id).

Unlike the allowlist (improvements over Ray), these are rayscale's own defects, recorded so that
the suite stays green while the issue is open; the report counts them as ``known:<id>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rayscale.autoscaler.scheduling.model import RemovalCause
from tests.differential.allowlist import COUNT_KINDS, read_entries
from tests.differential.compare import Difference, Outcome
from tests.differential.ray_quirks import count_without, group_of

KNOWN = Path(__file__).resolve().parent / "known.yaml"
CAPS = (RemovalCause.MAX_WORKERS, RemovalCause.MAX_REPLICAS)


@dataclass(frozen=True, slots=True)
class Known:
    id: str
    issue: str
    reason: str


def load(path: Path = KNOWN) -> list[Known]:
    return [Known(*fields) for fields in read_entries(path, ("id", "issue", "reason"))]


def churn_groups(outcome: Outcome) -> frozenset[str]:
    """Groups that lose a host to a cap and launch a replica in the same pass."""
    decision = outcome.decision
    if decision is None:
        return frozenset()
    capped = {r.group for r in decision.terminate if r.reason in CAPS}
    return frozenset(g for g in capped if decision.groups[g].launch > 0)


def _cap_churn(outcome: Outcome, difference: Difference) -> bool:
    groups = churn_groups(outcome)
    if not groups:
        return False
    if difference.kind.startswith(COUNT_KINDS):
        return count_without(outcome, difference, groups)
    if difference.kind == "cap-removals":
        return any(group_of(outcome, r) in groups for r in difference.subject.split(",") if r)
    if difference.kind.startswith("idle-only-"):
        return group_of(outcome, difference.subject) in groups
    return False


PREDICATES = {"cap-churn": _cap_churn}


def known(outcome: Outcome, difference: Difference, entries: list[Known]) -> str | None:
    """The id of the known issue that explains ``difference``, or None."""
    if outcome.ray.get("error") or outcome.decision is None:
        return None
    for entry in entries:
        fn = PREDICATES.get(entry.id)
        if fn is not None and fn(outcome, difference):
            return entry.id
    return None
