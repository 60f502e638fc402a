"""A RayJob's RayCluster whose job has ended: the annotation the RayJob controller sets on it, read
by the autoscaler, which then drains every worker and scales every group to 0. Pure.

The annotation's value says why, in words (``RayJob ns/name finished (SUCCEEDED)``); the autoscaler
carries it into the ``JobFinished`` condition of ``status.autoscaler``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["JOB_FINISHED_ANNOTATION", "finished_reason"]

JOB_FINISHED_ANNOTATION = "rayscale.io/job-finished"


def finished_reason(annotations: Mapping[str, Any] | None) -> str | None:
    """The annotation's text when the cluster's job has ended (None: not marked)."""
    value = (annotations or {}).get(JOB_FINISHED_ANNOTATION)
    if value is None:
        return None
    return str(value).strip() or "its RayJob finished"
