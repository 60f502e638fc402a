"""The RayCluster annotations that make Kubernetes' disruptions wait for Ray, spelled once. Pure.

- ``rayscale.io/disruption-budget: "true"``: rayscale keeps a PodDisruptionBudget over the head
  and one over each worker group, each with ``maxUnavailable: 0``, so that a voluntary eviction
  (``kubectl drain``, cluster-autoscaler, Karpenter) is refused by the API server
  (`rayscale.controller.budgets`).
- ``rayscale.io/drain-on-stop: "true"``: each worker's Ray container gets a ``preStop`` hook that
  drains its Ray node before the container stops (`rayscale.controller.prestop`).

Each takes ``"true"`` or ``"false"`` (absent: false); any other value is refused with the
``SpecValid`` condition and a Warning Event naming the annotation (`annotation_problem`).

- ``rayscale.io/removal-drain-seconds: "N"``: how long the Ray nodes of a worker group removed
  from the spec, or of the replicas above a lowered ``maxReplicas``, may drain before their pods
  go anyway (whole seconds, counted from when rayscale first saw the removal; ``"0"``: deleted at
  once without a drain; absent: no deadline, a busy node stays until idle). Read by the
  autoscaler (`removal_drain_seconds`); a value that is not a whole number of seconds, 0 or more,
  is not refused with the spec: the autoscaler warns (a Warning Event and a condition) and reads it
  as absent.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "DISRUPTION_BUDGET_ANNOTATION",
    "DRAIN_ON_STOP_ANNOTATION",
    "REMOVAL_DRAIN_ANNOTATION",
    "annotation_problem",
    "enabled",
    "removal_drain_seconds",
]

DISRUPTION_BUDGET_ANNOTATION = "rayscale.io/disruption-budget"
DRAIN_ON_STOP_ANNOTATION = "rayscale.io/drain-on-stop"
REMOVAL_DRAIN_ANNOTATION = "rayscale.io/removal-drain-seconds"
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


def removal_drain_seconds(annotations: Mapping[str, str]) -> tuple[int | None, str | None]:
    """``rayscale.io/removal-drain-seconds`` as (seconds, problem): (None, None) when absent;
    (None, why) when its value is not a whole number of seconds, 0 or more (read as absent)."""
    value = annotations.get(REMOVAL_DRAIN_ANNOTATION)
    if value is None:
        return None, None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return int(text), None
    return None, (
        f"metadata.annotations.{REMOVAL_DRAIN_ANNOTATION}: {value!r} is not a whole number of seconds,"
        " 0 or more; read as unset (no deadline: a busy Ray node of a removed worker group, or above"
        " a lowered maxReplicas, stays until it is idle)"
    )
