"""RayResourceRequest status from one decision (pure).

All requests bound to a cluster join one all-or-nothing constraint set, so they share a verdict:
``Satisfied`` when the decision left no constraint unmet and every bundle is placed on a worker
that runs (``Pending`` while the workers that hold the bundles launch or start, also between the
scale-up patch and the controller creating their pods; workers that other demand brings up do not
hold a request back), else ``Unsatisfiable`` with the scheduler's reason. A request whose cluster
does not exist (or does not autoscale) is ``Pending``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayscale.autoscaler.scheduling.model import Decision, Target, Unmet

__all__ = ["decision_status", "pending_status", "status_patch"]

Obj = Mapping[str, Any]
FIELDS = ("phase", "reason", "message", "observedGeneration")


def _shape(resources: Mapping[str, float] | None) -> str:
    items = ", ".join(f"{k}: {v:g}" for k, v in sorted((resources or {}).items()))
    return "{" + items + "}"


def _describe(unmet: Unmet) -> str:
    return f"{unmet.count} x {_shape(unmet.resources)} ({unmet.reason})"


def decision_status(request: Obj, decision: Decision) -> dict[str, Any]:
    """The status of `request` after `decision` on its cluster.

    The request is Satisfied only once the capacity exists: no bundle placed on a host that does
    not run (a new replica, a pod not running or without a live Ray node, or a replica the spec
    asks for whose pod does not exist yet).
    """
    unmet = [u for u in decision.unmet if u.kind == "constraint"]
    if not unmet:
        waiting = _waiting_bundles(decision)
        if waiting:
            message = f"scaling up: {waiting} bundle(s) wait for workers that launch or start"
            return _status(request, "Pending", None, message)
        return _status(request, "Satisfied", None, "the cluster can hold every bundle")
    parts = "; ".join(_describe(u) for u in unmet)
    message = f"the cluster cannot hold the requested bundles (all or nothing): {parts}"
    return _status(request, "Unsatisfiable", str(unmet[0].reason), message)


def _waiting_bundles(decision: Decision) -> int:
    """Constraint bundles the decision placed on hosts that do not run yet (pending or new)."""
    return sum(
        t.count
        for p in decision.placements
        if p.kind == "constraint"
        for t in p.targets
        if t.on is not Target.RUNNING
    )


def pending_status(request: Obj, message: str) -> dict[str, Any]:
    return _status(request, "Pending", None, message)


def _status(request: Obj, phase: str, reason: str | None, message: str) -> dict[str, Any]:
    generation = (request.get("metadata") or {}).get("generation")
    return {"phase": phase, "reason": reason, "message": message, "observedGeneration": generation}


def status_patch(request: Obj, new: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that writes `new`, or None when the request's status already says it."""
    old = request.get("status") or {}
    if all(old.get(k) == new.get(k) for k in FIELDS):
        return None
    return {"status": {k: new.get(k) for k in FIELDS}}
