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

from tests.differential.compare import (
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


def read_entries(path: Path, fields: tuple[str, ...]) -> list[list[str]]:
    """The entries of a YAML list, each with exactly ``fields`` (text on one line), in order."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    out = []
    for item in data:
        if set(item) != set(fields):
            raise ValueError(f"{path}: each entry has exactly {', '.join(fields)}: {item}")
        out.append([" ".join(str(item[f]).split()) for f in fields])
    return out


def load(path: Path = ALLOWLIST) -> list[Entry]:
    return [Entry(*fields) for fields in read_entries(path, ("id", "reason"))]


# ----------------------------------------------------------------------------- predicates


PREDICATES: dict[str, Predicate] = {}

# What no entry excuses: a decision that loses work, puts it where it does not fit, removes a
# busy draining host, or that the harness cannot read.
NEVER = {
    "unaccounted-demand",
    "unaccounted-gang",
    "unaccounted-constraint",
    "silent-drop",
    "placement-replay",
    "removes-busy-draining",
    "cap-churn",
    "below-minimum",
    "harness",
    "scenario-roundtrip",
    "rayscale-error",
    "ray-error",
}


def predicate(entry_id: str) -> Callable[[Predicate], Predicate]:
    def register(fn: Predicate) -> Predicate:
        PREDICATES[entry_id] = fn
        return fn

    return register


def allowlisted(outcome: Outcome, difference: Difference, entries: list[Entry]) -> str | None:
    """The id of the first entry whose predicate recognises ``difference``, or None."""
    if outcome.ray.get("error") or outcome.decision is None or difference.kind in NEVER:
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

COUNT_KINDS = ("more-hosts:", "more-accelerators:")
GROUP_SUBJECTS = (*COUNT_KINDS, "cap-removals")


def same_difference(difference: Difference, other: Difference) -> bool:
    """The same difference in another answer (a group list as subject may change)."""
    if other.kind != difference.kind:
        return False
    return difference.kind.startswith(GROUP_SUBJECTS) or other.subject == difference.subject


def gone_in_variant(outcome: Outcome, difference: Difference, others: list[Entry], name: str) -> bool:
    """Gone (or explained by another entry) when Ray answers the ``name`` variant of the case."""
    other = outcome.variant_outcome(name)
    if other is None:
        return False
    same = [d for d in other.differences if same_difference(difference, d)]
    return all(allowlisted(other, d, others) is not None for d in same)


# The entries register themselves (they use the helpers above).
from tests.differential import counterfactual, ray_quirks  # noqa: E402, F401
