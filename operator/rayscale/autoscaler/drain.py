"""Drain before delete: which hosts to ask, in what order, and the decision without refusals.

A running host of a replica removed as ``IDLE`` is asked to drain (``IDLE_TERMINATION``) before
its pod is deleted; a host that refuses (it got work) stays. A replica removed as ``DRAINED`` has
a host that already accepted a drain; its other running hosts are asked the same way.

Replicas removed as ``MAX_REPLICAS`` (``surplus``: the idle ones above a lowered ``maxReplicas``;
the busy ones leave drained for preemption instead, see spec_removals.py) are drained the same
way: one that got work since Ray's state was read refuses and stays. So are they in a cluster
whose RayJob finished (``finished``: rayscale.io/job-finished; every group's maximum is then 0,
see spec_reader.py): the job's end takes the workers, and Ray hears it from a drain before their
pods go.

Multi-host replicas go only as a whole: their hosts are asked one after the other, and the first
refusal stops the round's asking (the rest are not asked) and keeps the whole replica. Hosts that
accepted stay remembered as draining (see snapshot.py), so the replica is due to go (``DRAINED``)
and later rounds ask the remaining hosts again; it is deleted once every host accepted.

Only removals the patch will write are drained (the caller first drops the others; see
patch.py's `writable`). Hosts that are draining, dead or without Ray, and removals for other
causes, are removed without a drain. A running host whose Ray node cannot be named (the GCS is
unreachable) cannot be asked: its replica stays. Asking is draining.py's (the I/O); this module
is pure.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rayscale.autoscaler.scheduling.model import Decision, NodeState, Removal, RemovalCause, Snapshot
from rayscale.common.pods import pod_name
from rayscale.ray import model as ray

__all__ = ["DrainUnit", "drain_plan", "still_draining", "without"]

DRAINED_FIRST = (RemovalCause.IDLE, RemovalCause.DRAINED)


@dataclass(frozen=True, slots=True)
class DrainUnit:
    """One removed replica (or single-host pod) whose running hosts must accept a drain first."""

    unit: str  # the replica name, or the pod name of a single-host group
    hosts: tuple[tuple[str, str | None], ...]  # (pod, Ray node id or None when unknown), in order


def _unit(removal: Removal) -> str:
    return removal.replica or removal.name


def drain_plan(
    decision: Decision,
    snapshot: Snapshot,
    state: ray.ClusterState | None,
    *,
    finished: bool = False,
    surplus: bool = False,
) -> tuple[DrainUnit, ...]:
    """The units of `decision` that must drain before they go, each with the hosts still to ask.
    `finished`: the cluster's RayJob ended; `surplus`: replicas above maxReplicas are drained
    first (not with ``rayscale.io/removal-drain-seconds: "0"``). Either: its MAX_REPLICAS
    removals drain too."""
    nodes = {n.name: n for n in snapshot.nodes}
    causes = (*DRAINED_FIRST, RemovalCause.MAX_REPLICAS) if finished or surplus else DRAINED_FIRST
    hosts: dict[str, list[Removal]] = {}
    for removal in decision.terminate:
        if removal.reason in causes:
            hosts.setdefault(_unit(removal), []).append(removal)
    out = []
    for unit, removals in hosts.items():
        ask: list[tuple[str, str | None]] = []
        for removal in removals:
            node = nodes.get(removal.name)
            if node is None or node.state is not NodeState.RUNNING:
                continue  # draining already, dead, or without Ray: nothing to ask
            found = state.node_by_instance(removal.name) if state is not None else None
            ask.append((removal.name, found.node_id if found is not None and found.alive else None))
        if ask:
            out.append(DrainUnit(unit, tuple(ask)))
    return tuple(out)


def still_draining(
    remembered: Collection[str], listed: Collection[str], pods: Sequence[Mapping[str, Any]]
) -> frozenset[str]:
    """The remembered draining pods whose removal has not landed: they exist and are not `listed`
    in their group's ``workersToDelete`` (`ScalingSpec.workers_to_delete`)."""
    existing = {pod_name(p) for p in pods}
    return frozenset(p for p in remembered if p in existing and p not in listed)


def without(decision: Decision, refused: Collection[str]) -> Decision:
    """`decision` minus the removals of the replicas any of the `refused` pods belongs to."""
    if not refused:
        return decision
    kept = {_unit(r) for r in decision.terminate if r.name in refused}
    back = Counter(
        group for group, _ in {(r.group, _unit(r)) for r in decision.terminate if _unit(r) in kept}
    )
    groups = {
        name: dataclasses.replace(g, replicas=g.replicas + back[name], terminate=g.terminate - back[name])
        for name, g in decision.groups.items()
    }
    return dataclasses.replace(
        decision, groups=groups, terminate=tuple(r for r in decision.terminate if _unit(r) not in kept)
    )
