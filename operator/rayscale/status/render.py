"""`rayscale status` as text: the documents of fetch.py in, lines out (pure: no I/O, no clock).

Plain aligned tables with short headings, for a terminal of `width` columns (100 by default): the
last column of a table wraps under itself instead of running past the edge. Ages are counted from
`now`, the time the document was fetched. With `color`, states and headings are coloured with ANSI
codes (the caller decides: a terminal, and NO_COLOR not set).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rayscale.autoscaler.history import WorkKind
from rayscale.autoscaler.status import shape_text
from rayscale.common.timefmt import parse_time

__all__ = ["WIDTH", "age", "amount", "render_cluster", "render_fleet"]

Obj = Mapping[str, Any]
WIDTH = 100
GAP = "  "
UNBOUNDED = 2147483647
SHORT_ID = 8  # characters of a Ray node id shown
BYTES = frozenset({"memory", "object_store_memory"})
# Ray's resources of placed placement group bundles (CPU_group_<pg>, CPU_group_<i>_<pg>,
# bundle_group_...): `ray status` leaves them out, the node's own resources already count them.
PG_RESOURCE = re.compile(r"^.+_group_(?:\d+_)?[0-9a-f]{16,}$")
STATES = ("requested", "scheduling", "booting", "ready", "idle", "draining", "failed", "removed")
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


def _shown(resources: Iterable[str]) -> list[str]:
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


def _max(value: Any) -> str:
    return "-" if value is None or int(value) >= UNBOUNDED else str(value)


def _counts(states: Mapping[str, int]) -> str:
    ordered = [s for s in STATES if states.get(s)] + sorted(s for s in states if s not in STATES)
    return ", ".join(f"{states[s]} {s}" for s in ordered if states[s]) or "-"


# ---------------------------------------------------------------------------- layout


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    style: str = ""


def _cell(value: str | Cell) -> Cell:
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
        body = [[_cell(c) for c in row] for row in rows]
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


# ---------------------------------------------------------------------------- one cluster


def render_cluster(
    doc: Obj, *, now: datetime, color: bool = False, width: int = WIDTH, decisions: int = 5
) -> str:
    """The cluster document (fetch.cluster_document) as text; `decisions`: the newest shown."""
    out = Out(color=color, width=width)
    view: Obj | None = doc.get("view")
    kube: Obj = doc.get("kubernetes") or {}
    rc: Obj = kube.get("rayCluster") or {}
    _header(out, doc, rc, view, now)
    if view is not None:
        _ray(out, view)
        _groups(out, view, rc, now)
        _replicas(out, view, now)
        _unmet(out, [(u.get("reason"), demand_text(u), u.get("why")) for u in view["demand"]["unmet"]])
        _decisions(out, view.get("decisions") or [], now, decisions)
    else:
        _status_groups(out, rc, kube.get("pods") or [], now)
        _status_replicas(out, rc.get("autoscaler") or {}, now)
        if rc.get("autoscaler"):
            unmet = rc["autoscaler"].get("unmetDemand") or []
            _unmet(out, [(u.get("reason"), u.get("message") or demand_text(u), None) for u in unmet])
        _pods(out, kube.get("pods") or [], now)
    _requests(out, kube.get("requests") or [])
    _events(out, kube.get("events") or [], now)
    return out.text()


def _header(out: Out, doc: Obj, rc: Obj, view: Obj | None, now: datetime) -> None:
    state = rc.get("state") or "no state yet"
    autoscaling = "autoscaling" if rc.get("autoscaling") else "autoscaling off"
    out.line(f"RayCluster {doc.get('namespace')}/{doc.get('name')}: {state}, {autoscaling}", "bold")
    operator: Obj = doc.get("operator") or {}
    rows: list[list[str | Cell]] = []
    if view is not None:
        rows.append(
            ["operator", f"{operator.get('via')}, latest round {age(view.get('observedAt'), now)} ago"]
        )
        gcs = view.get("gcs") or {}
    else:
        status: Obj = rc.get("autoscaler") or {}
        rows.append(["live view", Cell(f"missing: {operator.get('error') or 'no answer'}", "yellow")])
        if status:
            written = age(status.get("lastDecisionTime"), now)
            rows.append(
                ["shown", f"status.autoscaler of the latest round it was written for ({written} ago)"]
            )
        elif rc.get("autoscaling"):
            rows.append(["shown", "the spec and the pods (no status.autoscaler: no round wrote one yet)"])
        gcs = status.get("gcs") or {}
    if gcs:
        rows.append(["GCS", _gcs(gcs, now)])
    if view is not None and view.get("hold"):
        rows.append(["held", Cell(str(view["hold"]), "yellow")])
    out.table(None, rows)


def _gcs(gcs: Obj, now: datetime) -> Cell:
    where = gcs.get("address") or "(no address)"
    if gcs.get("reachable"):
        return Cell(f"{where}: reachable, answered {age(gcs.get('lastContactTime'), now)} ago")
    seen = gcs.get("lastContactTime")
    last = f", last answered {age(seen, now)} ago" if seen else ""
    return Cell(f"{where}: NOT reachable ({gcs.get('lastError') or 'no answer'}){last}", "red")


def _ray(out: Out, view: Obj) -> None:
    ray: Obj | None = view.get("ray")
    out.heading("Ray (what `ray status` shows)")
    if ray is None:
        out.line("  unknown: the latest round could not read the GCS")
        return
    nodes = sorted(
        ray.get("nodes") or [], key=lambda n: (not n.get("head"), n.get("group") or "", n.get("pod") or "")
    )
    rows: list[list[str | Cell]] = []
    for node in nodes:
        state = str(node.get("state"))
        idle = _idle(node) if state == "IDLE" else "-"
        rows.append(
            [
                str(node.get("id") or "")[:SHORT_ID],
                node.get("pod") or "-",
                "head" if node.get("head") else node.get("group") or "-",
                Cell(state, STYLE.get(state, "")),
                idle,
                "-" if state == "DEAD" else _used(node),
            ]
        )
    out.table(["NODE", "POD", "GROUP", "STATE", "IDLE", "USED/TOTAL"], rows)
    usage: Obj = ray.get("usage") or {}
    out.line("  Usage:")
    for name in _shown(usage):
        used, total = usage[name].get("used"), usage[name].get("total")
        out.line(f"    {amount(name, used)}/{amount(name, total)} {name}")
    demand: Obj = view.get("demand") or {}
    pending = demand.get("pending") or []
    out.line("  Pending demand:" + ("" if pending else " none"))
    for entry in pending:
        out.line(f"    {demand_text(entry)}")
    if demand.get("pendingOmitted"):
        out.line(f"    (and {demand['pendingOmitted']} more shapes)")


def _idle(node: Obj) -> str:
    return human(float(node.get("idleSeconds") or 0))


def _used(node: Obj) -> str:
    total: Obj = node.get("total") or {}
    available: Obj = node.get("available") or {}
    parts = []
    for name in _shown(total):
        if name in BYTES:
            continue
        used = float(total[name]) - float(available.get(name, 0))
        parts.append(f"{name} {amount(name, used)}/{amount(name, total[name])}")
    return ", ".join(parts) or "-"


def _groups(out: Out, view: Obj, rc: Obj, now: datetime) -> None:
    out.heading("Groups")
    rows: list[list[str | Cell]] = []
    for g in view.get("groups") or []:
        rows.append(
            [
                str(g["name"]),
                str(g.get("current")),
                str(g.get("desired")),
                str(g.get("minReplicas")),
                _max(g.get("maxReplicas")),
                str(g.get("numOfHosts")),
                _counts(g.get("states") or {}),
                _backoff(g.get("backoffUntil"), now),
            ]
        )
    out.table(["GROUP", "CURRENT", "DESIRED", "MIN", "MAX", "HOSTS", "REPLICAS", "BACKOFF"], rows)


def _backoff(until: Any, now: datetime) -> Cell:
    at = parse_time(until) if until else None
    if at is None:
        return Cell("-")
    return Cell(f"for {human((at - now).total_seconds())}", "red")


def _replicas(out: Out, view: Obj, now: datetime) -> None:
    replicas = list(view.get("replicas") or [])
    out.heading("Replicas")
    if not replicas:
        out.line("  none")
        return
    order = {g["name"]: i for i, g in enumerate(view.get("groups") or [])}
    replicas.sort(
        key=lambda r: (order.get(r.get("group"), len(order)), bool(r.get("gone")), str(r.get("replica")))
    )
    rows: list[list[str | Cell]] = []
    for r in replicas:
        nodes = ",".join(str(n)[:SHORT_ID] for n in r.get("rayNodes") or []) or "-"
        rows.append([*_replica_cells(r, now), nodes, _replica_detail(r, now)])
    out.table(["GROUP", "REPLICA", "STATE", "FOR", "RAY NODES", "DETAIL"], rows)


def _replica_cells(r: Obj, now: datetime) -> list[str | Cell]:
    """A replica's group, name, state and for how long (the view's, or status.autoscaler's)."""
    state = str(r.get("state"))
    return [
        str(r.get("group")),
        str(r.get("replica")),
        Cell(state, STYLE.get(state, "")),
        age(r.get("since"), now),
    ]


