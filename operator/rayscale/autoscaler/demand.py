"""Ray's pending demand and the RayResourceRequests, as scheduler inputs.

Tasks and actors (with their label selectors and fallbacks), placement groups (with per-bundle
label selectors), Ray's ``request_resources`` and each RayResourceRequest bound to the cluster (each
its own all-or-nothing unit), translated from the GCS state (``rayscale.ray.model``) and the
custom resources. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rayscale.autoscaler.scenario import ScenarioError, resources
from rayscale.autoscaler.scheduling.model import (
    Constraint,
    Demand,
    Gang,
    LabelConstraint,
    LabelOp,
    Strategy,
)
from rayscale.ray import model as ray

__all__ = ["gcs_constraints", "gcs_demands", "gcs_gangs", "request_constraints"]

Obj = Mapping[str, Any]

_OPS = {ray.LabelOperator.IN: LabelOp.IN, ray.LabelOperator.NOT_IN: LabelOp.NOT_IN}


def _selector(request: ray.ResourceRequest) -> tuple[LabelConstraint, ...]:
    """The first of the request's label selectors (Ray tries them in order; the first is preferred)."""
    if not request.label_selectors:
        return ()
    return tuple(
        LabelConstraint(c.key, _OPS[c.operator], tuple(c.values))
        for c in request.label_selectors[0].constraints
        if c.operator in _OPS
    )


def gcs_demands(state: ray.ClusterState | None) -> tuple[Demand, ...]:
    if state is None:
        return ()
    return tuple(
        Demand(dict(d.request.resources), d.count, _selector(d.request))
        for d in state.pending_requests
        if d.count > 0
    )


def _strategy(gang: ray.GangRequest) -> Strategy:
    try:
        return Strategy(gang.strategy)
    except ValueError:
        pass
    kinds = {c.kind for b in gang.bundles for c in b.placement_constraints}
    if "affinity" in kinds:
        return Strategy.STRICT_PACK
    if "anti_affinity" in kinds:
        return Strategy.STRICT_SPREAD
    return Strategy.PACK


def gcs_gangs(state: ray.ClusterState | None) -> tuple[Gang, ...]:
    """Pending placement groups; identical ones (same strategy and bundles) are counted together."""
    if state is None:
        return ()
    counts: dict[tuple[Strategy, tuple[tuple[tuple[str, float], ...], ...]], int] = {}
    for gang in state.pending_gangs:
        if not gang.bundles:
            continue
        key = (_strategy(gang), tuple(tuple(sorted(b.resources.items())) for b in gang.bundles))
        counts[key] = counts.get(key, 0) + 1
    return tuple(
        Gang(strategy, tuple(dict(b) for b in bundles), count)
        for (strategy, bundles), count in counts.items()
    )


def gcs_constraints(state: ray.ClusterState | None) -> tuple[Constraint, ...]:
    if state is None:
        return ()
    return tuple(
        Constraint(dict(d.request.resources), d.count)
        for constraint in state.constraints
        for d in constraint
        if d.count > 0
    )


def request_constraints(cluster: Obj, requests: Sequence[Obj]) -> tuple[Constraint, ...]:
    """The bundles of the RayResourceRequests bound to `cluster` (same namespace and clusterName).

    Requests being deleted are left out, and so is a request with an unreadable bundle (the CRD
    schema rejects most; its status says why).
    """
    meta = cluster.get("metadata") or {}
    out: list[Constraint] = []
    for request in sorted(requests, key=lambda r: str((r.get("metadata") or {}).get("name", ""))):
        rmeta = request.get("metadata") or {}
        spec = request.get("spec") or {}
        if rmeta.get("deletionTimestamp") or rmeta.get("namespace") != meta.get("namespace"):
            continue
        if spec.get("clusterName") != meta.get("name"):
            continue
        try:
            out += _bundles(spec.get("bundles"))
        except (ScenarioError, TypeError, ValueError):
            continue
    return tuple(out)


def _bundles(value: Any) -> list[Constraint]:
    out = []
    for i, bundle in enumerate(value or []):
        count = int(bundle.get("count", 1))
        shape = resources(bundle.get("resources"), f"bundles[{i}].resources")
        if count > 0 and shape:
            out.append(Constraint(shape, count))
    return out
