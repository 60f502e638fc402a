"""Drain before delete (pure parts): which removals need a drain, and the decision without refusals.

A running node chosen for ``IDLE`` removal is asked to drain (``IDLE_TERMINATION``) first; a node
that refuses (it got work) stays. Multi-host replicas go as a whole: one host refusing keeps all.
Pending nodes and other causes are removed without a drain. Without Ray's state nothing is drained,
and (see snapshot.py) nothing running is ever idle.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection

from rayscale.autoscaler.scheduling.model import Decision, Removal, RemovalCause
from rayscale.ray import model as ray

__all__ = ["drain_targets", "without"]


def drain_targets(decision: Decision, state: ray.ClusterState | None) -> dict[str, str]:
    """Pod name -> Ray node id, for the removals that must drain first."""
    if state is None:
        return {}
    out: dict[str, str] = {}
    for removal in decision.terminate:
        if removal.reason is not RemovalCause.IDLE:
            continue
        node = state.node_by_instance(removal.name)
        if node is not None and node.alive:
            out[removal.name] = node.node_id
    return out


def _unit(removal: Removal) -> str:
    return removal.replica or removal.name


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
