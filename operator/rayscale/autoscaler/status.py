"""``status.autoscaler`` of a RayCluster, and the UnmetDemand notice, from one decision (pure).

Besides the decision it carries the autoscaler's conditions (``conditions``): ``RayCompatible``,
whether rayscale can fully serve the cluster's Ray (see ``rayscale.autoscaler.compat``), and
``GcsAddressOverride`` when the cluster's ``rayscale.io/gcs-address`` names another address than
its head Service (see ``rayscale.autoscaler.gcs_override``).

The autoscaler owns this one key of the status and writes it with a merge patch that touches
nothing else (the controller owns every other key). To avoid a write every round, the timestamps
(``lastDecisionTime``, ``gcs.lastContactTime``) do not count as a change: the status is written
when anything else changed, or when it is older than ``refresh_seconds`` (so a live autoscaler
keeps ``lastDecisionTime`` at most that old).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rayscale.autoscaler.scheduling.model import (
    Decision,
    DemandKind,
    Node,
    NodeState,
    Snapshot,
    Target,
    Unmet,
    UnmetReason,
)
from rayscale.common.timefmt import parse_time, rfc3339
from rayscale.common.types import Obj

__all__ = [
    "REFRESH_SECONDS",
    "GcsHealth",
    "autoscaler_patch",
    "autoscaler_status",
    "clear_autoscaler_patch",
    "describe_unmet",
    "finished_condition",
    "merge_patch",
    "shape_text",
    "unmet_by_reason",
    "unmet_key",
    "unmet_notice",
    "waiting_bundles",
]

# An unchanged status.autoscaler is written again this often (its lastDecisionTime shows rounds run).
# Each write costs the API server a whole RayCluster (decoded, validated against its schema, stored,
# sent to every watcher): at 1,000 autoscaled clusters once a minute is 17 writes a second for nothing.
REFRESH_SECONDS = 300.0
UnmetKey = frozenset[tuple[object, ...]]
JOB_FINISHED_CONDITION = "JobFinished"

WHY = {
    UnmetReason.NO_MATCHING_GROUP: "no worker group has a host that can hold it (resources or labels)",
    UnmetReason.MAX_REPLICAS: "the groups that could hold it are at maxReplicas",
    UnmetReason.MAX_WORKERS: "the cluster is at its maximum number of workers",
    UnmetReason.BACKOFF: "every group that could hold it is backing off after failed launches",
    UnmetReason.QUOTA: "the groups that could hold it are refused by a ResourceQuota or held by a scaleGate",
    UnmetReason.UPSCALING_LIMIT: "the upscaling mode limits how many workers launch at once",
    UnmetReason.VIRTUAL_CLUSTER_MAX: "the virtual cluster it asks for is at maxNodes",
    UnmetReason.NO_VIRTUAL_CLUSTER: "the virtual cluster (or job cluster) it asks for does not exist",
}
WHAT = {
    DemandKind.DEMAND: "pending task(s) or actor(s)",
    DemandKind.GANG: "placement group(s)",
    DemandKind.CONSTRAINT: "bundle(s) of request_resources or RayResourceRequests",
}


@dataclasses.dataclass(frozen=True)
class GcsHealth:
    """What the autoscaler knows of the cluster's GCS after its latest attempt."""

    address: str | None
    reachable: bool
    last_error: str | None = None
    last_contact: datetime | None = None


def _amounts(resources: Mapping[str, float]) -> dict[str, float]:
    return {k: int(v) if float(v).is_integer() else v for k, v in sorted(resources.items())}


def shape_text(resources: Mapping[str, float] | None) -> str:
    """A resource map as people read it: ``{CPU: 1, GPU: 0.5}``."""
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted((resources or {}).items())) + "}"


def describe_unmet(unmet: Unmet) -> str:
    """One line: how many of what, and why they cannot be placed."""
    if unmet.kind == DemandKind.GANG:
        what = f"{unmet.strategy} [{', '.join(shape_text(b) for b in unmet.bundles or ())}]"
    else:
        what = shape_text(unmet.resources)
    why = WHY.get(unmet.reason, str(unmet.reason))
    return f"{unmet.count} x {what} ({WHAT[unmet.kind]}): {why}"


