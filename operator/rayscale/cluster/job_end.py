"""A RayJob's RayCluster whose job has ended: the annotation the RayJob controller sets on it, read
by both halves: every worker group's ``minReplicas`` then counts as 0 (`finished_spec`), and the
autoscaler drains every worker and scales every group to 0. Pure.

The annotation's value says why, in words (``RayJob ns/name finished (SUCCEEDED)``); the autoscaler
carries it into the ``JobFinished`` condition of ``status.autoscaler``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayscale.api.raycluster import RayClusterSpec

__all__ = ["JOB_FINISHED_ANNOTATION", "finished_reason", "finished_spec"]

JOB_FINISHED_ANNOTATION = "rayscale.io/job-finished"


def finished_reason(annotations: Mapping[str, Any] | None) -> str | None:
    """The annotation's text when the cluster's job has ended (None: not marked)."""
    value = (annotations or {}).get(JOB_FINISHED_ANNOTATION)
    if value is None:
        return None
    return str(value).strip() or "its RayJob finished"


def finished_spec(annotations: Mapping[str, Any] | None, spec: RayClusterSpec) -> RayClusterSpec:
    """`spec` as both halves act on it: once the cluster's job has ended, no worker group keeps a
    minimum (every worker goes; the head stays until the RayJob's deletion policy takes it)."""
    if finished_reason(annotations) is None:
        return spec
    groups = [g.model_copy(update={"min_replicas": 0}) for g in spec.workers]
    return spec.model_copy(update={"worker_group_specs": groups})
