"""Runs generated cases through both schedulers, sorts out the differences, shrinks failures.

A difference that no allowlist entry recognises fails its case. For each kind of failing
difference the first cases showing it are shrunk and written to ``failures/<kind>-<case>.yaml``
as a scenario file, and ``rayscale simulate`` is run on the file to check that it replays.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import Snapshot
from tests.differential import allowlist, generate, known, scenario_io, shrink
from tests.differential.compare import Difference, Outcome, compare
from tests.differential.oracle import Oracle
from tests.differential.ray_case import to_ray, variant

FAILURES = Path(__file__).resolve().parent / "failures"
BATCH = 250
KNOWN_ISSUES = known.load()


@dataclass(slots=True)
class Failure:
    kind: str
    case_id: str
    path: Path
    differences: list[Difference]
    replay: str | None  # None: `rayscale simulate` replays the file; else what went wrong
    size: tuple[int, int]  # (elements before, after shrinking)


@dataclass(slots=True)
class Report:
    seed: int
    features: list[str] = field(default_factory=list)
    cases: int = 0
    failing_cases: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)  # failing differences per kind
    cases_by_kind: Counter[str] = field(default_factory=Counter)
    allowlisted: Counter[str] = field(default_factory=Counter)  # differences per allowlist id
    first: dict[str, tuple[str, str]] = field(default_factory=dict)  # kind -> (case id, detail)
    failures: list[Failure] = field(default_factory=list)
    to_shrink: dict[str, list[int]] = field(default_factory=dict)  # kind -> case indexes

    def merge(self, other: Report, shrink_per_kind: int) -> None:
        """Add another part of the same run (other case indexes)."""
        self.cases += other.cases
        self.failing_cases += other.failing_cases
        self.by_kind.update(other.by_kind)
        self.cases_by_kind.update(other.cases_by_kind)
        self.allowlisted.update(other.allowlisted)
        for kind, first in other.first.items():
            self.first.setdefault(kind, first)
        for kind, indexes in other.to_shrink.items():
            mine = self.to_shrink.setdefault(kind, [])
            mine[:] = sorted(mine + indexes)[:shrink_per_kind]

    def replay_command(self) -> str:
        features = " --features all" if self.features else ""
        return f"python -m tests.differential --seed {self.seed} --cases {self.cases}{features}"

    def summary(self) -> str:
        on = f" (features: {', '.join(self.features)})" if self.features else ""
        lines = [f"seed {self.seed}{on}: {self.cases} cases, {self.failing_cases} with differences"]
        if self.by_kind:
            lines.append("differences by kind (differences / cases):")
            for kind, n in sorted(self.by_kind.items()):
                lines.append(f"  {kind}: {n} / {self.cases_by_kind[kind]}  e.g. {self.first[kind][1]}")
        if self.allowlisted:
            lines.append("allowlisted by id:")
            lines += [f"  {entry}: {n}" for entry, n in sorted(self.allowlisted.items())]
        for f in self.failures:
            replay = "replays" if f.replay is None else f"does NOT replay: {f.replay}"
            lines.append(
                f"shrunk {f.kind} {f.case_id} ({f.size[0]} -> {f.size[1]} elements): {f.path} ({replay})"
            )
            lines += [f"    {d.kind}: {d.detail}" for d in f.differences]
        total = sum(self.by_kind.values())
        lines.append(
            f"cases run: {self.cases}; differences: {total} (allowlisted: {sum(self.allowlisted.values())})"
        )
        lines.append(f"replay: {self.replay_command()}  (or FUZZ_SEED={self.seed} make fuzz)")
        return "\n".join(lines)


def size(s: Snapshot) -> int:
    """How big a case is, for the shrink report."""
    return (
        len(s.groups)
        + len(s.nodes)
        + sum(d.count for d in s.demands)
        + sum(g.count * len(g.bundles) for g in s.gangs)
        + sum(c.count for c in s.constraints)
    )


def evaluate(
    oracle: Oracle, cases: Sequence[tuple[str, Snapshot]], *, roundtrip: bool = True
) -> list[Outcome]:
    """Both schedulers on every case, with the differences found (and whether it round-trips)."""
    outcomes: list[Outcome] = []
    for start in range(0, len(cases), BATCH):
        chunk = cases[start : start + BATCH]
        answers = oracle.ask([to_ray(case_id, snap) for case_id, snap in chunk])
        for (case_id, snap), ray in zip(chunk, answers, strict=True):
            try:
                decision, error = schedule(snap), None
            except Exception:
                decision, error = None, traceback.format_exc().strip().splitlines()[-1]
            outcome = Outcome(case_id, snap, decision, ray, error, ask_variant=_asker(oracle, case_id, snap))
            outcome.differences = compare(outcome)
            why = scenario_io.roundtrip(snap) if roundtrip else None
            if why is not None:
                outcome.differences.append(Difference("scenario-roundtrip", "", why))
            outcomes.append(outcome)
    return outcomes


def _asker(oracle: Oracle, case_id: str, snap: Snapshot) -> Callable[[str], dict[str, Any]]:
    def ask(name: str) -> dict[str, Any]:
        return oracle.ask([variant(to_ray(case_id, snap), name, snap)])[0]

    return ask


def split(
    outcome: Outcome, entries: list[allowlist.Entry], issues: list[known.Known] | None = None
) -> tuple[list[Difference], list[tuple[str, Difference]]]:
    """The failing differences of a case, and the allowlisted ones with their entry id (a known
    issue's as ``known:<id>``)."""
    issues = KNOWN_ISSUES if issues is None else issues
    failing, allowed = [], []
    for d in outcome.differences:
        entry = allowlist.allowlisted(outcome, d, entries)
        if entry is None:
            issue = known.known(outcome, d, issues)
            entry = None if issue is None else f"known:{issue}"
        if entry is None:
            failing.append(d)
        else:
            allowed.append((entry, d))
    return failing, allowed


def replay(path: Path, snapshot: Snapshot) -> str | None:
    """None when `rayscale simulate FILE` prints the decision the case gets in-process."""
    done = subprocess.run(
        [sys.executable, "-m", "rayscale.cli", "simulate", str(path), "--indent", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return done.stderr.strip() or f"exit code {done.returncode}"
    printed: dict[str, Any] = json.loads(done.stdout)
    printed.pop("elapsedSeconds", None)
    expected = json.loads(json.dumps(schedule(snapshot).to_dict()))
    return None if printed == expected else "the replayed decision differs from the case's"


def _comment(kind: str, outcome: Outcome, failing: list[Difference], seed: int, origin: str) -> str:
    ray = outcome.ray
    lines = [
        f"Differential test failure ({kind}): rayscale's scheduler vs Ray 2.60's ResourceDemandScheduler.",
        f"Generated case {origin} (seed {seed}), shrunk. Replay: rayscale simulate <this file>",
        "What differed:",
        *[f"  {d.kind}: {d.detail}" for d in failing],
        f"Ray: launch {ray.get('launch')}, infeasible demands {ray.get('infeasible_demands')}, "
        f"infeasible placement groups {len(ray.get('infeasible_pgs', []))}, "
        f"request_resources infeasible {ray.get('constraint_infeasible')}, "
        f"terminate {[(t['instance'], t['cause']) for t in ray.get('terminate', [])]}",
    ]
    return "\n".join(lines)


def _plain(d: Difference) -> dict[str, str]:
    return {"kind": d.kind, "subject": d.subject, "detail": d.detail}


def shrink_case(
    oracle: Oracle, entries: list[allowlist.Entry], outcome: Outcome, kind: str, deadline: float
) -> Outcome:
    """The smallest variant of ``outcome``'s case that still has a failing ``kind`` difference."""
    counter = iter(range(1 << 30))

    def still_fails(snaps: list[Snapshot]) -> list[bool]:
        if time.monotonic() > deadline:
            return [False] * len(snaps)
        ids = [(f"{outcome.case_id}~{next(counter)}", s) for s in snaps]
        outcomes = evaluate(oracle, ids, roundtrip=kind == "scenario-roundtrip")
        return [any(d.kind == kind for d in split(o, entries)[0]) for o in outcomes]

    small, _ = shrink.shrink(outcome.snapshot, still_fails)
    return evaluate(oracle, [(outcome.case_id, small)])[0]


def record(
    oracle: Oracle,
    entries: list[allowlist.Entry],
    outcome: Outcome,
    kind: str,
    seed: int,
    deadline: float,
    out_dir: Path = FAILURES,
) -> Failure:
    small = shrink_case(oracle, entries, outcome, kind, deadline)
    failing = split(small, entries)[0]
    path = out_dir / f"{kind.replace(':', '-')}-{outcome.case_id}.yaml"
    scenario_io.write(path, small.snapshot, _comment(kind, small, failing, seed, outcome.case_id))
    scenario_io.write_answer(path, small.case_id, small.ray, [_plain(d) for d in failing])
    return Failure(
        kind,
        outcome.case_id,
        path,
        failing,
        replay(path, small.snapshot),
        (size(outcome.snapshot), size(small.snapshot)),
    )


def scan(
    oracle: Oracle,
    seed: int,
    indexes: range,
    *,
    shrink_per_kind: int = 1,
    entries: list[allowlist.Entry] | None = None,
    progress: bool = False,
    features: generate.Features = generate.DEFAULT,
) -> Report:
    """Cases ``indexes`` of run ``seed``, compared and counted; the first failing cases of each
    kind are noted (``to_shrink``) for ``shrink_failures``."""
    entries = allowlist.load() if entries is None else entries
    report = Report(seed, features.names())
    for start in range(0, len(indexes), BATCH):
        chunk = [(f"s{seed}-{i}", generate.case(seed, i, features)) for i in indexes[start : start + BATCH]]
        for outcome in evaluate(oracle, chunk):
            report.cases += 1
            failing, allowed = split(outcome, entries)
            for entry, _ in allowed:
                report.allowlisted[entry] += 1
            if failing:
                report.failing_cases += 1
            for d in failing:
                report.by_kind[d.kind] += 1
                report.first.setdefault(d.kind, (outcome.case_id, d.detail))
            for kind in dict.fromkeys(d.kind for d in failing):
                report.cases_by_kind[kind] += 1
                picked = report.to_shrink.setdefault(kind, [])
                if len(picked) < shrink_per_kind:
                    picked.append(int(outcome.case_id.rsplit("-", 1)[1]))
        if progress:
            print(
                f"  {report.cases}/{len(indexes)} cases, {report.failing_cases} with differences",
                file=sys.stderr,
            )
    return report


def shrink_failures(
    oracle: Oracle,
    report: Report,
    *,
    shrink_seconds: float = 60.0,
    out_dir: Path = FAILURES,
    entries: list[allowlist.Entry] | None = None,
    features: generate.Features = generate.DEFAULT,
) -> None:
    """Shrink the noted failing cases and write them as scenario files (``report.failures``)."""
    entries = allowlist.load() if entries is None else entries
    chosen = [(kind, i) for kind, indexes in sorted(report.to_shrink.items()) for i in indexes]
    end = time.monotonic() + shrink_seconds
    for n, (kind, i) in enumerate(chosen):
        # Each case gets an equal share of what is left of the budget.
        now = time.monotonic()
        deadline = now + max(end - now, 0.0) / (len(chosen) - n)
        outcome = evaluate(oracle, [(f"s{report.seed}-{i}", generate.case(report.seed, i, features))])[0]
        report.failures.append(record(oracle, entries, outcome, kind, report.seed, deadline, out_dir))


def run(
    oracle: Oracle,
    seed: int,
    count: int,
    *,
    shrink_per_kind: int = 1,
    shrink_seconds: float = 60.0,
    out_dir: Path = FAILURES,
    entries: list[allowlist.Entry] | None = None,
    progress: bool = False,
    features: generate.Features = generate.DEFAULT,
) -> Report:
    """``count`` cases of run ``seed`` in this process, failures shrunk."""
    report = scan(
        oracle,
        seed,
        range(count),
        shrink_per_kind=shrink_per_kind,
        entries=entries,
        progress=progress,
        features=features,
    )
    shrink_failures(
        oracle, report, shrink_seconds=shrink_seconds, out_dir=out_dir, entries=entries, features=features
    )
    return report


def replay_all(paths: Iterable[Path]) -> dict[Path, str | None]:
    """Whether each scenario file replays (exit code 0 from `rayscale simulate`)."""
    out: dict[Path, str | None] = {}
    for path in paths:
        done = subprocess.run(
            [sys.executable, "-m", "rayscale.cli", "simulate", str(path), "--indent", "0"],
            capture_output=True,
            text=True,
            check=False,
        )
        out[path] = None if done.returncode == 0 else done.stderr.strip()
    return out
