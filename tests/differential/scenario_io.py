"""A Snapshot as a scenario document (docs/scenario-format.md), and back, to replay a case.

``to_scenario`` writes every field the case uses; ``roundtrip`` checks that rayscale's own parser
reads the document back into the very same Snapshot, so a failure file replays exactly the case
that failed (``rayscale simulate FILE``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from rayscale.autoscaler.scenario import ScenarioError, parse_scenario
from rayscale.autoscaler.scheduling.model import (
    RAY_REQUEST_UNIT,
    UNLIMITED,
    Options,
    Selector,
    Snapshot,
    UpscalingMode,
)

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _amounts(resources: Mapping[str, float]) -> dict[str, float | int]:
    return {k: int(v) if float(v).is_integer() else float(v) for k, v in resources.items()}


def _selector(sel: Selector) -> list[dict[str, Any]]:
    return [{"key": c.key, "op": str(c.op), "values": list(c.values)} for c in sel]


def to_scenario(snapshot: Snapshot) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    groups = []
    for g in snapshot.groups:
        item: dict[str, Any] = {"name": g.name, "resources": _amounts(g.resources)}
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
        groups.append(item)
    doc["groups"] = groups
    if snapshot.head is not None:
        head: dict[str, Any] = {"resources": _amounts(snapshot.head.resources)}
        if snapshot.head.available is not None:
            head["available"] = _amounts(snapshot.head.available)
        if snapshot.head.labels:
            head["labels"] = dict(snapshot.head.labels)
        doc["head"] = head
    nodes = []
    for n in snapshot.nodes:
        node: dict[str, Any] = {"name": n.name, "group": n.group, "state": str(n.state)}
        if n.replica is not None:
            node["replica"] = n.replica
        if n.available is not None:
            node["available"] = _amounts(n.available)
        if n.idle_seconds:
            node["idleSeconds"] = n.idle_seconds
        if n.pending_seconds:
            node["pendingSeconds"] = n.pending_seconds
        if n.booting:
            node["booting"] = True
        if n.labels is not None:
            node["labels"] = dict(n.labels)
        nodes.append(node)
    if nodes:
        doc["nodes"] = nodes
    demands = []
    for d in snapshot.demands:
        item = {"resources": _amounts(d.resources), "count": d.count}
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
            "bundles": [_amounts(b) for b in gang.bundles],
            "count": gang.count,
        }
        if gang.bundle_selectors:
            item["bundleSelectors"] = [_selector(s) if s else None for s in gang.bundle_selectors]
        gangs.append(item)
    if gangs:
        doc["gangs"] = gangs
    constraints = []
    for c in snapshot.constraints:
        item = {"resources": _amounts(c.resources), "count": c.count}
        if c.label_selector:
            item["labelSelector"] = _selector(c.label_selector)
        if c.unit != RAY_REQUEST_UNIT:
            item["unit"] = c.unit
        constraints.append(item)
    if constraints:
        doc["constraints"] = constraints
    o, base = snapshot.options, Options()
    options: dict[str, Any] = {"idleTimeoutSeconds": o.idle_timeout_seconds}
    if o.upscaling_mode is not UpscalingMode.DEFAULT:
        options["upscalingMode"] = str(o.upscaling_mode)
    if o.max_workers is not None:
        options["maxWorkers"] = o.max_workers
    if o.max_node_provision_seconds != base.max_node_provision_seconds:
        options["maxNodeProvisionSeconds"] = o.max_node_provision_seconds
    if o.max_node_boot_seconds != base.max_node_boot_seconds:
        options["maxNodeBootSeconds"] = o.max_node_boot_seconds
    doc["options"] = options
    return doc


def roundtrip(snapshot: Snapshot) -> str | None:
    """None when the scenario parser reads ``snapshot``'s document back unchanged, else why not."""
    try:
        text = yaml.dump(to_scenario(snapshot), Dumper=_Dumper, sort_keys=False)
        parsed = parse_scenario(yaml.load(text, Loader=_Loader))
    except ScenarioError as exc:
        return f"the scenario parser rejects it: {exc}"
    if parsed == snapshot:
        return None
    for name in ("groups", "nodes", "demands", "gangs", "constraints", "options", "head"):
        if getattr(parsed, name) != getattr(snapshot, name):
            return f"the scenario parser reads {name} differently"
    return "the scenario parser reads it differently"


def write(path: Path, snapshot: Snapshot, comment: str) -> None:
    """Write ``snapshot`` as a scenario file headed by ``comment`` (one ``#`` line per line)."""
    header = "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines())
    body = yaml.safe_dump(to_scenario(snapshot), sort_keys=False, default_flow_style=None, width=110)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + body, encoding="utf-8")


def read(path: Path) -> Snapshot:
    """The snapshot of a scenario file."""
    return parse_scenario(yaml.safe_load(path.read_text(encoding="utf-8")))
