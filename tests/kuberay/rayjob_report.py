"""The RayJob differential's report: ``python -m tests.kuberay.rayjob_report [CASE_GLOB ...]``.

Prints the figures (cases, steps, fields compared, agreeing, allowlisted by entry, unexplained),
then every difference of the cases the globs name (case file stems; none: only the unexplained
ones), each marked with the allowlist entry that explains it or ``UNEXPLAINED``.
"""

from __future__ import annotations

import fnmatch
import sys

from tests.kuberay import rayjob_allowlist
from tests.kuberay.test_rayjob_against_kuberay import differences, tally


def main(argv: list[str]) -> int:
    allowlist = rayjob_allowlist.load()
    figures = tally()
    print(", ".join(f"{k} {v}" for k, v in figures.items()))
    everything = [d for ds in differences().values() for d in ds]
    verdict = rayjob_allowlist.judge(everything, allowlist)
    for entry in allowlist:
        print(f"  {entry.id}: {verdict.used[entry.id]}")
    for stem, found_in_case in sorted(differences().items()):
        shown = any(fnmatch.fnmatch(stem, g) for g in argv)
        for d in found_in_case:
            found = next((e.id for e in allowlist if e.pattern_for(d, refused=False)), None)
            if shown or found is None:
                print(f"{d.document} [{found or 'UNEXPLAINED'}] {d}")
    return 1 if figures["unexplained"] or verdict.stale(allowlist) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
