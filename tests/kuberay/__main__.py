"""`python -m tests.kuberay`: what rayscale creates for RayClusters, compared with KubeRay.

    python -m tests.kuberay                 # counts, allowlisted and known differences by theme
    python -m tests.kuberay --show ID ...   # every difference of some documents (ids or globs)
    python -m tests.kuberay --write-docs    # the allowlist and known tables into docs/controller.md

Builds the KubeRay oracle first (tools/kuberay-oracle/build.sh; minutes the first time). Exits 1
when a difference is in neither list or an entry is stale.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tests.kuberay import entries, oracle, runner
from tests.kuberay.compare import compare

DOCS = Path(__file__).resolve().parents[2] / "docs" / "controller.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.kuberay", description=__doc__.splitlines()[0])
    parser.add_argument("--show", nargs="+", metavar="ID", help="print every difference of these documents")
    parser.add_argument(
        "--write-docs", action="store_true", help="only rewrite the tables in docs/controller.md"
    )
    args = parser.parse_args(argv)
    allowlist, known = entries.load_allowlist(), entries.load_known()
    if args.write_docs:
        text = DOCS.read_text(encoding="utf-8")
        DOCS.write_text(entries.docs_section(text, allowlist, known), encoding="utf-8")
        print(f"wrote the allowlist and known tables into {DOCS}")
        return 0
    start = time.monotonic()
    built = oracle.build()
    if args.show:
        for doc, kuberay, rayscale in runner.render_all(built):
            if any(entries.glob_match(pattern, doc.id, value=True) for pattern in args.show):
                print(f"== {doc.id}")
                for d in compare(doc.id, kuberay, rayscale):
                    print(f"   {d}")
        return 0
    report = runner.run(built, allowlist, known)
    print(report.summary())
    print(f"({time.monotonic() - start:.1f} s, KubeRay {oracle.kuberay_version()})")
    return 1 if report.unexplained or report.stale else 0


if __name__ == "__main__":
    sys.exit(main())
