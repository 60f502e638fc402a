"""Known rayscale issues the judge finds (known.yaml: id, issue, reason; one predicate per id).

Unlike the allowlist (improvements over Ray), these are rayscale's own defects, recorded so that
the suite stays green while the issue is open; the report counts them as ``known:<id>``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.differential.allowlist import read_entries
from tests.differential.compare import Difference, Outcome

KNOWN = Path(__file__).resolve().parent / "known.yaml"


@dataclass(frozen=True, slots=True)
class Known:
    id: str
    issue: str
    reason: str


def load(path: Path = KNOWN) -> list[Known]:
    return [Known(*fields) for fields in read_entries(path, ("id", "issue", "reason"))]


# known issue id -> a predicate that recognises only its differences (none open)
PREDICATES: dict[str, Callable[[Outcome, Difference], bool]] = {}


def known(outcome: Outcome, difference: Difference, entries: list[Known]) -> str | None:
    """The id of the known issue that explains ``difference``, or None."""
    if outcome.ray.get("error") or outcome.decision is None:
        return None
    for entry in entries:
        fn = PREDICATES.get(entry.id)
        if fn is not None and fn(outcome, difference):
            return entry.id
    return None
