"""tests/kuberay/rayjob_allowlist.yaml: the differences between rayscale's RayJob controller and
KubeRay's that are deliberate, and the judge that holds the RayJob differential to them.

The file is a list of entries in tests/kuberay/entries.py's allowlist format: ``id``, ``reason``
(what rayscale does instead and why it is better), ``match`` (patterns over a difference's object,
path and both values; the objects are rayjob_compare's parts: ``RayJob``, ``RayCluster/<name>``,
``Job/<name>``, ``Service/<name>``, ``Event/<reason>``, ``Ray/<n>``, ``RayResourceRequest/<name>``),
and optionally ``where`` (globs over ``<case>#<step>``). Every entry must be narrow (a path
without ``**``, at least one of the two values pinned, and a whole object or a ``*`` field only in
the cases its ``where`` names) and must explain at least one difference of the scripted cases: a
stale entry fails the differential as an unexplained difference does.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from tests.kuberay import entries
from tests.kuberay.compare import Difference
from tests.kuberay.entries import Entry

ALLOWLIST = Path(__file__).resolve().parent / "rayjob_allowlist.yaml"


def load(path: Path = ALLOWLIST) -> list[Entry]:
    return entries.load(path, known=False)


def too_broad(entry: Entry) -> list[str]:
    """Why an entry is not narrow (none when it is)."""
    problems = []
    anywhere = "*" in entry.where
    for p in entry.patterns:
        if "**" in p.path:
            problems.append(f"{entry.id}: {p}: name the path (no **)")
        if anywhere and (p.path in ("", "*") or "*" in p.path.rsplit(".", 1)[-1]):
            problems.append(f"{entry.id}: {p}: a whole object or any field only where the entry says")
        if p.kuberay in (None, "*") and p.rayscale in (None, "*"):
            problems.append(f"{entry.id}: {p}: pin at least one of the two values")
    return problems


@dataclasses.dataclass
class Verdict:
    unexplained: list[Difference]
    used: Counter[str]  # entry id -> how many differences it explains

    def stale(self, allowlist: Iterable[Entry]) -> list[str]:
        """The entries that explain nothing."""
        return [e.id for e in allowlist if not self.used[e.id]]


def judge(differences: Iterable[Difference], allowlist: list[Entry]) -> Verdict:
    verdict = Verdict([], Counter())
    for d in differences:
        entry = next((e for e in allowlist if e.pattern_for(d, refused=False) is not None), None)
        if entry is None:
            verdict.unexplained.append(d)
        else:
            verdict.used[entry.id] += 1
    return verdict
