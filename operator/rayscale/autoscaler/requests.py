"""RayResourceRequest status from one decision (pure).

Each request is an all-or-nothing unit of its own (``<namespace>/<name>``, see
``rayscale.autoscaler.demand``), judged only by what the decision did with its own bundles:

- ``Unsatisfiable`` with the scheduler's reason when any of its bundles is unmet (or a bundle
  cannot be read); other requests, Ray's own ``request_resources`` and pending tasks do not count;
- ``Pending`` while some of its bundles are placed on workers that do not run yet (a new replica,
  a pod starting or without a live Ray node, a replica the spec asks for whose pod the controller
  has not created yet); workers that other demand brings up do not hold it back;
- ``Satisfied`` once every bundle is placed on a worker (or the head) that runs.

A request whose cluster does not exist (or does not autoscale) is ``Pending``. A request with a
bundle that cannot be read (`bundle_problem`) is ``Unsatisfiable`` (``InvalidBundles``, the message
names the field) whatever its cluster: it is never planned, and the cluster's other demand is.

A placement or unmet entry that names no unit (a scheduler that does not tell units apart)
counts against every request, as if all of them were one set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayscale.autoscaler.request_reader import RequestRead, read_request
from rayscale.autoscaler.scheduling.model import Decision, DemandKind, Target, Unmet
from rayscale.common.types import Obj

__all__ = ["INVALID_BUNDLES", "bundle_problem", "decision_status", "pending_status", "status_patch"]

FIELDS = ("phase", "reason", "message", "observedGeneration")
_FIELDS = ("phase", "reason", "message", "observed_generation")  # the same, as the model names them
INVALID_BUNDLES = "InvalidBundles"  # the reason of a request with a bundle that cannot be read
MAX_MESSAGE = 1000
_RUNS = frozenset({Target.RUNNING, Target.HEAD})  # targets whose capacity exists now


def _shape(resources: Mapping[str, float] | None) -> str:
    items = ", ".join(f"{k}: {v:g}" for k, v in sorted((resources or {}).items()))
    return "{" + items + "}"


def _describe(unmet: Unmet) -> str:
    return f"{unmet.count} x {_shape(unmet.resources)} ({unmet.reason})"


def _mine(unit: str | None, own: str) -> bool:
    return unit is None or unit == own


def decision_status(request: Obj, decision: Decision) -> dict[str, Any]:
    """The status of `request` after `decision` on its cluster, from its own bundles only.

    The request is Satisfied only once the capacity exists: none of its bundles placed on a host
    that does not run (a new replica, a pod not running or without a live Ray node, or a replica
    the spec asks for whose pod does not exist yet).
    """
    read = read_request(request)
    if problem := _problem(read):
        return _status(read, "Unsatisfiable", INVALID_BUNDLES, problem)
    own = read.unit
    unmet = [u for u in decision.unmet if u.kind == DemandKind.CONSTRAINT and _mine(u.unit, own)]
    if unmet:
        parts = "; ".join(_describe(u) for u in unmet)
        message = f"the cluster cannot hold all of this request's bundles (all or nothing): {parts}"
        return _status(read, "Unsatisfiable", str(unmet[0].reason), message)
    waiting = _waiting_bundles(decision, own)
    if waiting:
        message = f"scaling up: {waiting} bundle(s) wait for workers that launch or start"
        return _status(read, "Pending", None, message)
    return _status(read, "Satisfied", None, "the cluster can hold every bundle")


def _waiting_bundles(decision: Decision, own: str) -> int:
    """The unit's bundles that the decision placed on hosts that do not run yet (pending or new)."""
    return sum(
        t.count
        for p in decision.placements
        if p.kind == DemandKind.CONSTRAINT and _mine(p.unit, own)
        for t in p.targets
        if t.on not in _RUNS
    )


def bundle_problem(request: Obj) -> str | None:
    """Why a bundle of `request` cannot be read (the field and the rule), or None."""
    return _problem(read_request(request))


def _problem(read: RequestRead) -> str | None:
    return None if read.problem is None else f"a bundle cannot be read: {read.problem}"[:MAX_MESSAGE]


def pending_status(request: Obj, message: str) -> dict[str, Any]:
    """Pending with `message`; Unsatisfiable when a bundle cannot be read."""
    read = read_request(request)
    if problem := _problem(read):
        return _status(read, "Unsatisfiable", INVALID_BUNDLES, problem)
    return _status(read, "Pending", None, message)


def _status(read: RequestRead, phase: str, reason: str | None, message: str) -> dict[str, Any]:
    return {"phase": phase, "reason": reason, "message": message, "observedGeneration": read.generation}


def status_patch(request: Obj, new: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that writes `new`, or None when the request's status already says it."""
    old = read_request(request).status
    said = {} if old is None else old.model_dump(by_alias=True, include=set(_FIELDS))
    if all(said.get(k) == new.get(k) for k in FIELDS):
        return None
    return {"status": {k: new.get(k) for k in FIELDS}}