def _replica_detail(r: Obj, now: datetime) -> str:
    parts = []
    pods = r.get("pods") or []
    if len(pods) > 1:
        parts.append(f"{len(pods)} hosts")
    if r.get("state") == "idle" and r.get("idleSince"):
        parts.append(f"idle for {age(r['idleSince'], now)}")
    if r.get("cause"):
        parts.append(str(r["cause"]) + (f": {r['message']}" if r.get("message") else ""))
    elif r.get("message"):
        parts.append(str(r["message"]))
    if r.get("gone"):
        parts.append("(its pods are gone)")
    return "; ".join(parts)


def _unmet(out: Out, entries: Sequence[tuple[Any, str, Any]]) -> None:
    """(reason, what, why) of each unmet entry."""
    out.heading("Unmet demand" + ("" if entries else ": none"))
    rows: list[list[str | Cell]] = []
    for reason, what, why in entries:
        rows.append([Cell(str(reason), "red"), what + (f": {why}" if why else "")])
    if rows:
        out.table(["REASON", "DEMAND"], rows)


def _decisions(out: Out, records: Sequence[Obj], now: datetime, limit: int) -> None:
    if limit <= 0:
        return
    shown = records[:limit]
    more = f", {len(shown)} of {len(records)}" if len(records) > len(shown) else ""
    out.heading(f"Decisions (newest first{more})")
    if not shown:
        out.line("  none yet")
        return
    rows: list[list[str | Cell]] = []
    newer: Sequence[Obj] | None = None
    for record in shown:
        lines = _decision_lines(record, now, newer)
        rows.append([age(record.get("time"), now), str(record.get("trigger")), lines[0]])
        rows.extend(["", "", line] for line in lines[1:])
        newer = record.get("demand") or []
    out.table(["AGE", "TRIGGER", "DECIDED"], rows)


