"""What the operator serves about each autoscaled cluster: plain JSON-ready data (pure).

This is the contract of the operator's HTTP endpoints, its status page and the CLI built on them.
Everything is str, int, float, bool, None, list or dict; times are RFC 3339 in UTC
(``2026-11-23T10:15:02Z``); resource amounts are Ray's (``memory`` in bytes; whole amounts as
integers). It is built from what the autoscaler kept after its latest round (`Observed`) and the
cluster's decision history, without I/O. It never holds a Secret, a token or the RayCluster's
manifest (the GCS address is there, as in ``status.autoscaler``). Keys are always present; a
value that is not known is ``null``. New keys may be added; existing ones keep their meaning.

``cluster_view`` (one cluster)::

    {"namespace": "team-a", "name": "demo",
     "observedAt": time,                      # the latest round
     "gcs": {"address": str|null, "reachable": bool, "lastError": str|null,
             "lastContactTime": time|null},
     "hold": null | str,                      # why the latest round was held (changed nothing, or
                                              # removed nothing), see docs/autoscaling.md
     "groups": [{"name": str, "minReplicas": int, "maxReplicas": int (2147483647: unbounded),
                 "numOfHosts": int,
                 "desired": int,              # replicas the spec asks for after the round
                 "current": int,              # replicas that have pods (any state)
                 "hostResources": {resource: amount},   # Ray resources of one host
                 "backoffUntil": time|null,   # launches nothing until then (failed launches)
                 "states": {state: int}}],    # its replicas by state (below), states with none left out
     "replicas": [{"group": str,
                   "replica": str,            # replica name (multi-host), pod name, or
                                              # "unborn:<group>:<n>" while it has no pod
                   "pods": [str], "rayNodes": [str],    # Ray node ids (hex), when the GCS knows them
                   "state": "requested"|"scheduling"|"booting"|"ready"|"idle"|"draining"|"failed"|"removed",
                   "since": time,             # when it entered this state
                   "idleSince": time|null,    # idle: since when every Ray node of it has been idle
                   "cause": str|null,         # failed: POD_FAILED | LAUNCH_FAILED | NODE_DEAD;
                                              # draining/removed: the removal cause (IDLE, DRAINED, ...)
                   "message": str|null,       # failed: what happened
                   "gone": bool}],            # its pods are gone (failed or removed in the last 10 min)
     "ray": null | {                          # Ray's GCS as the round read it (what `ray status` shows);
                                              # null when the GCS could not be read
        "nodes": [{"id": str, "pod": str|null, "group": str|null, "head": bool,
                   "state": "RUNNING"|"IDLE"|"DRAINING"|"DEAD",
                   "total": {resource: amount}, "available": {resource: amount},
                   "idleSeconds": float}],
        "usage": {resource: {"used": amount, "total": amount}}},   # over the live nodes
     "demand": {
        "pending": [demand],                  # what Ray and the RayResourceRequests ask for, by shape
        "pendingOmitted": int,                # shapes left out (at most 100 are listed)
        "unmet": [demand + {"reason": UnmetReason, "why": str}]},
     "decisions": [decision]}                 # newest first, at most 50

    demand: {"kind": "task",           "resources": {...}, "count": n}  # pending tasks and actors
          | {"kind": "placementGroup", "bundles": [{...}], "strategy": str, "count": n}
          | {"kind": "request", "resources": {...}, "unit": str, "count": n}
            # bundles of request_resources (unit "") or of a RayResourceRequest ("<namespace>/<name>")

    decision: {"time": time,               # the round (the first, when it repeated)
               "lastSeen": time,           # the latest round that decided the same on the same demand
               "repeats": int,             # how many rounds since "time" did so
               "trigger": str,             # what marked the cluster: "RayCluster", "pod",
                                           # "RayResourceRequest", "RayVirtualCluster" (", "-joined),
                                           # or "periodic" (the interval, or a retry)
               "demand": [demand],
               "launched": [{"group": str, "replicas": int, "why": [str]}],
               "removed": [{"group": str, "pod": str, "replica": str|null, "cause": RemovalCause}],
               "unmet": [demand + {"reason", "why"}],
               "omitted": {list name: int},   # entries left out of demand (20), launched (20),
                                              # removed (50), unmet (20)
               "held": str|null,
               "written": bool,            # the round patched the RayCluster
               "scenario": bool}           # its input can be had as a scenario document

``fleet_entry`` (one per cluster, for a list of clusters)::

    {"namespace": str, "name": str, "lastDecisionTime": time, "hold": str|null,
     "gcsReachable": bool,
     "groups": [{"name": str, "desired": int, "current": int}],
     "states": {state: int},               # replicas of all groups by state
     "unmet": {UnmetReason: int}}          # units of unmet demand by reason ({} when all fits)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rayscale.autoscaler.demand import HEAD_RESOURCE
from rayscale.autoscaler.history import (
    DecisionRecord,
    demand_dict,
    demand_entries,
    record_dict,
    unmet_dict,
    unmet_entries,
)
from rayscale.autoscaler.lifecycle import Lives, ReplicaLife, ReplicaState, state_counts
from rayscale.autoscaler.scenario_write import amounts
from rayscale.autoscaler.scheduling.model import Decision, Snapshot
from rayscale.autoscaler.status import GcsHealth, unmet_by_reason
from rayscale.common.timefmt import rfc3339
from rayscale.ray import model as ray

__all__ = ["MAX_PENDING", "Observed", "cluster_view", "fleet_entry"]

MAX_PENDING = 100  # demand shapes listed in the view


@dataclass(frozen=True, slots=True)
class Observed:
    """What one round of a cluster saw and decided, kept for the view (nothing in it changes)."""

    namespace: str
    name: str
    at: datetime  # when the round ran
    snapshot: Snapshot  # the round's own (a held round's scheduler saw it with nothing due to go)
    decision: Decision  # as applied: what the patch wrote
    state: ray.ClusterState | None  # Ray's GCS; None: unreachable
    gcs: GcsHealth
    hold: str | None = None
    backoff_until: Mapping[str, datetime] = field(default_factory=dict)  # groups backing off
    lives: Lives = field(default_factory=Lives)


def _time(when: datetime | None) -> str | None:
    return None if when is None else rfc3339(when)


def _current(lives: Sequence[ReplicaLife], group: str) -> int:
    return sum(1 for life in lives if life.group == group and life.pods)


def _groups(seen: Observed) -> list[dict[str, Any]]:
    counts = state_counts(seen.lives.current)
    out = []
    for group in seen.snapshot.groups:
        chosen = seen.decision.groups.get(group.name)
        out.append(
            {
                "name": group.name,
                "minReplicas": group.min_replicas,
                "maxReplicas": group.max_replicas,
                "numOfHosts": group.num_of_hosts,
                "desired": chosen.replicas if chosen is not None else 0,
                "current": _current(seen.lives.current, group.name),
                "hostResources": amounts(group.resources),
                "backoffUntil": _time(seen.backoff_until.get(group.name)) if group.backoff else None,
                "refused": group.refused,  # a ResourceQuota refuses it or a scaleGate holds it
                "states": counts.get(group.name, {}),
            }
        )
    return out


def _replica(life: ReplicaLife) -> dict[str, Any]:
    return {
        "group": life.group,
        "replica": life.replica,
        "pods": list(life.pods),
        "rayNodes": list(life.ray_nodes),
        "state": str(life.state),
        "since": rfc3339(life.since),
        "idleSince": _time(life.idle_since),
        "cause": life.cause,
        "message": life.message,
        "gone": life.gone,
    }


def _resources(resources: Mapping[str, float]) -> dict[str, float | int]:
    """Ray's resources as `ray status` shows them: without the per-node ``node:<ip>`` markers."""
    return amounts({k: round(v, 6) for k, v in sorted(resources.items()) if not k.startswith("node:")})


