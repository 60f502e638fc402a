"""`rayscale status` as text, one cluster: the documents of fetch.py in, lines out (pure: no I/O, no clock).

Plain aligned tables with short headings, for a terminal of `width` columns (100 by default): the
last column of a table wraps under itself instead of running past the edge. Ages are counted from
`now`, the time the document was fetched. With `color`, states and headings are coloured with ANSI
codes (the caller decides: a terminal, and NO_COLOR not set).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rayscale.autoscaler.disruptions import CONDITION as DISRUPTION
from rayscale.autoscaler.refusals import CONDITION as QUOTA_EXCEEDED
from rayscale.autoscaler.spec_removals import CONDITION as REMOVAL_DRAIN
from rayscale.autoscaler.status import shape_text
from rayscale.common.types import Obj
from rayscale.status.layout import (
    BYTES,
    STYLE,
    WIDTH,
    Cell,
    Out,
    age,
    amount,
    backoff_cell,
    counts_text,
    demand_text,
    human,
    max_text,
    replica_cells,
    shown,
)
from rayscale.status.written import pods_table, written_groups, written_replicas

__all__ = ["render_cluster"]

SHORT_ID = 8  # characters of a Ray node id shown


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
    _leaving(out, rc)
    _held_back(out, rc)
    if view is not None:
        _ray(out, view)
        _groups(out, view, rc, now)
        _replicas(out, view, now)
        _unmet(out, [(u.get("reason"), demand_text(u), u.get("why")) for u in view["demand"]["unmet"]])
        _decisions(out, view.get("decisions") or [], now, decisions)
    else:
        written_groups(out, rc, kube.get("pods") or [], now)
        written_replicas(out, rc.get("autoscaler") or {}, now)
        if rc.get("autoscaler"):
            unmet = rc["autoscaler"].get("unmetDemand") or []
            _unmet(out, [(u.get("reason"), u.get("message") or demand_text(u), None) for u in unmet])
        pods_table(out, kube.get("pods") or [], now)
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


def _leaving(out: Out, rc: Obj) -> None:
    """What ``status.autoscaler`` says is leaving (the ``Disruption`` condition: pods draining for
    a disruption notice, a removed worker group or a lowered maxReplicas, or a notice on the
    head's node) and a removal deadline it refused (``RemovalDrain``)."""
    conditions = (rc.get("autoscaler") or {}).get("conditions") or []
    shown = [c for c in conditions if c.get("type") in (DISRUPTION, REMOVAL_DRAIN) and c.get("message")]
    if not shown:
        return
    out.heading("Leaving")
    rows: list[list[str | Cell]] = []
    for c in shown:
        refused = c.get("type") == REMOVAL_DRAIN and c.get("status") == "False"
        style = "yellow" if refused or c.get("reason") == "HeadNotice" else ""
        rows.append([str(c.get("reason")), Cell(str(c.get("message")), style)])
    out.table(None, rows)


def _held_back(out: Out, rc: Obj) -> None:
    """Where Kubernetes holds Ray's demand back: the groups a ResourceQuota refuses or a scaleGate
    holds (the ``QuotaExceeded`` condition, while ``True``)."""
    conditions = (rc.get("autoscaler") or {}).get("conditions") or []
    found = next(
        (c for c in conditions if c.get("type") == QUOTA_EXCEEDED and c.get("status") == "True"), None
    )
    if found is None:
        return
    out.heading("Held back by Kubernetes")
    out.table(None, [[str(found.get("reason")), Cell(str(found.get("message")), "yellow")]])


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
    for name in shown(usage):
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
    for name in shown(total):
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
                max_text(g.get("maxReplicas")),
                str(g.get("numOfHosts")),
                counts_text(g.get("states") or {}),
                backoff_cell(g.get("backoffUntil"), now),
            ]
        )
    out.table(["GROUP", "CURRENT", "DESIRED", "MIN", "MAX", "HOSTS", "REPLICAS", "BACKOFF"], rows)


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
        rows.append([*replica_cells(r, now), nodes, _replica_detail(r, now)])
    out.table(["GROUP", "REPLICA", "STATE", "FOR", "RAY NODES", "DETAIL"], rows)


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
