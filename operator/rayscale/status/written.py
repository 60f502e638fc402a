"""A cluster as `rayscale status` shows it without the operator's live view: its written
``status.autoscaler``, its spec and its pods (pure: no I/O, no clock).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rayscale.common.types import Obj
from rayscale.status.layout import STYLE, Cell, Out, age, backoff_cell, counts_text, max_text, replica_cells

__all__ = ["pods_table", "written_groups", "written_replicas"]


def written_groups(out: Out, rc: Obj, pods: Sequence[Obj], now: datetime) -> None:
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
                max_text(spec.get("maxReplicas")),
                str(spec.get("numOfHosts")),
                counts_text(counts.get(name) or {}) if counts else "-",
                backoff_cell((g or {}).get("backoffUntil"), now),
            ]
        )
    out.table(["GROUP", "CURRENT", "DESIRED", "MIN", "MAX", "HOSTS", "REPLICAS", "BACKOFF"], rows)


def written_replicas(out: Out, status: Obj, now: datetime) -> None:
    replicas: Obj = status.get("replicas") or {}
    starting: Obj | None = replicas.get("oldestStarting")
    failed = replicas.get("failed") or []
    if not (starting or failed):
        return
    out.heading("Replicas (status.autoscaler keeps the one starting the longest and the latest failed)")
    rows: list[list[str | Cell]] = []
    for r in ([starting] if starting else []) + list(failed):
        detail = str(r.get("cause") or "") + (f": {r['message']}" if r.get("message") else "")
        rows.append([*replica_cells(r, now), detail])
    out.table(["GROUP", "REPLICA", "STATE", "FOR", "DETAIL"], rows)


def pods_table(out: Out, pods: Sequence[Obj], now: datetime) -> None:
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