def _ray(seen: Observed) -> dict[str, Any] | None:
    if seen.state is None:
        return None
    groups = {n.name: n.group for n in seen.snapshot.nodes}
    nodes: list[dict[str, Any]] = []
    total: dict[str, float] = {}
    used: dict[str, float] = {}
    for node in seen.state.nodes:
        nodes.append(
            {
                "id": node.node_id,
                "pod": node.instance_id or None,
                "group": groups.get(node.instance_id),
                "head": HEAD_RESOURCE in node.total_resources,
                "state": str(node.status),
                "total": _resources(node.total_resources),
                "available": _resources(node.available_resources),
                "idleSeconds": node.idle_seconds,
            }
        )
        if node.alive:
            for name, amount in node.total_resources.items():
                total[name] = total.get(name, 0.0) + amount
                used[name] = used.get(name, 0.0) + amount - node.available_resources.get(name, 0.0)
    sums, taken = _resources(total), _resources(used)
    usage = {name: {"used": taken[name], "total": sums[name]} for name in sums}
    return {"nodes": nodes, "usage": usage}


def _demand(seen: Observed) -> dict[str, Any]:
    pending = demand_entries(seen.snapshot)
    return {
        "pending": [demand_dict(e) for e in pending[:MAX_PENDING]],
        "pendingOmitted": max(len(pending) - MAX_PENDING, 0),
        "unmet": [unmet_dict(e) for e in unmet_entries(seen.decision)],
    }


def cluster_view(seen: Observed, decisions: Sequence[DecisionRecord]) -> dict[str, Any]:
    """The view of one cluster; `decisions` newest first."""
    return {
        "namespace": seen.namespace,
        "name": seen.name,
        "observedAt": rfc3339(seen.at),
        "gcs": {
            "address": seen.gcs.address,
            "reachable": seen.gcs.reachable,
            "lastError": seen.gcs.last_error,
            "lastContactTime": _time(seen.gcs.last_contact),
        },
        "hold": seen.hold,
        "groups": _groups(seen),
        "replicas": [_replica(life) for life in seen.lives.all],
        "ray": _ray(seen),
        "demand": _demand(seen),
        "decisions": [record_dict(r) for r in decisions],
    }


def fleet_entry(seen: Observed) -> dict[str, Any]:
    """The short form of one cluster, for a list of many."""
    totals = Counter(life.state for life in seen.lives.current)
    states = {str(state): totals[state] for state in ReplicaState if state in totals}
    return {
        "namespace": seen.namespace,
        "name": seen.name,
        "lastDecisionTime": rfc3339(seen.at),
        "hold": seen.hold,
        "gcsReachable": seen.gcs.reachable,
        "groups": [
            {"name": g["name"], "desired": g["desired"], "current": g["current"]} for g in _groups(seen)
        ],
        "states": states,
        "unmet": unmet_by_reason(seen.decision),
    }