def _decision_lines(record: Obj, now: datetime, newer: Sequence[Obj] | None) -> list[str]:
    """What a decision did, one thing a line; its demand only when it differs from the newer one's."""
    lines = [f"held: {record['held']}"] if record.get("held") else []
    launched = record.get("launched") or []
    lines += [f"+{x['replicas']} {x['group']} for {'; '.join(x.get('why') or [])}" for x in launched]
    removed: dict[tuple[str, str], list[str]] = {}
    for r in record.get("removed") or []:
        removed.setdefault((str(r.get("group")), str(r.get("cause"))), []).append(str(r.get("pod")))
    lines += [
        f"-{len(pods)} {group} ({cause}): {', '.join(pods)}" for (group, cause), pods in removed.items()
    ]
    if (launched or removed) and not record.get("written"):
        lines.append("not written to the RayCluster")
    if not lines:
        lines.append("no change")
    repeats = int(record.get("repeats") or 0)
    if repeats:
        rounds = "round" if repeats == 1 else "rounds"
        lines.append(f"the same in {repeats} more {rounds}, until {age(record.get('lastSeen'), now)} ago")
    demand = record.get("demand") or []
    if newer is not None and list(newer) == list(demand):
        lines.append("demand: as above")
    else:
        texts = [demand_text(d) for d in demand] or ["none"]
        lines += [("demand: " if i == 0 else " " * len("demand: ")) + t for i, t in enumerate(texts)]
    lines += [f"unmet: {demand_text(u)}: {u.get('reason')}" for u in record.get("unmet") or []]
    omitted: Obj = record.get("omitted") or {}
    if omitted:
        lines.append("left out: " + ", ".join(f"{n} {what}" for what, n in sorted(omitted.items())))
    return lines


