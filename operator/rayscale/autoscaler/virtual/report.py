"""A RayVirtualCluster's status, from the plan and what the scheduler saw. Pure.

Node states: Pending (no pod scheduled yet), Booting (scheduled or running without its Ray node),
Idle / Busy (its Ray node is alive; Ready when Ray was not asked), Dead (its Ray node died),
Releasing (being drained or deleted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rayscale.api.rayvirtualcluster import JobClusterPhase, Phase, VcNodeState
from rayscale.api.virtualcluster_names import job_resource, vc_resource
from rayscale.autoscaler.scheduling.model import DemandKind, Node, NodeState, Unmet
from rayscale.autoscaler.status import WHY
from rayscale.autoscaler.virtual.model import Member, VcPlan, VirtualCluster
from rayscale.autoscaler.virtual.read import vc_meta
from rayscale.common.timefmt import rfc3339
from rayscale.common.types import Obj

__all__ = ["Busy", "node_state", "status_of", "status_patch"]

RUNNING = frozenset({VcNodeState.IDLE, VcNodeState.BUSY, VcNodeState.READY})  # count as ready


@dataclass(frozen=True, slots=True)
class Busy:
    """What still runs on a VC's hosts (why its removal waits)."""

    jobs: int = 0
    actors: int = 0
    placement_groups: int = 0
    tasks: int = 0

    def __bool__(self) -> bool:
        return any((self.jobs, self.actors, self.placement_groups, self.tasks))

    def describe(self) -> str:
        parts = [
            f"{n} {what}"
            for n, what in (
                (self.jobs, "jobs"),
                (self.actors, "actors"),
                (self.placement_groups, "placement groups"),
                (self.tasks, "nodes running tasks"),
            )
            if n
        ]
        return ", ".join(parts) or "nothing"


def node_state(node: Node | None, gcs: bool) -> VcNodeState:
    if node is None or node.state is NodeState.PENDING:
        return VcNodeState.BOOTING if node is not None and node.booting else VcNodeState.PENDING
    if node.state is NodeState.DEAD:
        return VcNodeState.DEAD
    if node.state in (NodeState.DRAINING, NodeState.TERMINATING):
        return VcNodeState.RELEASING
    if not gcs:
        return VcNodeState.READY
    return VcNodeState.IDLE if node.idle_seconds > 0 else VcNodeState.BUSY


def _condition(
    old: Obj, kind: str, ok: bool, reason: str, message: str, generation: int, now: datetime
) -> dict[str, Any]:
    previous: Obj = next((c for c in old.get("conditions") or [] if c.get("type") == kind), {})
    value = "True" if ok else "False"
    when = previous.get("lastTransitionTime") if previous.get("status") == value else None
    return {
        "type": kind,
        "status": value,
        "reason": reason,
        "message": message[:1000],
        "observedGeneration": generation,
        "lastTransitionTime": when or rfc3339(now),
    }


def _unmet(items: Sequence[Unmet]) -> list[dict[str, Any]]:
    out = []
    for u in items:
        what = dict(u.resources or {}) if u.kind != DemandKind.GANG else {"bundles": len(u.bundles or ())}
        out.append(
            {
                "reason": str(u.reason),
                "message": f"{u.kind} {what}: {WHY.get(u.reason, '')}",
                "count": u.count,
            }
        )
    return out


def status_of(
    obj: Obj,
    *,
    errors: Sequence[str] = (),
    vc: VirtualCluster | None = None,
    plan: VcPlan | None = None,
    members: Mapping[str, Member] = {},
    nodes: Mapping[str, Node] = {},
    node_ids: Mapping[str, str] = {},
    busy: Busy | None = None,
    gcs: bool = True,
    now: datetime,
) -> dict[str, Any]:
    """The whole status of the VC `obj` (`vc` its reading, None when invalid)."""
    meta = vc_meta(obj)
    old = obj.get("status") or {}  # what rayscale wrote last: its conditions keep their times
    name = meta.name
    generation = meta.generation or 0
    if errors or vc is None:
        message = "; ".join(errors) or "the virtual cluster cannot be read"
        return {
            **{k: old.get(k) for k in ("revision", "groups", "jobClusters")},
            "phase": Phase.REMOVING if meta.deletion_timestamp else Phase.INVALID,
            "observedGeneration": generation,
            "rayResource": vc_resource(name),
            "busy": None,
            "unmet": None,
            "conditions": [_condition(old, "SpecValid", False, "InvalidSpec", message, generation, now)],
        }
    desired = (plan.desired.get(vc.name) if plan is not None else None) or {}
    groups = []
    settled = True
    for share in vc.groups:
        mine = sorted(
            p for p, m in members.items() if m.vc == vc.name and p in nodes and nodes[p].group == share.name
        )
        listed = []
        for pod in mine:
            state = node_state(nodes.get(pod), gcs)
            entry: dict[str, Any] = {"pod": pod, "state": state}
            if pod in node_ids:
                entry["nodeId"] = node_ids[pod]
            if members[pod].job is not None:
                entry["jobCluster"] = members[pod].job
            listed.append(entry)
        ready = sum(1 for e in listed if e["state"] in RUNNING)
        target = desired.get(share.name, share.desired)
        settled = settled and ready == target == len(listed)
        groups.append({"groupName": share.name, "desired": target, "ready": ready, "nodes": listed})
    jobs = []
    for cluster in plan.jobs if plan is not None else ():
        if cluster.vc != vc.name:
            continue
        entry = {
            "name": cluster.name,
            "rayResource": job_resource(vc.name, cluster.name),
            "phase": JobClusterPhase.DESTROYING if cluster.destroying else JobClusterPhase.ACTIVE,
            "groups": [{"groupName": g, "nodes": n} for g, n in sorted(cluster.hosts.items())],
        }
        if cluster.reason:
            entry["reason"] = cluster.reason
        jobs.append(entry)
    unmet = _unmet(plan.unmet.get(vc.name, ())) if plan is not None else []
    if vc.removing:
        phase = Phase.REMOVING
    elif not any(g["nodes"] for g in groups) and any(g["desired"] for g in groups):
        phase = Phase.PENDING
    else:
        phase = Phase.READY if settled and not unmet else Phase.SCALING
    conditions = [_condition(old, "SpecValid", True, "Valid", "", generation, now)]
    if vc.removing:
        waiting = busy.describe() if busy else "idle nodes to go back"
        conditions.append(
            _condition(old, "RemovalBlocked", True, "StillRunning", f"waiting for {waiting}", generation, now)
        )
    ready_message = "every group has its desired nodes" if settled else "nodes are being assigned or started"
    conditions.append(
        _condition(old, "Ready", settled, "Ready" if settled else "Scaling", ready_message, generation, now)
    )
    return {
        "phase": phase,
        "revision": generation,
        "observedGeneration": generation,
        "rayResource": vc_resource(vc.name),
        "groups": groups,
        "jobClusters": jobs or None,
        "busy": (
            {
                "jobs": busy.jobs,
                "actors": busy.actors,
                "placementGroups": busy.placement_groups,
                "tasks": busy.tasks,
            }
            if busy is not None and vc.removing
            else None
        ),
        "unmet": unmet or None,
        "conditions": conditions,
    }


def status_patch(obj: Obj, new: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch writing `new`, None when the status already says it."""
    old = obj.get("status") or {}
    if all(old.get(k) == v for k, v in new.items()):
        return None
    return {"status": dict(new)}
