"""Outcomes of fault runs, and the table they make in docs/reliability.md.

Every fault run (one fault injected while clusters scale, the invariants checked throughout)
records one `Outcome` as a JSON line in ``e2e/.results/chaos/<suite>.jsonl``. ``python -m
e2e.chaos.results --write-docs`` folds all of them into the table "Fault runs" of
docs/reliability.md: per fault, the runs, the invariant violations, and the time the clusters took
to converge after the fault ended (median and max).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "e2e" / ".results" / "chaos"
DOCS = ROOT / "docs" / "reliability.md"
TITLE = "## Fault runs"


@dataclasses.dataclass(frozen=True)
class Outcome:
    suite: str  # "control-plane" (kwok pods) or "ray" (a real Ray through the bridge)
    fault: str  # e.g. "leader frozen 20 s (SIGSTOP), then resumed"
    violations: tuple[str, ...]  # each names the invariant and what was seen
    converged_seconds: float | None  # None: did not converge within the run's deadline
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)  # counts, e.g. pods created

    def record(self, results: Path = RESULTS) -> None:
        results.mkdir(parents=True, exist_ok=True)
        line = json.dumps({**dataclasses.asdict(self), "violations": list(self.violations)})
        with (results / f"{self.suite}.jsonl").open("a") as out:
            out.write(line + "\n")


def load(results: Path = RESULTS) -> list[Outcome]:
    out: list[Outcome] = []
    for path in sorted(results.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                raw = json.loads(line)
                raw["violations"] = tuple(raw["violations"])
                out.append(Outcome(**raw))
    return out


def _seconds(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} / {max(values):.1f}" if values else "-"


def table(outcomes: list[Outcome]) -> str:
    rows: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        rows[(o.suite, o.fault)].append(o)
    lines = [
        "| suite | fault | runs | invariant violations | not converged | converged after (s, median / max) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for (suite, fault), runs in rows.items():
        violations = sum(len(o.violations) for o in runs)
        stuck = sum(1 for o in runs if o.converged_seconds is None)
        times = [o.converged_seconds for o in runs if o.converged_seconds is not None]
        lines.append(f"| {suite} | {fault} | {len(runs)} | {violations} | {stuck} | {_seconds(times)} |")
    return "\n".join(lines)


def section(outcomes: list[Outcome]) -> str:
    when = datetime.date.today().isoformat()
    machine = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores"
    faults = len(outcomes)
    violations = sum(len(o.violations) for o in outcomes)
    listed = [f"- {o.fault}: {v}" for o in outcomes for v in o.violations]
    body = [
        TITLE,
        "",
        f"`make chaos` on {when} ({machine}): {faults} faults injected, {violations} invariant violations.",
        "",
        table(outcomes),
        "",
    ]
    if listed:
        body += ["Violations:", "", *listed, ""]
    return "\n".join(body)


def write_docs(outcomes: list[Outcome], docs: Path = DOCS) -> None:
    text = docs.read_text() if docs.exists() else "# Reliability\n"
    new = section(outcomes)
    start = text.find(TITLE)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + new
    else:
        end = text.find("\n## ", start + len(TITLE))
        text = text[:start] + new + (text[end + 1 :] if end >= 0 else "")
    docs.write_text(text.rstrip("\n") + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--write-docs", action="store_true", help="replace the section in docs/reliability.md"
    )
    args = parser.parse_args(argv)
    outcomes = load()
    if args.write_docs:
        write_docs(outcomes)
    print(section(outcomes))
    return 1 if any(o.violations or o.converged_seconds is None for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
