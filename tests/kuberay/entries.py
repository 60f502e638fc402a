"""The two lists that explain differences: allowlist.yaml (deliberate) and known.yaml (to fix).

An entry matches a difference when one of its ``match`` patterns does: ``object`` and ``path``
are globs over the difference's object and path (``*`` stays within one path step, ``[*]`` is
any one list item or bracketed key, ``**`` is anything), ``kuberay`` and ``rayscale`` (optional)
globs over the values as the report shows them (``<absent>``, JSON; there ``*`` is anything).
``where`` (globs over document ids, ``*`` is anything) limits an entry to some documents; a
known entry must say where. ``when: refused`` limits it to documents both sides refuse.

allowlist.yaml: ``id``, ``reason`` (one line: what rayscale does instead and why), ``match``.
known.yaml: ``id``, ``theme``, ``breaks`` (what goes wrong for users), ``where``, ``match``.
``markdown_*`` render both for docs/controller.md, between the ``kuberay-allowlist`` and
``kuberay-known`` markers.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.kuberay.compare import Difference, show

HERE = Path(__file__).resolve().parent
ALLOWLIST = HERE / "allowlist.yaml"
KNOWN = HERE / "known.yaml"
WHEN = ("refused",)


@cache
def _glob(pattern: str, value: bool) -> re.Pattern[str]:
    if value:  # values: * is anything
        return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("[*]", i):
            out.append(r"\[[^\]]*\]")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append(r"[^.\[\]]*")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def glob_match(pattern: str, text: str, *, value: bool = False) -> bool:
    return _glob(pattern, value).fullmatch(text) is not None


@dataclasses.dataclass(frozen=True)
class Pattern:
    object: str
    path: str
    kuberay: str | None = None
    rayscale: str | None = None

    def matches(self, d: Difference) -> bool:
        return (
            glob_match(self.object, d.object)
            and glob_match(self.path, d.path)
            and (self.kuberay is None or glob_match(self.kuberay, show(d.kuberay, 10**9), value=True))
            and (self.rayscale is None or glob_match(self.rayscale, show(d.rayscale, 10**9), value=True))
        )

    def __str__(self) -> str:
        values = "".join(
            f" {k}={v}" for k, v in (("kuberay", self.kuberay), ("rayscale", self.rayscale)) if v
        )
        return f"{self.object}: {self.path}{values}"


@dataclasses.dataclass(frozen=True)
class Entry:
    id: str
    text: str  # allowlist: the reason; known: what breaks
    patterns: tuple[Pattern, ...]
    where: tuple[str, ...] = ("*",)
    when: str | None = None
    theme: str = ""

    def pattern_for(self, d: Difference, refused: bool) -> Pattern | None:
        """The first pattern that explains ``d``, if this entry applies to its document."""
        if self.when == "refused" and not refused:
            return None
        if not any(glob_match(w, d.document, value=True) for w in self.where):
            return None
        return next((p for p in self.patterns if p.matches(d)), None)


def _text(value: Any) -> str:
    return " ".join(str(value).split())


def _entry(item: Mapping[str, Any], source: Path, *, known: bool) -> Entry:
    required = {"id", "theme", "breaks", "where", "match"} if known else {"id", "reason", "match"}
    allowed = required | {"when"} | (set() if known else {"where"})
    keys = set(item)
    if not required <= keys or not keys <= allowed:
        raise ValueError(
            f"{source}: entry {item.get('id')!r} needs {sorted(required)}, may have {sorted(allowed)}"
        )
    when = item.get("when")
    if when is not None and when not in WHEN:
        raise ValueError(f"{source}: {item['id']}: when must be one of {WHEN}")
    patterns = []
    for p in item["match"]:
        if not {"object", "path"} <= set(p) or not set(p) <= {"object", "path", "kuberay", "rayscale"}:
            raise ValueError(f"{source}: {item['id']}: a pattern has object, path[, kuberay, rayscale]: {p}")
        patterns.append(Pattern(str(p["object"]), str(p["path"]), p.get("kuberay"), p.get("rayscale")))
    where = tuple(str(w) for w in item.get("where", ["*"]))
    text = _text(item["breaks"] if known else item["reason"])
    theme = _text(item.get("theme", ""))
    return Entry(str(item["id"]), text, tuple(patterns), where, when, theme)


def entry_from(item: Mapping[str, Any], source: Path) -> Entry:
    """One allowlist entry (``id``, ``reason``, ``match``[, ``where``, ``when``])."""
    return _entry(item, source, known=False)


def load(path: Path, *, known: bool) -> list[Entry]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    entries = [_entry(item, path, known=known) for item in data]
    ids = [e.id for e in entries]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{path}: repeated ids")
    return entries


def load_allowlist() -> list[Entry]:
    return load(ALLOWLIST, known=False)


def load_known() -> list[Entry]:
    return load(KNOWN, known=True)


# ----------------------------------------------------------------------------- docs

ALLOW_BEGIN, ALLOW_END = "<!-- kuberay-allowlist:begin -->", "<!-- kuberay-allowlist:end -->"
KNOWN_BEGIN, KNOWN_END = "<!-- kuberay-known:begin -->", "<!-- kuberay-known:end -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_allowlist(entries: list[Entry]) -> str:
    lines = ["| id | what rayscale does instead, and why |", "|---|---|"]
    lines += [f"| `{e.id}` | {_cell(e.text)} |" for e in entries]
    return "\n".join(lines) + "\n"


def markdown_known(entries: list[Entry]) -> str:
    lines = ["| theme | what goes wrong under rayscale | seen in |", "|---|---|---|"]
    for e in sorted(entries, key=lambda e: (e.theme, e.id)):
        where = ", ".join("any RayCluster" if w == "*" else f"`{w}`" for w in e.where)
        lines.append(f"| {_cell(e.theme)} | {_cell(e.text)} (`{e.id}`) | {where} |")
    return "\n".join(lines) + "\n"


def _replace(text: str, begin: str, end: str, body: str) -> str:
    start, stop = text.index(begin) + len(begin), text.index(end)
    return text[:start] + "\n" + body + text[stop:]


def docs_section(text: str, allowlist: list[Entry], known: list[Entry]) -> str:
    """``text`` with both tables between their markers replaced by the current lists."""
    text = _replace(text, ALLOW_BEGIN, ALLOW_END, markdown_allowlist(allowlist))
    return _replace(text, KNOWN_BEGIN, KNOWN_END, markdown_known(known))
