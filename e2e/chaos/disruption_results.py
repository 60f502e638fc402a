"""The "Disruption runs" section of docs/reliability.md, from the outcomes of
e2e/chaos/test_disruptions.py (suite ``disruption``, recorded by `e2e.chaos.results.Outcome`).

One row per disruption: the runs, the Ray tasks running on the disrupted hosts and what became of
them (lost: failed; run again: restarted elsewhere), the worker pods deleted, and the seconds
from the notice to the drain asked, to the work's end (when the test let the tasks end), to the
replacement pod made and to the old pods deleted (median / max), then the invariant violations.
The section is replaced as a whole (the rest of the page stays), from the outcomes of the runs
just made: `python -m e2e.chaos.results --write-docs` writes it when there are any.
"""

from __future__ import annotations

import statistics
import textwrap
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import provenance
from bench.docs import replace_section

SUITE = "disruption"
TITLE = "## Disruption runs"


def _spread(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "-"
    return f"{statistics.median(known):.1f} / {max(known):.1f}"


def _sum(runs: Sequence[Any], key: str) -> int:
    return sum(int(o.detail.get(key) or 0) for o in runs)


def table(outcomes: Sequence[Any]) -> str:
    rows: dict[str, list[Any]] = defaultdict(list)
    for o in outcomes:
        rows[o.fault].append(o)
    lines = [
        "| disruption | runs | tasks | lost (failed) | run again | pods deleted | drain asked (s)"
        " | work ended (s) | replacement made (s) | pods deleted (s) | invariant violations |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for fault, runs in rows.items():
        seconds = [
            _spread([o.detail.get(key) for o in runs])
            for key in ("drain_asked_s", "work_ended_s", "replacement_made_s", "drained_s")
        ]
        violations = sum(len(o.violations) for o in runs)
        lines.append(
            f"| {fault} | {len(runs)} | {_sum(runs, 'tasks')} | {_sum(runs, 'failed')}"
            f" | {_sum(runs, 'run_again')} | {_sum(runs, 'pods_deleted')} | {' | '.join(seconds)}"
            f" | {violations} |"
        )
    return "\n".join(lines)


def _recorded(outcomes: Sequence[Any]) -> dict[str, Any]:
    """The runs' provenance: the first run's, with the span of dates, the load averages' extremes,
    the commits and the commands."""
    p = [o.provenance for o in outcomes]
    dates = sorted({str(x["date"]) for x in p if x.get("date")})
    loads = [x.get(k) for x in p for k in ("load_start", "load_end")]
    known = [v for v in loads if v is not None]
    commands = sorted({str(x["command"]) for x in p if x.get("command")})
    return {
        "provenance": {
            **(p[0] if p else {}),
            "date": f"{dates[0]} to {dates[-1]}" if len(dates) > 1 else (dates[0] if dates else None),
            "commit": ", ".join(sorted({str(x["commit"]) for x in p if x.get("commit")})) or None,
            "load_start": min(known, default=None),
            "load_end": max(known, default=None),
            "command": "; ".join(commands) or None,
        }
    }


def section(outcomes: Sequence[Any]) -> str:
    violations = [f"- {o.fault}: {v}" for o in outcomes for v in o.violations]
    stuck = sum(1 for o in outcomes if o.converged_seconds is None)
    intro = (
        f"{len(outcomes)} disruptions, {len(violations)} invariant violations, {stuck} not converged."
        f" {provenance.sentence(_recorded(outcomes))} The load averages are the lowest and the highest"
        " recorded. Seconds are counted from the notice (the cordon, the taint, `kubectl drain`'s"
        ' start); "work ended" is when the test let the tasks end; "pods deleted" is when the'
        " last disrupted pod was named in `workersToDelete`, marked for deletion or deleted,"
        " whichever the watches saw first."
    )
    body = [TITLE, "", textwrap.fill(intro, width=100, break_on_hyphens=False), "", table(outcomes), ""]
    if violations:
        body += ["Violations:", "", *violations, ""]
    return "\n".join(body)


def write_docs(outcomes: Sequence[Any], docs: Path) -> None:
    """Replace the section `TITLE` of `docs` (or add it at the end); the rest stays as it is."""
    replace_section(docs, TITLE, section(outcomes))
