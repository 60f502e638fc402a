"""Kubernetes objects boiled down to what `rayscale status` shows and prints as JSON (pure).

Plain JSON-ready data, keys always present (``null`` when not known). Never a pod template, an
environment or a Secret: only names, counts, phases, times and the autoscaler's own status.

``cluster``: a RayCluster::

    {"state": str|null,                 # status.state (ready, suspended, ...)
     "autoscaling": bool,               # spec.enableInTreeAutoscaling
     "suspend": bool, "created": time|null,
     "groups": [{"name", "replicas", "minReplicas", "maxReplicas", "numOfHosts", "suspend"}],
     "autoscaler": status.autoscaler|null}   # as the autoscaler wrote it (docs/autoscaling.md)

``pod``: {"name", "group" (null for the head), "head": bool, "phase", "ready": bool,
"created": time|null, "deleting": bool, "restarts": int}

``request``: a RayResourceRequest {"name", "bundles": [{"resources", "count"}], "phase",
"reason", "message"}

``event``: {"type", "reason", "message", "count", "time"} (its latest occurrence)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rayscale.common import labels as L
from rayscale.common.types import Obj

__all__ = ["MAX_EVENTS", "cluster", "events", "pod", "request", "worker_counts"]

MAX_EVENTS = 10
UNBOUNDED = 2147483647  # KubeRay's maxReplicas when a group sets none


def _meta(obj: Obj) -> Obj:
    meta: Obj = obj.get("metadata") or {}
    return meta


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _group(spec: Obj) -> dict[str, Any]:
    return {
        "name": str(spec.get("groupName") or ""),
        "replicas": _int(spec.get("replicas"), 0),
        "minReplicas": _int(spec.get("minReplicas"), 0),
        "maxReplicas": _int(spec.get("maxReplicas"), UNBOUNDED),
        "numOfHosts": _int(spec.get("numOfHosts"), 1),
        "suspend": bool(spec.get("suspend")),
    }


def cluster(rc: Obj) -> dict[str, Any]:
    spec = rc.get("spec") or {}
    status = rc.get("status") or {}
    return {
        "state": status.get("state"),
        "autoscaling": spec.get("enableInTreeAutoscaling") is True,
        "suspend": bool(spec.get("suspend")),
        "created": _meta(rc).get("creationTimestamp"),
        "groups": [_group(g) for g in spec.get("workerGroupSpecs") or [] if isinstance(g, Mapping)],
        "autoscaler": status.get("autoscaler"),
    }


def _ready(p: Obj) -> bool:
    conditions = (p.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pod(p: Obj) -> dict[str, Any]:
    labels = _meta(p).get("labels") or {}
    head = labels.get(L.NODE_TYPE) == L.HEAD
    statuses = (p.get("status") or {}).get("containerStatuses") or []
    return {
        "name": _meta(p).get("name"),
        "group": None if head else labels.get(L.GROUP),
        "head": head,
        "phase": (p.get("status") or {}).get("phase"),
        "ready": _ready(p),
        "created": _meta(p).get("creationTimestamp"),
        "deleting": bool(_meta(p).get("deletionTimestamp")),
        "restarts": sum(_int(s.get("restartCount"), 0) for s in statuses),
    }


def worker_counts(pods: Iterable[Obj]) -> dict[tuple[str, str], dict[str, int]]:
    """Live (not deleting) worker pods per (namespace, cluster) and group."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for p in pods:
        labels = _meta(p).get("labels") or {}
        if labels.get(L.NODE_TYPE) != L.WORKER or _meta(p).get("deletionTimestamp"):
            continue
        key = (str(_meta(p).get("namespace")), str(labels.get(L.RAY_CLUSTER)))
        per_group = counts.setdefault(key, {})
        group = str(labels.get(L.GROUP))
        per_group[group] = per_group.get(group, 0) + 1
    return counts


def request(rrr: Obj) -> dict[str, Any]:
    spec = rrr.get("spec") or {}
    status = rrr.get("status") or {}
    return {
        "name": _meta(rrr).get("name"),
        "bundles": [
            {"resources": dict(b.get("resources") or {}), "count": _int(b.get("count"), 1)}
            for b in spec.get("bundles") or []
            if isinstance(b, Mapping)
        ],
        "phase": status.get("phase"),
        "reason": status.get("reason"),
        "message": status.get("message"),
    }


def _event_time(e: Obj) -> str | None:
    found = e.get("lastTimestamp") or e.get("eventTime") or _meta(e).get("creationTimestamp")
    return str(found)[:19] + "Z" if found else None  # MicroTimes to seconds, as the view's times


def events(items: Iterable[Obj], limit: int = MAX_EVENTS) -> list[dict[str, Any]]:
    """The latest `limit` Events, newest first."""
    found = [
        {
            "type": e.get("type"),
            "reason": e.get("reason"),
            "message": e.get("message"),
            "count": _int(e.get("count") or (e.get("series") or {}).get("count"), 1),
            "time": _event_time(e),
        }
        for e in items
    ]
    found.sort(key=lambda e: (e["reason"] or "", e["message"] or ""))  # ties in a stable order
    found.sort(key=lambda e: e["time"] or "", reverse=True)
    return found[:limit]
