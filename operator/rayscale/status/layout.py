"""The text of `rayscale status`: numbers, ages, resources and aligned tables (pure: no I/O, no clock).

Plain aligned tables with short headings, for a terminal of `width` columns (100 by default): the
last column of a table wraps under itself instead of running past the edge. With `color`, states
and headings are coloured with ANSI codes (the caller decides: a terminal, and NO_COLOR not set).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rayscale.autoscaler.history import WorkKind
from rayscale.autoscaler.replica_host import in_listing_order
from rayscale.autoscaler.status import shape_text
from rayscale.common.timefmt import parse_time
from rayscale.common.types import Obj

__all__ = [
    "BYTES",
    "STYLE",
    "WIDTH",
    "Cell",
    "Out",
    "age",
    "amount",
    "backoff_cell",
    "counts_text",
    "demand_text",
    "human",
    "max_text",
    "replica_cells",
    "shown",
]

WIDTH = 100
GAP = "  "
UNBOUNDED = 2147483647
SHORT_ID = 8  # characters of a Ray node id shown
BYTES = frozenset({"memory", "object_store_memory"})
# Ray's resources of placed placement group bundles (CPU_group_<pg>, CPU_group_<i>_<pg>,
# bundle_group_...): `ray status` leaves them out, the node's own resources already count them.
PG_RESOURCE = re.compile(r"^.+_group_(?:\d+_)?[0-9a-f]{16,}$")
ANSI = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}
STYLE = {
    "requested": "yellow",
    "scheduling": "yellow",
    "booting": "yellow",
    "ready": "green",
    "draining": "yellow",
    "failed": "red",
    "removed": "dim",
    "RUNNING": "green",
    "DRAINING": "yellow",
    "DEAD": "red",
    "Pending": "yellow",
    "Satisfied": "green",
    "Unsatisfiable": "red",
    "Warning": "yellow",
}
KIND: dict[str, str] = {WorkKind.TASK: "tasks/actors", WorkKind.PLACEMENT_GROUP: "placement groups"}


# ---------------------------------------------------------------------------- numbers and times


def human(seconds: float) -> str:
    """A duration as kubectl prints ages: 45s, 3m12s, 25m, 5h12m, 3d."""
    s = max(int(seconds), 0)
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    return f"{h // 24}d"


def age(when: Any, now: datetime) -> str:
    """How long ago `when` (RFC 3339) was; "-" when not known."""
    at = parse_time(when) if when else None
    return "-" if at is None else human((now - at).total_seconds())


def _bytes(value: float) -> str:
    """Bytes as `ray status` prints them."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.2f}{unit}"
    return f"{value:g}B"


def amount(resource: str, value: Any) -> str:
    number = float(value or 0)
    return _bytes(number) if resource in BYTES else f"{number:g}"


def shown(resources: Iterable[str]) -> list[str]:
    """The resources `ray status` shows, in its order: CPU, GPU, TPU, the others, memory."""
    return sorted((r for r in resources if not PG_RESOURCE.match(r)), key=_resource_order)


def _resource_order(name: str) -> tuple[int, str]:
    first = {"CPU": 0, "GPU": 1, "TPU": 2, "memory": 8, "object_store_memory": 9}
    return first.get(name, 5), name


def demand_text(entry: Obj) -> str:
    """``2 x {GPU: 1} tasks/actors``, ``1 x PACK [{CPU: 1}, {CPU: 1}] placement groups``, ..."""
    count = entry.get("count", 1)
    kind = str(entry.get("kind"))
    if entry.get("bundles") is not None:
        bundles = ", ".join(shape_text(b) for b in entry.get("bundles") or [])
        return f"{count} x {entry.get('strategy')} [{bundles}] {KIND.get(kind, kind)}"
    what = f"{count} x {shape_text(entry.get('resources'))}"
    if kind == WorkKind.REQUEST:
        unit = entry.get("unit") or ""
        return f"{what} {'RayResourceRequest ' + unit if unit else 'request_resources'}"
    return f"{what} {KIND.get(kind, kind)}"


def max_text(value: Any) -> str:
    return "-" if value is None or int(value) >= UNBOUNDED else str(value)


def counts_text(states: Mapping[str, int]) -> str:
    return ", ".join(f"{states[s]} {s}" for s in in_listing_order(states) if states[s]) or "-"


# ---------------------------------------------------------------------------- layout


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    style: str = ""


def cell(value: str | Cell) -> Cell:
    return value if isinstance(value, Cell) else Cell(value)


class Out:
    """Lines of text, coloured when asked."""

    def __init__(self, *, color: bool, width: int) -> None:
        self.color = color
        self.width = width
        self.lines: list[str] = []

    def paint(self, text: str, style: str) -> str:
        if not (self.color and style and text):
            return text
        return f"\x1b[{ANSI[style]}m{text}\x1b[0m"

    def line(self, text: str = "", style: str = "") -> None:
        self.lines.append(self.paint(text, style))

    def heading(self, text: str) -> None:
        if self.lines:
            self.lines.append("")
        self.line(text, "bold")

    def table(
        self, headers: Sequence[str] | None, rows: Iterable[Sequence[str | Cell]], *, indent: int = 2
    ) -> None:
        """Columns as wide as their widest cell; the last one wraps to stay within the width."""
        body = [[cell(c) for c in row] for row in rows]
        every = ([[Cell(h, "bold") for h in headers]] if headers else []) + body
        if not every:
            return
        columns = max(len(r) for r in every)
        every = [r + [Cell("")] * (columns - len(r)) for r in every]
        widths = [max(len(r[i].text) for r in every) for i in range(columns - 1)]
        start = indent + sum(w + len(GAP) for w in widths)
        room = max(self.width - start, 24)
        for row in every:
            fixed = "".join(
                self.paint(c.text, c.style) + " " * (w - len(c.text)) + GAP
                for c, w in zip(row, widths, strict=False)
            )
            last = row[-1]
            chunks = textwrap.wrap(last.text, room, subsequent_indent="  ", break_on_hyphens=False) or [""]
            self.lines.append((" " * indent + fixed + self.paint(chunks[0], last.style)).rstrip())
            self.lines.extend((" " * start + self.paint(c, last.style)).rstrip() for c in chunks[1:])

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def backoff_cell(until: Any, now: datetime) -> Cell:
    at = parse_time(until) if until else None
    if at is None:
        return Cell("-")
    return Cell(f"for {human((at - now).total_seconds())}", "red")


def replica_cells(r: Obj, now: datetime) -> list[str | Cell]:
    """A replica's group, name, state and for how long (the view's, or status.autoscaler's)."""
    state = str(r.get("state"))
    return [
        str(r.get("group")),
        str(r.get("replica")),
        Cell(state, STYLE.get(state, "")),
        age(r.get("since"), now),
    ]