def work_shape(
    kind: object,
    resources: Mapping[str, float] | None,
    bundles: Sequence[Mapping[str, float]] | None,
    strategy: object | None,
) -> dict[str, Any]:
    """One shape of work as JSON (the status's unmet demand, the decision history's demand): its kind,
    then its resources or its bundles (whole amounts as integers) and their strategy, where it has them."""
    out: dict[str, Any] = {"kind": str(kind)}
    if resources is not None:
        out["resources"] = _amounts(resources)
    if bundles is not None:
        out["bundles"] = [_amounts(b) for b in bundles]
    if strategy is not None:
        out["strategy"] = str(strategy)
    return out


def _unmet_entry(unmet: Unmet) -> dict[str, Any]:
    out = work_shape(unmet.kind, unmet.resources, unmet.bundles, unmet.strategy)
    out.update(count=unmet.count, reason=str(unmet.reason), message=describe_unmet(unmet))
    return out


def _groups(
    snapshot: Snapshot, decision: Decision, backoff_until: Mapping[str, datetime]
) -> list[dict[str, Any]]:
    replicas: dict[str, dict[str, list[Node]]] = {}
    for node in snapshot.nodes:
        if node.state is not NodeState.TERMINATING:
            replicas.setdefault(node.group, {}).setdefault(node.replica or node.name, []).append(node)
    out = []
    for group in snapshot.groups:
        chosen = decision.groups.get(group.name)
        if chosen is None:
            continue
        found = list(replicas.get(group.name, {}).values())
        entry: dict[str, Any] = {
            "name": group.name,
            "current": chosen.current,
            "desired": chosen.replicas,
            "pending": sum(1 for hosts in found if any(h.state is NodeState.PENDING for h in hosts)),
            "idle": sum(1 for hosts in found if all(_idle(h) for h in hosts)),
        }
        until = backoff_until.get(group.name)
        if until is not None:
            entry["backoffUntil"] = rfc3339(until)
        out.append(entry)
    return out


def _idle(node: Node) -> bool:
    return node.state is NodeState.RUNNING and node.idle_seconds > 0


def _gcs(gcs: GcsHealth, old: Obj) -> dict[str, Any]:
    out: dict[str, Any] = {"reachable": gcs.reachable}
    if gcs.address:
        out["address"] = gcs.address
    if gcs.last_error:
        out["lastError"] = gcs.last_error[:1000]
    contact = rfc3339(gcs.last_contact) if gcs.last_contact else (old.get("gcs") or {}).get("lastContactTime")
    if contact:
        out["lastContactTime"] = contact
    return out


