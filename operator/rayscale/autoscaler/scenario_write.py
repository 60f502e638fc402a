"""A Snapshot as a scenario document (docs/scenario-format.md), the inverse of ``parse_scenario``.

``to_scenario`` writes every field the snapshot uses, so ``rayscale simulate`` replays the very
decision the scheduler made from it: the autoscaler keeps it for its latest decisions (history.py)
and the differential test writes its failing cases with it. Resource amounts that are whole print
as integers; a resource of 0 is written as 0 (the parser reads it as absent, which means the same).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayscale.autoscaler.scheduling.model import (
    RAY_REQUEST_UNIT,
    UNLIMITED,
    Group,
    Head,
    Node,
    Options,
    Selector,
    Snapshot,
    UpscalingMode,
)

__all__ = ["amounts", "to_scenario"]


def amounts(resources: Mapping[str, float]) -> dict[str, float | int]:
    """A resource map with whole amounts as integers (``{"CPU": 8}``, not ``8.0``)."""
    return {k: int(v) if float(v).is_integer() else float(v) for k, v in resources.items()}


def _selector(sel: Selector) -> list[dict[str, Any]]:
    return [{"key": c.key, "op": str(c.op), "values": list(c.values)} for c in sel]


def _group(g: Group) -> dict[str, Any]:
    item: dict[str, Any] = {"name": g.name, "resources": amounts(g.resources)}
    if g.labels:
        item["labels"] = dict(g.labels)
    if g.min_replicas:
        item["minReplicas"] = g.min_replicas
    if g.max_replicas != UNLIMITED:
        item["maxReplicas"] = g.max_replicas
    if g.num_of_hosts != 1:
        item["numOfHosts"] = g.num_of_hosts
    if g.idle_timeout_seconds is not None:
        item["idleTimeoutSeconds"] = g.idle_timeout_seconds
    if g.priority:
        item["priority"] = g.priority
    if g.backoff:
        item["backoff"] = True
    if g.refused:
        item["refused"] = True
    return item


def _head(h: Head) -> dict[str, Any]:
    head: dict[str, Any] = {"resources": amounts(h.resources)}
    if h.available is not None:
        head["available"] = amounts(h.available)
    if h.labels:
        head["labels"] = dict(h.labels)
    return head


def _node(n: Node) -> dict[str, Any]:
    node: dict[str, Any] = {"name": n.name, "group": n.group, "state": str(n.state)}
    if n.replica is not None:
        node["replica"] = n.replica
    if n.available is not None:
        node["available"] = amounts(n.available)
    if n.idle_seconds:
        node["idleSeconds"] = n.idle_seconds
    if n.pending_seconds:
        node["pendingSeconds"] = n.pending_seconds
    if n.booting:
        node["booting"] = True
    if n.refused:
        node["refused"] = True
    if n.labels is not None:
        node["labels"] = dict(n.labels)
    return node


def _options(o: Options) -> dict[str, Any]:
    base = Options()
    options: dict[str, Any] = {"idleTimeoutSeconds": o.idle_timeout_seconds}
    if o.upscaling_mode is not UpscalingMode.DEFAULT:
        options["upscalingMode"] = str(o.upscaling_mode)
    if o.max_workers is not None:
        options["maxWorkers"] = o.max_workers
    if o.max_node_provision_seconds != base.max_node_provision_seconds:
        options["maxNodeProvisionSeconds"] = o.max_node_provision_seconds
    if o.max_node_boot_seconds != base.max_node_boot_seconds:
        options["maxNodeBootSeconds"] = o.max_node_boot_seconds
    return options


def to_scenario(snapshot: Snapshot) -> dict[str, Any]:
    """The scenario document of `snapshot` (plain data: ready for ``yaml.safe_dump`` or JSON)."""
    doc: dict[str, Any] = {"groups": [_group(g) for g in snapshot.groups]}
    if snapshot.head is not None:
        doc["head"] = _head(snapshot.head)
    if snapshot.nodes:
        doc["nodes"] = [_node(n) for n in snapshot.nodes]
    demands = []
    for d in snapshot.demands:
        item: dict[str, Any] = {"resources": amounts(d.resources), "count": d.count}
        if d.label_selector:
            item["labelSelector"] = _selector(d.label_selector)
        if d.fallbacks:
            item["fallbacks"] = [_selector(s) for s in d.fallbacks]
        demands.append(item)
    if demands:
        doc["demands"] = demands
    gangs = []
    for gang in snapshot.gangs:
        item = {
            "strategy": str(gang.strategy),
            "bundles": [amounts(b) for b in gang.bundles],
            "count": gang.count,
        }
        if gang.bundle_selectors:
            item["bundleSelectors"] = [_selector(s) if s else None for s in gang.bundle_selectors]
        gangs.append(item)
    if gangs:
        doc["gangs"] = gangs
    constraints = []
    for c in snapshot.constraints:
        item = {"resources": amounts(c.resources), "count": c.count}
        if c.label_selector:
            item["labelSelector"] = _selector(c.label_selector)
        if c.unit != RAY_REQUEST_UNIT:
            item["unit"] = c.unit
        constraints.append(item)
    if constraints:
        doc["constraints"] = constraints
    doc["options"] = _options(snapshot.options)
    return doc