def _requests(out: Out, requests: Sequence[Obj]) -> None:
    if not requests:
        return
    out.heading("RayResourceRequests")
    rows: list[list[str | Cell]] = []
    for r in requests:
        bundles = ", ".join(
            f"{b.get('count')} x {shape_text(b.get('resources'))}" for b in r.get("bundles") or []
        )
        phase = str(r.get("phase") or "-")
        rows.append(
            [str(r.get("name")), bundles or "-", Cell(phase, STYLE.get(phase, "")), r.get("message") or ""]
        )
    out.table(["NAME", "BUNDLES", "PHASE", "MESSAGE"], rows)


def _events(out: Out, events: Sequence[Obj], now: datetime) -> None:
    if not events:
        return
    out.heading("Events (newest first)")
    rows: list[list[str | Cell]] = []
    for e in events:
        kind = str(e.get("type") or "")
        count = int(e.get("count") or 1)
        message = str(e.get("message") or "") + (f" (x{count})" if count > 1 else "")
        rows.append([age(e.get("time"), now), Cell(kind, STYLE.get(kind, "")), str(e.get("reason")), message])
    out.table(["AGE", "TYPE", "REASON", "MESSAGE"], rows)


# ---------------------------------------------------------------------------- without the operator


def _status_groups(out: Out, rc: Obj, pods: Sequence[Obj], now: datetime) -> None:
    status: Obj = rc.get("autoscaler") or {}
    written: dict[str, Obj] = {str(g.get("name")): g for g in status.get("groups") or []}
    counts: Obj = (status.get("replicas") or {}).get("counts") or {}
    live: dict[str, int] = {}
    for p in pods:
        if not p.get("head") and not p.get("deleting"):
            live[str(p.get("group"))] = live.get(str(p.get("group")), 0) + 1
    out.heading("Groups")
    rows: list[list[str | Cell]] = []
    for spec in rc.get("groups") or []:
        name = str(spec.get("name"))
        g = written.get(name)
        current = str(g.get("current")) if g else f"{live.get(name, 0)} pods"
        desired = str(g.get("desired")) if g else str(spec.get("replicas"))
        rows.append(
            [
                name,
                current,
                desired,
                str(spec.get("minReplicas")),
                _max(spec.get("maxReplicas")),
                str(spec.get("numOfHosts")),
                _counts(counts.get(name) or {}) if counts else "-",
                _backoff((g or {}).get("backoffUntil"), now),
            ]
        )
    out.table(["GROUP", "CURRENT", "DESIRED", "MIN", "MAX", "HOSTS", "REPLICAS", "BACKOFF"], rows)


def _status_replicas(out: Out, status: Obj, now: datetime) -> None:
    replicas: Obj = status.get("replicas") or {}
    starting: Obj | None = replicas.get("oldestStarting")
    failed = replicas.get("failed") or []
    if not (starting or failed):
        return
    out.heading("Replicas (status.autoscaler keeps the one starting the longest and the latest failed)")
    rows: list[list[str | Cell]] = []
    for r in ([starting] if starting else []) + list(failed):
        detail = str(r.get("cause") or "") + (f": {r['message']}" if r.get("message") else "")
        rows.append([*_replica_cells(r, now), detail])
    out.table(["GROUP", "REPLICA", "STATE", "FOR", "DETAIL"], rows)


