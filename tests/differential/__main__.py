"""`python -m tests.differential`: many generated cases against Ray's scheduler (`make fuzz`).

    python -m tests.differential --cases 20000 --seed 1 [--features all] [--jobs 2] [--shrink 2]
    python -m tests.differential --write-docs   # the allowlist table into docs/autoscaling.md
    python -m tests.differential --print-seed   # the seed of this commit (what make differential runs)

The same seed, case count and features give the same cases (``--jobs`` only splits them over
processes, each with its own Ray oracle).

Prints the number of cases and differences by kind, the allowlisted ones by id, and the shrunk
failure files (tests/differential/failures/); exits 1 when a difference is not allowlisted.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tests.differential import allowlist, generate, runner
from tests.differential.oracle import Oracle, ray_available, ray_python
from tests.differential.seed import commit_seed

DOCS = Path(__file__).resolve().parents[2] / "docs" / "autoscaling.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.differential", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20000, help="generated cases to run")
    parser.add_argument("--seed", type=int, default=None, help="generator seed (default: this commit's)")
    parser.add_argument(
        "--features", choices=("default", "all"), default="default", help="all: the switched-off features too"
    )
    parser.add_argument("--jobs", type=int, default=1, help="processes (each with its own Ray oracle)")
    parser.add_argument("--print-seed", action="store_true", help="print this commit's seed and exit")
    parser.add_argument(
        "--shrink", type=int, default=1, help="failing cases to shrink per kind of difference"
    )
    parser.add_argument("--shrink-seconds", type=float, default=300.0, help="time budget for shrinking")
    parser.add_argument("--out", type=Path, default=runner.FAILURES, help="where failure files go")
    parser.add_argument(
        "--write-docs", action="store_true", help="only rewrite the allowlist table in docs/autoscaling.md"
    )
    args = parser.parse_args(argv)
    if args.print_seed:
        print(commit_seed())
        return 0
    if args.write_docs:
        text = DOCS.read_text(encoding="utf-8")
        DOCS.write_text(allowlist.docs_section(text, allowlist.load()), encoding="utf-8")
        print(f"wrote the allowlist table into {DOCS}")
        return 0
    if not ray_available():
        print(f"{ray_python()} has no ray=={'2.60.0'}; set RAYSCALE_RAY_PYTHON", file=sys.stderr)
        return 2
    seed = commit_seed() if args.seed is None else args.seed
    features = generate.Features.all() if args.features == "all" else generate.DEFAULT
    print(f"differential: seed {seed}, {args.cases} cases, features {features.names() or 'default'}")
    start = time.monotonic()
    jobs = max(1, args.jobs)
    with ProcessPoolExecutor(jobs) as pool:
        parts = [
            pool.submit(_scan, seed, range(j, args.cases, jobs), args.shrink, features, j == 0)
            for j in range(jobs)
        ]
        report = runner.Report(seed, features.names())
        for part in parts:
            report.merge(part.result(), args.shrink)
    with Oracle() as oracle:
        runner.shrink_failures(
            oracle, report, shrink_seconds=args.shrink_seconds, out_dir=args.out, features=features
        )
    print(report.summary())
    print(f"({time.monotonic() - start:.0f} s)")
    return 1 if report.by_kind else 0


def _scan(
    seed: int, indexes: range, shrink: int, features: generate.Features, progress: bool
) -> runner.Report:
    with Oracle() as oracle:
        return runner.scan(
            oracle, seed, indexes, shrink_per_kind=shrink, features=features, progress=progress
        )


if __name__ == "__main__":
    sys.exit(main())
