"""`python -m tests.differential`: many generated cases against Ray's scheduler (`make fuzz`).

    python -m tests.differential --cases 5000 --seed 1 [--shrink 2] [--shrink-seconds 300]
    python -m tests.differential --write-docs   # the allowlist table into docs/autoscaling.md

Prints the number of cases and differences by kind, the allowlisted ones by id, and the shrunk
failure files (tests/differential/failures/); exits 1 when a difference is not allowlisted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tests.differential import allowlist, runner
from tests.differential.oracle import Oracle, ray_available, ray_python

DOCS = Path(__file__).resolve().parents[2] / "docs" / "autoscaling.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.differential", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000, help="generated cases to run")
    parser.add_argument("--seed", type=int, default=1, help="generator seed (same seed, same cases)")
    parser.add_argument(
        "--shrink", type=int, default=1, help="failing cases to shrink per kind of difference"
    )
    parser.add_argument("--shrink-seconds", type=float, default=300.0, help="time budget for shrinking")
    parser.add_argument("--out", type=Path, default=runner.FAILURES, help="where failure files go")
    parser.add_argument(
        "--write-docs", action="store_true", help="only rewrite the allowlist table in docs/autoscaling.md"
    )
    args = parser.parse_args(argv)
    if args.write_docs:
        text = DOCS.read_text(encoding="utf-8")
        DOCS.write_text(allowlist.docs_section(text, allowlist.load()), encoding="utf-8")
        print(f"wrote the allowlist table into {DOCS}")
        return 0
    if not ray_available():
        print(f"{ray_python()} has no ray=={'2.60.0'}; set RAYSCALE_RAY_PYTHON", file=sys.stderr)
        return 2
    start = time.monotonic()
    with Oracle() as oracle:
        report = runner.run(
            oracle,
            args.seed,
            args.cases,
            shrink_per_kind=args.shrink,
            shrink_seconds=args.shrink_seconds,
            out_dir=args.out,
            progress=True,
        )
    print(report.summary())
    print(f"({time.monotonic() - start:.0f} s)")
    return 1 if report.by_kind else 0


if __name__ == "__main__":
    sys.exit(main())