def _pods(out: Out, pods: Sequence[Obj], now: datetime) -> None:
    out.heading("Pods" + ("" if pods else ": none"))
    rows: list[list[str | Cell]] = []
    for p in pods:
        phase = str(p.get("phase") or "-")
        if p.get("deleting"):
            phase = "Terminating"
        restarts = int(p.get("restarts") or 0)
        rows.append(
            [
                str(p.get("name")),
                "head" if p.get("head") else str(p.get("group")),
                Cell(phase, STYLE.get(phase, "")),
                "yes" if p.get("ready") else "no",
                age(p.get("created"), now),
                str(restarts),
            ]
        )
    if rows:
        out.table(["POD", "GROUP", "PHASE", "READY", "AGE", "RESTARTS"], rows)


# ---------------------------------------------------------------------------- the fleet


def render_fleet(doc: Obj, *, now: datetime, color: bool = False, width: int = WIDTH) -> str:
    """The fleet document (fetch.fleet_document) as one table, a row per RayCluster."""
    out = Out(color=color, width=width)
    clusters = doc.get("clusters") or []
    operator: Obj = doc.get("operator") or {}
    every = doc.get("namespace") is None
    if not clusters:
        where = "any namespace" if every else f"namespace {doc.get('namespace')}"
        out.line(f"No RayClusters in {where}.")
    else:
        headers = ["NAME", "STATE", "DECIDED", "GCS", "UNMET", "GROUPS current/desired"]
        rows = [
            [str(c.get("namespace")), *_fleet_row(c, now)] if every else _fleet_row(c, now) for c in clusters
        ]
        out.table(["NAMESPACE", *headers] if every else headers, rows, indent=0)
    stale = any(_fleet_source(c) == "status" for c in clusters)
    if not operator.get("reached") or operator.get("error"):
        out.line()
        out.line(f"live view missing: {operator.get('error') or 'no answer'}", "yellow")
    if stale:
        if operator.get("reached") and not operator.get("error"):
            out.line()
        out.line("* from status.autoscaler (the latest round that wrote it): no live view of it")
    return out.text()


def _fleet_source(c: Obj) -> str:
    """Where a row comes from: "view" (the operator), "status" (status.autoscaler) or "spec"."""
    rc: Obj = (c.get("kubernetes") or {}).get("rayCluster") or {}
    if c.get("view") is not None:
        return "view"
    return "status" if rc.get("autoscaling") and rc.get("autoscaler") else "spec"


def _fleet_row(c: Obj, now: datetime) -> list[str | Cell]:
    kube: Obj = c.get("kubernetes") or {}
    rc: Obj = kube.get("rayCluster") or {}
    entry: Obj = c.get("view") or {}
    status: Obj = rc.get("autoscaler") or {}
    source = _fleet_source(c)
    unmet: dict[str, int] = {}
    gcs: bool | None = None
    if source == "view":
        groups = [(g["name"], g.get("current"), g.get("desired")) for g in entry.get("groups") or []]
        unmet = dict(entry.get("unmet") or {})
        gcs = entry.get("gcsReachable")
        decided = age(entry.get("lastDecisionTime"), now)
    elif source == "status":
        groups = [(g.get("name"), g.get("current"), g.get("desired")) for g in status.get("groups") or []]
        for u in status.get("unmetDemand") or []:
            unmet[str(u.get("reason"))] = unmet.get(str(u.get("reason")), 0) + int(u.get("count") or 0)
        gcs = (status.get("gcs") or {}).get("reachable")
        decided = age(status.get("lastDecisionTime"), now) + "*"
    else:
        workers: Obj = kube.get("workers") or {}
        groups = [(g["name"], workers.get(g["name"], 0), g.get("replicas")) for g in rc.get("groups") or []]
        decided = "no round*" if rc.get("autoscaling") else "off"
    unmet_text = ", ".join(f"{n} {r}" for r, n in sorted(unmet.items())) or "-"
    return [
        str(c.get("name")),
        str(rc.get("state") or "-"),
        decided,
        Cell("-" if gcs is None else "yes" if gcs else "NO", "red" if gcs is False else ""),
        Cell(_squeeze(unmet_text, 30), "red" if unmet else ""),
        ", ".join(f"{name} {cur}/{des}" for name, cur, des in groups) or "-",
    ]


def _squeeze(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
