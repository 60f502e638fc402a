"""The checks of KubeRay's RayJob controller that end a reconcile early (suspend, the deadlines,
the grace period after Ray's job ended), the retry count, and when the status is written. Pure:
each updates the status it is given and says whether it did."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from rayscale.common.timefmt import parse_time
from rayscale.common.types import Obj
from rayscale.rayjob import consts as C

__all__ = [
    "active_deadline",
    "count_and_retry",
    "grace_period",
    "pre_running_deadline",
    "status_changed",
    "suspend_if_asked",
]

Status = dict[str, Any]


def suspend_if_asked(spec: Mapping[str, Any], status: Status) -> bool:
    """``spec.suspend`` moves Running and Initializing to Suspending."""
    if spec.get("suspend") and status.get("jobDeploymentStatus") in (C.RUNNING, C.INITIALIZING):
        status["jobDeploymentStatus"] = C.SUSPENDING
        return True
    return False


def _started(status: Status, now: datetime) -> datetime:
    return parse_time(status.get("startTime")) or now


def _go_time(when: datetime | None) -> str:
    """As KubeRay prints a time with %v (Go's time.Time.String(), the API server's times in UTC)."""
    return when.strftime("%Y-%m-%d %H:%M:%S +0000 UTC") if when is not None else "<nil>"


def _deadline(spec: Mapping[str, Any], status: Status, now: datetime, field: str, reason: str) -> bool:
    """``spec.<field>`` seconds after ``status.startTime`` passed: Failed with `reason`."""
    deadline = spec.get(field)
    if deadline is None or now < _started(status, now) + timedelta(seconds=int(deadline)):
        return False
    name = field[0].upper() + field[1:]
    status.update(
        jobDeploymentStatus=C.FAILED,
        reason=reason,
        message=(
            f"The RayJob has passed the {field}. "
            f"StartTime: {_go_time(parse_time(status.get('startTime')))}. {name}: {int(deadline)}"
        ),
    )
    return True


def active_deadline(spec: Mapping[str, Any], status: Status, now: datetime) -> bool:
    return _deadline(spec, status, now, "activeDeadlineSeconds", C.DEADLINE_EXCEEDED)


def pre_running_deadline(spec: Mapping[str, Any], status: Status, now: datetime) -> bool:
    return _deadline(spec, status, now, "preRunningDeadlineSeconds", C.PRE_RUNNING_DEADLINE_EXCEEDED)


def grace_period(status: Status, now: datetime, seconds: float = C.TRANSITION_GRACE_SECONDS) -> bool:
    """Ray's job ended over `seconds` (300 by default) ago and the RayJob is still Running:
    Complete or Failed now."""
    job_status = status.get("jobStatus") or ""
    if job_status not in C.JOB_TERMINAL or status.get("jobDeploymentStatus") != C.RUNNING:
        return False
    end = parse_time((status.get("rayJobInfo") or {}).get("endTime"))
    if end is None or now < end + timedelta(seconds=seconds):
        return False
    status.update(
        jobDeploymentStatus=C.FAILED if job_status == C.JOB_FAILED else C.COMPLETE,
        reason=C.GRACE_PERIOD_EXCEEDED,
        message=(
            "JobDeploymentStatus does not transition to Complete or Failed within the grace period after "
            "JobStatus reaches a terminal state."
        ),
    )
    return True


def count_and_retry(spec: Mapping[str, Any], status: Status) -> None:
    """KubeRay's checkBackoffLimitAndUpdateStatusIfNeeded: count the outcome; a failure within
    ``backoffLimit`` (not a deadline) retries with a new cluster."""
    failed, succeeded = int(status.get("failed") or 0), int(status.get("succeeded") or 0)
    if status.get("jobDeploymentStatus") == C.FAILED:
        failed += 1
    if status.get("jobStatus") == C.JOB_SUCCEEDED and status.get("jobDeploymentStatus") == C.COMPLETE:
        succeeded += 1
    status["failed"], status["succeeded"] = failed, succeeded
    limit = spec.get("backoffLimit")
    retry = status.get("jobDeploymentStatus") == C.FAILED and limit is not None and failed < int(limit) + 1
    if retry and status.get("reason") != C.DEADLINE_EXCEEDED:
        status["jobDeploymentStatus"] = C.RETRYING


_CLUSTER_STATUS_KEYS = (
    "state",
    "reason",
    "readyWorkerReplicas",
    "availableWorkerReplicas",
    "desiredWorkerReplicas",
    "minWorkerReplicas",
    "maxWorkerReplicas",
    "endpoints",
    "head",
    "conditions",
)


def status_changed(old: Obj, new: Obj) -> bool:
    """KubeRay writes the status only when one of these changed (InconsistentRayClusterStatus)."""
    if (old.get("jobStatus") or "") != (new.get("jobStatus") or ""):
        return True
    if (old.get("jobDeploymentStatus") or "") != (new.get("jobDeploymentStatus") or ""):
        return True
    old_cluster, new_cluster = old.get("rayClusterStatus") or {}, new.get("rayClusterStatus") or {}
    return any(old_cluster.get(k) != new_cluster.get(k) for k in _CLUSTER_STATUS_KEYS)