def autoscaler_status(
    snapshot: Snapshot,
    decision: Decision,
    gcs: GcsHealth,
    backoff_until: Mapping[str, datetime],
    now: datetime,
    old: Obj | None = None,
    conditions: Sequence[Obj] | None = None,
    replicas: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The new ``status.autoscaler``; `old` is the current one (it keeps the last GCS contact time).

    `backoff_until` holds the wall-clock end of each group's backoff, for the groups backing off.
    `conditions`: the autoscaler's conditions (``RayCompatible`` first, from
    ``rayscale.autoscaler.compat.compat_condition``); None keeps the conditions `old` has.
    `replicas`: the replicas by state (``rayscale.autoscaler.lifecycle.replica_summary``; absolute
    times only, so it changes only when a replica does); None leaves the key out.
    """
    out: dict[str, Any] = {
        "lastDecisionTime": rfc3339(now),
        "groups": _groups(snapshot, decision, backoff_until),
        "unmetDemand": [_unmet_entry(u) for u in decision.unmet],
        "gcs": _gcs(gcs, old or {}),
    }
    if replicas is not None:
        out["replicas"] = dict(replicas)
    kept = list(conditions) if conditions is not None else list((old or {}).get("conditions") or [])
    if kept:
        out["conditions"] = kept
    return out


def finished_condition(why: str, now: datetime, old: Obj | None) -> dict[str, Any]:
    """The ``JobFinished`` condition of a cluster whose RayJob ended (`why`: the annotation's
    words); `old` is the ``status.autoscaler`` written, whose condition keeps its time."""
    conditions = (old or {}).get("conditions") or []
    was = next((c for c in conditions if c.get("type") == JOB_FINISHED_CONDITION), None)
    return {
        "type": JOB_FINISHED_CONDITION,
        "status": "True",
        "reason": "RayJobFinished",
        "message": f"{why}: workers drained and removed",
        "lastTransitionTime": (was or {}).get("lastTransitionTime") or rfc3339(now),
    }


# ----------------------------------------------------------------------------- writing


def _without_times(status: Obj) -> dict[str, Any]:
    out = {k: v for k, v in status.items() if k != "lastDecisionTime"}
    if isinstance(out.get("gcs"), Mapping):
        out["gcs"] = {k: v for k, v in out["gcs"].items() if k != "lastContactTime"}
    return out


def merge_patch(old: Obj, new: Obj) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) turning `old` into `new`: removed keys become null."""
    patch: dict[str, Any] = {k: None for k in old if k not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            patch[key] = merge_patch(before, value)
        else:
            patch[key] = value
    return patch


def autoscaler_patch(
    old: Obj | None, new: Obj, now: datetime, *, refresh_seconds: float = REFRESH_SECONDS
) -> dict[str, Any] | None:
    """The merge patch of the RayCluster status that writes `new`, or None when not worth a write."""
    old = old or {}
    if old and _without_times(old) == _without_times(new):
        written = parse_time(old.get("lastDecisionTime"))
        if written is not None and (now - written).total_seconds() < refresh_seconds:
            return None
    return {"status": {"autoscaler": merge_patch(old, new)}}


def clear_autoscaler_patch(old: Obj | None) -> dict[str, Any] | None:
    """The merge patch removing ``status.autoscaler`` (autoscaling turned off), None if there is none."""
    return {"status": {"autoscaler": None}} if old else None


# ----------------------------------------------------------------------------- events and metrics


def unmet_key(unmet: Sequence[Obj]) -> UnmetKey:
    """What identifies a set of unmet demand (entries as in ``status.autoscaler.unmetDemand``)."""
    return frozenset(
        (
            u.get("kind"),
            tuple(sorted((u.get("resources") or {}).items())),
            tuple(tuple(sorted(b.items())) for b in u.get("bundles") or ()),
            u.get("strategy"),
            u.get("count"),
            u.get("reason"),
        )
        for u in unmet
    )


def unmet_notice(previous: UnmetKey | None, status: Obj) -> tuple[UnmetKey, str | None]:
    """The unmet demand of `status` (a new ``status.autoscaler``) and the UnmetDemand message to post.

    The message is None when nothing is unmet or the unmet set is the one already reported
    (`previous`), so the Event is not repeated while the demand stays unchanged.
    """
    unmet = list(status.get("unmetDemand") or [])
    key = unmet_key(unmet)
    if not unmet or key == previous:
        return key, None
    return key, "; ".join(str(u.get("message")) for u in unmet)


def _units(unmet: Unmet) -> int:
    """Units of an unmet entry: placement groups count their bundles."""
    return unmet.count * (len(unmet.bundles or ()) if unmet.kind == DemandKind.GANG else 1)


def waiting_bundles(decision: Decision) -> int:
    """Units of demand (tasks/actors, placement group bundles, constraint bundles) not on a running host.

    Placed units waiting for a worker that does not run yet, plus the unmet ones. Units the head
    or a running worker holds do not wait.
    """
    now = (Target.RUNNING, Target.HEAD)
    placed = sum(t.count for p in decision.placements for t in p.targets if t.on not in now)
    return placed + sum(_units(u) for u in decision.unmet)


def unmet_by_reason(decision: Decision) -> dict[str, int]:
    """Unmet units of demand per reason."""
    out: dict[str, int] = {}
    for u in decision.unmet:
        out[str(u.reason)] = out.get(str(u.reason), 0) + _units(u)
    return out
