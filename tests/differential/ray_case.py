"""A rayscale Snapshot as the JSON the Ray oracle reads (plain data; no Ray import here).

The translation follows what KubeRay's autoscaling config and Ray's reconciler hand to the
scheduler:

- one node type per group: ``min_worker_nodes = minReplicas * numOfHosts``, ``max_worker_nodes =
  maxReplicas * numOfHosts``, the group's idle timeout and priority; the head's type
  (``headgroup``, listed first) has max 1 and holds the HEAD instance;
- ``max_num_nodes = maxWorkers + 1`` when a worker cap is set (the head counts);
- running hosts are RAY_RUNNING instances with a GCS node state (total, available, labels; IDLE
  with its idle time, else RUNNING); pending hosts are REQUESTED (unscheduled pod) or ALLOCATED
  (scheduled, booting) instances without a Ray node, and one past its provisioning (or boot)
  limit is what Ray's instance manager makes of it by then (ALLOCATION_TIMEOUT: failed, not
  schedulable, to be replaced); a running host of a multi-host TPU replica reports
  ``TPU-<type>-head`` only on host 0 (its place in the snapshot's replica order), while the node
  type (KubeRay's config) lists it for every host, as Ray reads it; a draining host is what the
  reconciler makes of a DRAINING Ray node (RAY_STOPPING: not schedulable, not counted), a dead
  one what it makes of a DEAD one (RAY_STOPPED); terminating hosts are TERMINATING;
- a demand's selectors are ``label_selectors = [selector, *fallbacks]``;
- a placement group is one gang per group (``count`` of them, each its own id) with both the
  legacy ``requests`` and one ``BundleSelector`` (each bundle with its selector), the strategy in
  ``details`` and, as the GCS does, affinity (STRICT_PACK) or anti-affinity (STRICT_SPREAD) on
  the label ``_PG_<id>``;
- constraints become Ray's single ``ClusterResourceConstraint`` (``request_resources``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from rayscale.autoscaler.scheduling.model import (
    UNLIMITED,
    LabelOp,
    NodeState,
    Selector,
    Snapshot,
    drained_while_working,
)
from tests.differential.checks import broken_replica_hosts, stuck
from tests.differential.replay import host_capacity

HEAD_TYPE = "headgroup"
HEAD_NAME = "head"

_PENDING = {False: "REQUESTED", True: "ALLOCATED"}


def selector_json(sel: Selector) -> list[dict[str, Any]]:
    return [
        {"key": c.key, "op": "IN" if c.op is LabelOp.IN else "NOT_IN", "values": list(c.values)} for c in sel
    ]


def pg_id(case_id: str, gang: int, copy: int) -> str:
    """A stable 18-byte placement group id (hex), as Ray prints them."""
    return hashlib.sha256(f"{case_id}/{gang}/{copy}".encode()).hexdigest()[:36]


def _amounts(resources: Mapping[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in resources.items()}


def to_ray(case_id: str, snapshot: Snapshot) -> dict[str, Any]:
    head = snapshot.head
    head_resources = _amounts(head.resources) if head is not None else {}
    head_labels = dict(head.labels) if head is not None else {}
    node_types: list[dict[str, Any]] = [
        {
            "name": HEAD_TYPE,
            "min": 0,
            "max": 1,
            "resources": head_resources,
            "labels": head_labels,
            "idle_timeout_s": None,
            "priority": 0,
        }
    ]
    by_name = {g.name: g for g in snapshot.groups}
    for g in snapshot.groups:
        high = g.max_replicas * g.num_of_hosts if g.max_replicas < UNLIMITED else UNLIMITED
        node_types.append(
            {
                "name": g.name,
                "min": g.min_replicas * g.num_of_hosts,
                "max": high,
                "resources": _amounts(g.resources),
                "labels": dict(g.labels),
                "idle_timeout_s": g.idle_timeout_seconds,
                "priority": g.priority,
            }
        )

    instances: list[dict[str, Any]] = []
    if head is not None:
        available = head.available if head.available is not None else head.resources
        instances.append(
            {
                "name": HEAD_NAME,
                "type": HEAD_TYPE,
                "head": True,
                "status": "RAY_RUNNING",
                "ray": {
                    "status": "RUNNING",
                    "total": head_resources,
                    "available": _amounts(available),
                    "labels": head_labels,
                    "idle_ms": 0,
                },
            }
        )
    position: dict[str, int] = {}
    for n in snapshot.nodes:
        g = by_name[n.group]
        index = position.get(n.replica or n.name, 0)
        position[n.replica or n.name] = index + 1
        entry: dict[str, Any] = {"name": n.name, "type": n.group, "head": False, "ray": None}
        if stuck(n, snapshot.options):
            entry["status"] = "ALLOCATION_TIMEOUT"
        elif n.state is NodeState.RUNNING:
            total = host_capacity(g, index)
            free = n.available if n.available is not None else total  # {}: all in use
            available = {k: float(free.get(k, 0.0)) for k in total}
            idle_ms = round(n.idle_seconds * 1000)
            entry["status"] = "RAY_RUNNING"
            entry["ray"] = {
                "status": "IDLE" if idle_ms > 0 else "RUNNING",
                "total": total,
                "available": available,
                "labels": dict(n.labels if n.labels is not None else g.labels),
                "idle_ms": idle_ms,
            }
        elif n.state is NodeState.PENDING:
            entry["status"] = _PENDING[n.booting]
        elif n.state is NodeState.DRAINING:
            entry["status"] = "RAY_STOPPING"
            entry["ray"] = {"status": "DRAINING", "total": {}, "available": {}, "labels": {}, "idle_ms": 0}
        elif n.state is NodeState.DEAD:
            entry["status"] = "RAY_STOPPED"
            entry["ray"] = {"status": "DEAD", "total": {}, "available": {}, "labels": {}, "idle_ms": 0}
        else:
            entry["status"] = "TERMINATING"
        instances.append(entry)

    demands = [
        {
            "resources": _amounts(d.resources),
            "count": d.count,
            "selectors": [selector_json(s) for s in d.selectors],
        }
        for d in snapshot.demands
    ]
    gangs = []
    for gi, gang in enumerate(snapshot.gangs):
        for copy in range(gang.count):
            gangs.append(
                {
                    "gang": gi,
                    "pg": pg_id(case_id, gi, copy),
                    "strategy": str(gang.strategy),
                    "bundles": [
                        {
                            "resources": _amounts(b),
                            "selector": selector_json(gang.bundle_selectors[i])
                            if gang.bundle_selectors
                            else [],
                        }
                        for i, b in enumerate(gang.bundles)
                    ],
                }
            )
    constraint = None
    if snapshot.constraints:
        constraint = [
            {
                "resources": _amounts(c.resources),
                "count": c.count,
                "selector": selector_json(c.label_selector),
            }
            for c in snapshot.constraints
        ]
    cap = snapshot.options.max_workers
    return {
        "id": case_id,
        "node_types": node_types,
        "max_num_nodes": None if cap is None else cap + 1,
        "idle_timeout_s": snapshot.options.idle_timeout_seconds,
        "instances": instances,
        "demands": demands,
        "gangs": gangs,
        "constraint": constraint,
    }


def variant(case: dict[str, Any], name: str, snapshot: Snapshot) -> dict[str, Any]:
    """``case`` (of ``snapshot``) for a counterfactual run of Ray, to tell the differences of a known
    Ray quirk, or of what KubeRay does with Ray's answer, apart.

    ``no-cut-absorb``: the oracle keeps the nodes Ray removes in the same pass out of the bin-packing
    (they take no work and do not count toward ``max_num_nodes``), as rayscale does.
    ``merged-packs``: every bundle of a STRICT_PACK group carries all of the group's selectors, so
    Ray packs the group's bundles together on one node, as rayscale does.
    ``held-pods``: the pods of replicas kept by a host drained while it works still count towards
    maxReplicas and maxWorkers (Ray does not count them, KubeRay's controller does: it never runs
    more pods than maxReplicas), as in rayscale.
    ``backed-off``: a group with a host past its launch limit launches nothing beyond its minimum
    this pass (Ray relaunches the same type at once), as rayscale backs it off.
    ``broken-replicas``: the hosts of a multi-host replica with a dead, idle draining or failed
    (past its launch limit) host are going (TERMINATING): KubeRay deletes a replica whole.
    Names joined with ``+`` apply one after the other.
    """
    if "+" in name:
        for part in name.split("+"):
            case = variant(case, part, snapshot)
        return dict(case, variant=name)
    if name == "no-cut-absorb":
        return dict(case, variant=name)
    if name in ("held-pods", "backed-off"):
        return _capped(case, snapshot, name)
    if name == "broken-replicas":
        gone = {n.name for n in broken_replica_hosts(snapshot)}
        instances = [
            dict(i, status="TERMINATING", ray=None) if i["name"] in gone else i for i in case["instances"]
        ]
        return dict(case, instances=instances, variant=name)
    if name != "merged-packs":
        raise ValueError(f"unknown variant {name!r}")
    gangs = []
    for gang in case["gangs"]:
        if gang["strategy"] == "STRICT_PACK":
            merged: list[dict[str, Any]] = []
            for b in gang["bundles"]:
                merged += [c for c in b["selector"] if c not in merged]
            gang = dict(gang, bundles=[dict(b, selector=merged) for b in gang["bundles"]])
        gangs.append(gang)
    return dict(case, gangs=gangs, variant=name)


def _type_counts(snapshot: Snapshot) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Per group: the hosts Ray counts (running or pending, not past a limit, not of a broken
    replica), the hosts of replicas held by a host drained while it works, and the hosts past
    their launch limit."""
    counted: dict[str, int] = {}
    held: dict[str, int] = {}
    stuck_hosts: dict[str, int] = {}
    holding = {(n.group, n.replica or n.name) for n in snapshot.nodes if drained_while_working(n)}
    broken = {n.name for n in broken_replica_hosts(snapshot)}  # removed whole by rayscale
    for n in snapshot.nodes:
        if n.name in broken:
            continue
        if stuck(n, snapshot.options):
            stuck_hosts[n.group] = stuck_hosts.get(n.group, 0) + 1
        elif (n.group, n.replica or n.name) in holding and n.state is not NodeState.TERMINATING:
            held[n.group] = held.get(n.group, 0) + 1
        elif n.state in (NodeState.RUNNING, NodeState.PENDING):
            counted[n.group] = counted.get(n.group, 0) + 1
    return counted, held, stuck_hosts


