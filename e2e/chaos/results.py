"""Outcomes of fault runs, and the table they make in docs/reliability.md.

Every fault run (one fault injected while clusters scale, the invariants checked throughout)
records one `Outcome` as a JSON line in ``e2e/.results/chaos/<suite>.jsonl``, with its provenance
(date, commit, machine, load average, command) as it was recorded. ``python -m e2e.chaos.results
--write-docs`` folds all of them into the table "Fault runs" of docs/reliability.md: per fault, the
runs, the invariant violations, and the time the clusters took to converge after the fault ended
(median and max); it also stores them in bench/results/chaos.json, from which ``--render-only``
writes the table again. The disruption runs (suite ``disruption``, e2e/chaos/test_disruptions.py)
go to a section of their own, "Disruption runs" (`e2e.chaos.disruption_results`); each part is
written only when the recorded runs include some of its own.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench import provenance
from bench.docs import Block
from e2e.chaos import disruption_results

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "e2e" / ".results" / "chaos"
DOCS = ROOT / "docs" / "reliability.md"
TITLE = "## Fault runs"
BLOCK = Block("e2e.chaos.results", "bench/results/chaos.json")
COMMAND = "make chaos"


@dataclasses.dataclass(frozen=True)
class Outcome:
    suite: str  # "control-plane" (kwok pods) or "ray" (a real Ray through the bridge)
    fault: str  # e.g. "leader frozen 20 s (SIGSTOP), then resumed"
    violations: tuple[str, ...]  # each names the invariant and what was seen
    converged_seconds: float | None  # None: did not converge within the run's deadline
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)  # counts, e.g. pods created
    # date, commit, machine, load average and command when the outcome was recorded (`record`)
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)

    def record(self, results: Path = RESULTS) -> None:
        results.mkdir(parents=True, exist_ok=True)
        recorded = self.provenance or provenance.end(provenance.begin(provenance.command()))
        line = json.dumps(
            {**dataclasses.asdict(self), "violations": list(self.violations), "provenance": recorded}
        )
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


def _span(values: list[Any], fmt: str = "{}") -> Any:
    """One value, "first to last" of several (sorted), or None when none was recorded."""
    known = sorted({fmt.format(v) for v in values if v is not None})
    return None if not known else known[0] if len(known) == 1 else f"{known[0]} to {known[-1]}"


def recorded(outcomes: list[Outcome]) -> dict[str, Any]:
    """The runs' provenance folded into one: the span of their dates and load averages, their commits."""
    p = [o.provenance for o in outcomes]
    commits = sorted({x["commit"] for x in p if x.get("commit")})
    loads = [x.get(k) for x in p for k in ("load_start", "load_end")]
    cores = _span([x.get("cores") for x in p])
    memory = _span([x.get("memory_gib") for x in p], "{:.1f}")
    return {
        "provenance": {
            "date": _span([x.get("date") for x in p]),
            "commit": ", ".join(commits) or None,
            "cores": cores,
            "memory_gib": None if memory is None else float(memory.split()[0]),
            "load_start": min((v for v in loads if v is not None), default=None),
            "load_end": max((v for v in loads if v is not None), default=None),
            "command": COMMAND if any(p) else None,
        }
    }


def section(outcomes: list[Outcome]) -> str:
    faults = len(outcomes)
    violations = sum(len(o.violations) for o in outcomes)
    listed = [f"- {o.fault}: {v}" for o in outcomes for v in o.violations]
    body = [
        TITLE,
        "",
        f"{faults} faults injected, {violations} invariant violations."
        f" {provenance.sentence(recorded(outcomes))} The load averages are the lowest and the highest"
        ' recorded as the runs ended. "Converged after" is timed from the fault\'s end: for the'
        " leader SIGKILL, the moment the standby holds the Lease, which it takes only once the Lease"
        " has not changed for its duration (15 s) after the kill.",
        "",
        table(outcomes),
        "",
    ]
    if listed:
        body += ["Violations:", "", *listed, ""]
    return "\n".join(body)


def write_docs(outcomes: list[Outcome], docs: Path = DOCS) -> None:
    BLOCK.write(docs, section(outcomes))


def store(outcomes: list[Outcome], stored: Path = ROOT / BLOCK.source) -> None:
    stored.write_text(json.dumps([dataclasses.asdict(o) for o in outcomes], indent=2) + "\n")


def load_stored(stored: Path = ROOT / BLOCK.source) -> list[Outcome]:
    return [
        Outcome(**(raw | {"violations": tuple(raw["violations"])})) for raw in json.loads(stored.read_text())
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--write-docs", action="store_true", help="replace the section in docs/reliability.md"
    )
    parser.add_argument(
        "--render-only", action="store_true", help=f"replace the section from {BLOCK.source} alone"
    )
    args = parser.parse_args(argv)
    if args.render_only and not (ROOT / BLOCK.source).exists():
        parser.error(f"{BLOCK.source}: no stored results; run make chaos first")
    outcomes = load_stored() if args.render_only else load()
    # The disruption runs have a section of their own; each part is written only from runs that
    # made outcomes for it, so one module run alone leaves the other's table as it stands.
    faults = [o for o in outcomes if o.suite != disruption_results.SUITE]
    disruptions = [o for o in outcomes if o.suite == disruption_results.SUITE]
    if args.render_only or (args.write_docs and faults):
        write_docs(faults)
    if args.write_docs and faults:
        store(faults)
    if args.write_docs and disruptions:
        disruption_results.write_docs(disruptions, DOCS)
    if faults or not disruptions:
        print(section(faults))
    if disruptions:
        print(disruption_results.section(disruptions))
    return 1 if any(o.violations or o.converged_seconds is None for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
