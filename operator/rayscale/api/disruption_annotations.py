"""The RayCluster annotations that make Kubernetes' disruptions wait for Ray, spelled once. Pure.

- ``rayscale.io/disruption-budget: "true"``: rayscale keeps a PodDisruptionBudget over the head
  and one over each worker group, each with ``maxUnavailable: 0``, so that a voluntary eviction
  (``kubectl drain``, cluster-autoscaler, Karpenter) is refused by the API server
  (`rayscale.controller.budgets`).
- ``rayscale.io/drain-on-stop: "true"``: each worker's Ray container gets a ``preStop`` hook that
  drains its Ray node before the container stops (`rayscale.controller.prestop`).

Each takes ``"true"`` or ``"false"`` (absent: false); any other value is refused with the
``SpecValid`` condition and a Warning Event naming the annotation (`annotation_problem`).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["DISRUPTION_BUDGET_ANNOTATION", "DRAIN_ON_STOP_ANNOTATION", "annotation_problem", "enabled"]

DISRUPTION_BUDGET_ANNOTATION = "rayscale.io/disruption-budget"
DRAIN_ON_STOP_ANNOTATION = "rayscale.io/drain-on-stop"
_VALUES = ("true", "false")


def enabled(annotations: Mapping[str, str], key: str) -> bool:
    """Whether the annotation `key` is ``"true"`` (a refused value never reaches the planners)."""
    return annotations.get(key) == "true"


def annotation_problem(annotations: Mapping[str, str]) -> str | None:
    """Why a value of these annotations is refused, or None: only ``"true"`` and ``"false"`` are
    implemented (``"True"``, ``"yes"``, ``"1"`` or a JSON object mean nothing here, so they are
    never read as one or the other)."""
    for key in (DISRUPTION_BUDGET_ANNOTATION, DRAIN_ON_STOP_ANNOTATION):
        value = annotations.get(key)
        if value is not None and value not in _VALUES:
            return f'metadata.annotations.{key}: {value!r} is not implemented (use "true" or "false")'
    return None
