"""What the submitter says, as KubeRay v1.6 reads it, pure: whether it failed (the RayJob then
fails, with ``AppFailed`` when Ray's job failed, else ``SubmissionFailed``), and when it finished."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rayscale.common.timefmt import parse_time
from rayscale.common.types import Obj
from rayscale.rayjob import consts as C

__all__ = ["sidecar_check", "submitter_check"]

Check = tuple[bool, datetime | None] | str  # (failed, finished at), or why it cannot be known


def _fail(status: dict[str, Any], message: str) -> None:
    status["jobDeploymentStatus"] = C.FAILED
    if status.get("jobStatus") == C.JOB_FAILED:
        status["reason"] = C.APP_FAILED
    else:
        status["reason"] = C.SUBMISSION_FAILED
        status["message"] = message


def submitter_check(job: Obj, status: dict[str, Any]) -> Check:
    """K8sJobMode: the submitter Job's ``Failed`` condition, and its finish time (the
    ``Complete`` or ``Failed`` condition's lastTransitionTime). Updates `status` on failure."""
    conditions: list[Mapping[str, Any]] = list((job.get("status") or {}).get("conditions") or [])
    failed = False
    for condition in conditions:
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            failed = True
            _fail(
                status,
                f"Job submission has failed. Reason: {condition.get('reason', '')}. "
                f"Message: {condition.get('message', '')}",
            )
            break
    finished_at = None
    for condition in conditions:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            finished_at = parse_time(condition.get("lastTransitionTime"))
            break
    return failed, finished_at


def sidecar_check(head_pods: Sequence[Obj], status: dict[str, Any]) -> Check:
    """SidecarMode: the head pod's ``ray-job-submitter`` container. No head pod fails the
    RayJob; a submitter that exited non-zero fails it; more than one head pod is an error."""
    if len(head_pods) > 1:
        return f"found multiple heads ({len(head_pods)})"
    if not head_pods:
        status.update(jobDeploymentStatus=C.FAILED, reason=C.APP_FAILED, message="Ray head pod not found.")
        return True, None
    failed = False
    finished_at = None
    for container in (head_pods[0].get("status") or {}).get("containerStatuses") or []:
        if container.get("name") != C.SUBMITTER_CONTAINER:
            continue
        terminated = (container.get("state") or {}).get("terminated")
        if terminated:
            finished_at = parse_time(terminated.get("finishedAt"))
            code = int(terminated.get("exitCode") or 0)
            if code != 0:
                failed = True
                _fail(
                    status,
                    f"Ray head pod container {C.SUBMITTER_CONTAINER} terminated with exit code {code}: "
                    f"{terminated.get('reason', '')}",
                )
        break
    return failed, finished_at
