"""The fleet as `rayscale status` shows it: one table, a row per RayCluster (pure: no I/O, no clock)."""

from __future__ import annotations

from datetime import datetime

from rayscale.common.types import Obj
from rayscale.status.layout import WIDTH, Cell, Out, age

__all__ = ["render_fleet"]


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
