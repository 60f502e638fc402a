"""Render every document on both sides, compare, and sort each difference into an entry.

One oracle process renders all documents; rayscale renders them in this process. A difference
goes to the first allowlist entry that explains it, else to the first known entry, else it is
unexplained. An entry, a pattern or a ``where`` item that explains nothing is stale: the
difference it was written for is gone, so it must go too.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from tests.kuberay import documents, generated, lifecycle, rayscale_side
from tests.kuberay.compare import Difference, compare
from tests.kuberay.entries import Entry, glob_match
from tests.kuberay.oracle import Oracle

Rendered = list[tuple[documents.Document, dict[str, Any], dict[str, Any]]]


@dataclasses.dataclass
class Report:
    documents: list[str]
    #: documents whose renderings do not differ at all
    identical: list[str]
    #: documents that differ only in allowlisted ways
    deliberate_only: list[str]
    allowed: dict[str, list[Difference]]
    known: dict[str, list[Difference]]
    unexplained: list[Difference]
    stale: list[str]
    known_entries: list[Entry]

    @property
    def differences(self) -> int:
        return (
            sum(map(len, self.allowed.values())) + sum(map(len, self.known.values())) + len(self.unexplained)
        )

    def summary(self, *, limit: int = 60) -> str:
        lines = [
            f"{len(self.documents)} RayClusters and lifecycle steps judged by KubeRay and rayscale: "
            f"{len(self.identical)} identical, {len(self.deliberate_only)} more differ only deliberately; "
            f"{self.differences} differences",
            f"  allowlisted: {sum(map(len, self.allowed.values()))} in {len(self.allowed)} entries",
        ]
        for entry_id, diffs in sorted(self.allowed.items()):
            lines.append(f"    {entry_id}: {len(diffs)}")
        themes: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
        for e in self.known_entries:
            diffs = self.known.get(e.id, [])
            themes[e.theme].append((e.id, len(diffs), len({d.document for d in diffs})))
        lines.append(f"  known: {sum(map(len, self.known.values()))} in {len(self.known)} entries")
        for theme, items in sorted(themes.items()):
            lines.append(f"    {theme}: {sum(n for _, n, _ in items)}")
            lines += [f"      {i}: {n} in {docs} documents" for i, n, docs in items]
        if self.unexplained:
            lines.append(f"  UNEXPLAINED: {len(self.unexplained)} (in neither allowlist.yaml nor known.yaml)")
            by_doc: dict[str, list[Difference]] = defaultdict(list)
            for d in self.unexplained:
                by_doc[d.document].append(d)
            shown = 0
            for doc, diffs in by_doc.items():
                lines.append(f"    {doc}:")
                for d in diffs:
                    if shown == limit:
                        lines.append(f"    ... {len(self.unexplained) - limit} more")
                        return "\n".join(lines)
                    lines.append(f"      {d}")
                    shown += 1
        if self.stale:
            lines.append(f"  STALE: {len(self.stale)} (explain nothing any more; remove them)")
            lines += [f"    {s}" for s in self.stale]
        return "\n".join(lines)


def render_all(oracle: Oracle) -> Rendered:
    """Every document (samples, examples, cases, then the generated ones) with KubeRay's and
    rayscale's answers."""
    docs = documents.load(oracle.samples_dir) + generated.load()
    answers = oracle.render([d.body for d in docs])
    return [(d, a, rayscale_side.render(d.body)) for d, a in zip(docs, answers, strict=True)]


def classify(
    compared: list[tuple[str, bool, list[Difference]]], allowlist: list[Entry], known: list[Entry]
) -> Report:
    """``compared``: (document id, refused by both sides, its differences) per document."""
    allowed: dict[str, list[Difference]] = defaultdict(list)
    known_hits: dict[str, list[Difference]] = defaultdict(list)
    used_patterns: set[tuple[str, int]] = set()
    used_where: set[tuple[str, str]] = set()
    unexplained: list[Difference] = []
    identical, deliberate_only = [], []
    for doc, refused, diffs in compared:
        if not diffs:
            identical.append(doc)
        only_allowed = bool(diffs)
        for d in diffs:
            hit = _first(allowlist, d, refused) or _first(known, d, refused)
            if hit is None:
                unexplained.append(d)
                only_allowed = False
                continue
            entry, index = hit
            used_patterns.add((entry.id, index))
            used_where.update((entry.id, w) for w in entry.where if glob_match(w, d.document, value=True))
            if entry in allowlist:
                allowed[entry.id].append(d)
            else:
                known_hits[entry.id].append(d)
                only_allowed = False
        if only_allowed:
            deliberate_only.append(doc)
    stale = []
    for entry in allowlist + known:
        for i, pattern in enumerate(entry.patterns):
            if (entry.id, i) not in used_patterns:
                stale.append(f"{entry.id}: pattern {pattern}")
        for w in entry.where:
            if (entry.id, w) not in used_where:
                stale.append(f"{entry.id}: where {w}")
    return Report(
        documents=[doc for doc, _, _ in compared],
        identical=identical,
        deliberate_only=deliberate_only,
        allowed=dict(allowed),
        known=dict(known_hits),
        unexplained=unexplained,
        stale=stale,
        known_entries=known,
    )


def _first(entries: list[Entry], d: Difference, refused: bool) -> tuple[Entry, int] | None:
    for entry in entries:
        pattern = entry.pattern_for(d, refused)
        if pattern is not None:
            return entry, entry.patterns.index(pattern)
    return None


def compare_all(rendered: Rendered) -> list[tuple[str, bool, list[Difference]]]:
    out = []
    for doc, kuberay, rayscale in rendered:
        refused = bool(kuberay.get("invalid")) and bool(rayscale.get("invalid"))
        out.append((doc.id, refused, compare(doc.id, kuberay, rayscale)))
    return out


def judge_all(oracle: Oracle) -> list[tuple[str, bool, list[Difference]]]:
    """Every document's differences, then every lifecycle step's (tests/kuberay/lifecycle.py)."""
    return compare_all(render_all(oracle)) + lifecycle.compare_all(lifecycle.run_all(oracle))


def run(oracle: Oracle, allowlist: list[Entry], known: list[Entry]) -> Report:
    return classify(judge_all(oracle), allowlist, known)