def _capped(case: dict[str, Any], snapshot: Snapshot, name: str) -> dict[str, Any]:
    counted, held, stuck_hosts = _type_counts(snapshot)
    types = []
    for t in case["node_types"]:
        have = counted.get(t["name"], 0)
        if name == "held-pods" and held.get(t["name"]) and t["max"] < UNLIMITED:
            high = min(t["max"], max(t["max"] - held[t["name"]], have))
            t = dict(t, max=high, min=min(t["min"], high))
        elif name == "backed-off" and stuck_hosts.get(t["name"]):
            t = dict(t, max=min(t["max"], max(t["min"], have)))
        types.append(t)
    out = dict(case, node_types=types, variant=name)
    if name == "held-pods":  # a held replica's hosts take no work (RAY_STOPPING, as draining ones)
        holding = {(n.group, n.replica or n.name) for n in snapshot.nodes if drained_while_working(n)}
        names = {n.name for n in snapshot.nodes if (n.group, n.replica or n.name) in holding}
        stopping = {"status": "DRAINING", "total": {}, "available": {}, "labels": {}, "idle_ms": 0}
        names -= {i["name"] for i in case["instances"] if i["status"] == "TERMINATING"}
        draining = {"status": "RAY_STOPPING", "ray": stopping}
        out["instances"] = [dict(i, **draining) if i["name"] in names else i for i in case["instances"]]
    if name == "held-pods" and case["max_num_nodes"] is not None:
        live = 1 + sum(counted.values())
        cap = case["max_num_nodes"]
        out["max_num_nodes"] = min(cap, max(cap - sum(held.values()), live))
    return out
