"""A RayJob's state machine, as KubeRay v1.6's RayJob controller runs it, pure: one call is one
reconcile, and moves the RayJob at most one state (New, Initializing, Waiting, Running, Complete,
Failed, ValidationFailed, Suspending, Suspended, Retrying) from what the world shows: the RayJob,
its RayCluster, the submitter Job, the head pod, the Services, and what Ray says of the job.

Where KubeRay asks the Ray dashboard over HTTP for the job's status, the world here holds what
Ray's GCS keeps of the submission (`Submission`): the operator reads it through its GCS connection.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from rayscale.api.raycluster import KUBERAY_MANAGER
from rayscale.cluster import naming
from rayscale.common import labels as L
from rayscale.common.jsoncopy import copy_json
from rayscale.common.timefmt import rfc3339
from rayscale.common.types import Obj
from rayscale.rayjob import checks
from rayscale.rayjob import consts as C
from rayscale.rayjob.actions import (
    Action,
    AddFinalizer,
    CreateCluster,
    CreateService,
    CreateSubmitter,
    DeleteSubmitter,
    Event,
    RemoveFinalizer,
    Step,
    StopJob,
    SubmitJob,
    UpdateService,
)
from rayscale.rayjob.build import cluster_for_job, job_head_service, submitter_job
from rayscale.rayjob.deletion import cluster_release, finished
from rayscale.rayjob.demand import annotation_problem, request_actions
from rayscale.rayjob.submitter_state import sidecar_check, submitter_check
from rayscale.rayjob.validation import Invalid, validate_job

__all__ = ["Submission", "World", "plan"]


@dataclasses.dataclass(frozen=True)
class Submission:
    """What Ray keeps of a job submission."""

    status: str  # PENDING RUNNING STOPPED SUCCEEDED FAILED
    message: str = ""
    start_time_ms: int = 0
    end_time_ms: int = 0


@dataclasses.dataclass(frozen=True)
class World:
    job: Obj
    now: datetime
    cluster: Obj | None = None  # the RayCluster named by status.rayClusterName
    submitter: Obj | None = None  # the submitter Job (K8sJobMode)
    head_pods: tuple[Obj, ...] = ()  # the cluster's head pods (SidecarMode)
    job_service: Obj | None = None  # the RayJob's own head Service
    cluster_service: Obj | None = None  # the cluster's head Service (for the dashboard's address)
    submission: Submission | None = None  # None: Ray has no such submission
    ray_error: str | None = None  # Ray could not be asked
    suffixes: tuple[str, str] = ("", "")  # 5 characters each, for a new job id and cluster name
    delete_job_after_finish: bool = False  # DELETE_RAYJOB_CR_AFTER_JOB_FINISHES
    grace_seconds: float = C.TRANSITION_GRACE_SECONDS  # RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_...
    resource_request: Obj | None = None  # the RayJob's RayResourceRequest (rayjob/demand.py)


def _ms(value: int) -> str:
    return rfc3339(datetime.fromtimestamp(value / 1000, UTC))


class _Break(Exception):
    """The switch ends: on to the backoff check and the status write."""


class _Plan:
    def __init__(self, world: World) -> None:
        self.w = world
        self.job = world.job
        self.meta = world.job.get("metadata") or {}
        self.spec = world.job.get("spec") or {}
        self.original: dict[str, Any] = dict(world.job.get("status") or {})
        self.status: dict[str, Any] = copy_json(self.original)
        self.mode = self.spec.get("submissionMode") or C.K8S_JOB_MODE
        self.step = Step()
        self.actions: list[Action] = self.step.actions

    # ---- the state machine

    def run(self) -> Step:
        manager = self.spec.get("managedBy")
        if manager is not None and manager != KUBERAY_MANAGER:
            return self.step
        if self.meta.get("deletionTimestamp"):
            return self._deleting()
        invalid = validate_job(self.job)
        if invalid is None and (problem := annotation_problem(self.job)) is not None:
            invalid = Invalid(C.EV_INVALID_METADATA, problem)
        if invalid is not None:
            ns, name = self.meta.get("namespace", ""), self.meta.get("name", "")
            self.step.events.append(Event("Warning", invalid.reason, f"{ns}/{name}: {invalid.message}"))
            self.status.update(
                jobDeploymentStatus=C.VALIDATION_FAILED,
                reason=C.VALIDATION_FAILED_REASON,
                message=invalid.message,
            )
            self._write()
            self.step.requeue = None
            return self.step
        state = self.status.get("jobDeploymentStatus") or C.NEW
        handler = {
            C.NEW: self._new,
            C.INITIALIZING: self._initializing,
            C.WAITING: self._waiting,
            C.RUNNING: self._running,
            C.SUSPENDING: self._releasing,
            C.RETRYING: self._releasing,
            C.SUSPENDED: self._suspended,
        }.get(state)
        if state in C.DEPLOYMENT_TERMINAL:
            step = finished(
                self.job, self.w.cluster, self.w.now, delete_job_after_finish=self.w.delete_job_after_finish
            )
            step.actions[:0] = self._request_actions()
            return step
        if handler is None:
            return Step(requeue=C.REQUEUE_SECONDS)
        try:
            result = handler()
        except _Break:
            result = None
        if result is not None:
            result.actions.extend(self._request_actions())
            return result
        self.actions.extend(self._request_actions())
        checks.count_and_retry(self.spec, self.status)
        self._write()
        return self.step

    def _deleting(self) -> Step:
        if (self.status.get("jobStatus") or "") not in C.JOB_TERMINAL:
            self.actions.append(StopJob(self._cluster_name(), str(self.status.get("jobId") or "")))
        self.actions.append(RemoveFinalizer())
        self.step.requeue = C.REQUEUE_SECONDS
        return self.step

    def _new(self) -> None:
        if C.FINALIZER not in (self.meta.get("finalizers") or []):
            self.actions.append(AddFinalizer())
        s = self.status
        if s.get("jobId") and s.get("rayClusterName") and s.get("jobStatus"):
            return
        name = self.meta.get("name", "")
        if self.mode != C.INTERACTIVE_MODE and not s.get("jobId"):
            s["jobId"] = self.spec.get("jobId") or f"{name}-{self.w.suffixes[0]}"
        if not s.get("rayClusterName"):
            selected = (self.spec.get("clusterSelector") or {}).get(C.CLUSTER_SELECTOR_LABEL)
            s["rayClusterName"] = selected or f"{name}-{self.w.suffixes[1]}"
        s.setdefault("jobStatus", C.JOB_NEW)
        s["jobDeploymentStatus"] = C.INITIALIZING
        s["startTime"] = rfc3339(self.w.now)

    def _initializing(self) -> Step | None:
        self._suspend_if_asked()
        self._active_deadline()
        self._pre_running_deadline()
        cluster = self._cluster()
        if isinstance(cluster, Step):
            return cluster
        if not self.status.get("dashboardURL"):
            if (cluster.get("status") or {}).get("state") != "ready":
                self.status["rayClusterStatus"] = dict(cluster.get("status") or {})
                raise _Break
            url = self._dashboard_url()
            if url is None:
                return self._error("the dashboard URL of the ready RayCluster is not known yet")
            self.status["dashboardURL"] = url
        if self.mode == C.INTERACTIVE_MODE:
            self.status["jobDeploymentStatus"] = C.WAITING
            raise _Break
        if self.mode == C.K8S_JOB_MODE and self.w.submitter is None:
            try:
                manifest = submitter_job({**self.job, "status": self.status}, cluster)
            except ValueError as exc:
                return self._error(str(exc))
            self.actions.append(CreateSubmitter(manifest))
        self.status["jobDeploymentStatus"] = C.RUNNING
        return None

    def _waiting(self) -> Step | None:
        self._pre_running_deadline()
        if not self.spec.get("jobId"):
            return Step(requeue=C.REQUEUE_SECONDS)
        self.status["jobId"] = self.spec["jobId"]
        self.status["jobDeploymentStatus"] = C.RUNNING
        return None

    def _running(self) -> Step | None:
        self._suspend_if_asked()
        self._active_deadline()
        self._grace_period()
        cluster = self._cluster()
        if isinstance(cluster, Step):
            return cluster
        self._services(cluster)
        finished_at: datetime | None = None
        if self.mode in C.HAS_SUBMITTER:
            if self.mode == C.SIDECAR_MODE:
                check = sidecar_check(self.w.head_pods, self.status)
            else:
                if self.w.submitter is None:
                    return self._error(f"the submitter Job {self.meta.get('name')} is not found")
                check = submitter_check(self.w.submitter, self.status)
            if isinstance(check, str):
                return self._error(check)
            failed, finished_at = check
            if finished_at is not None and self.w.now >= finished_at + timedelta(
                seconds=C.SUBMITTER_FINISHED_TIMEOUT
            ):
                self.status.update(
                    jobStatus=C.JOB_FAILED,
                    jobDeploymentStatus=C.FAILED,
                    reason=C.GRACE_PERIOD_EXCEEDED,
                    message=(
                        f"The RayJob submitter finished at {finished_at.strftime('%Y-%m-%d %H:%M:%S')} "
                        "but the ray job did not reach terminal state within "
                        f"{int(C.SUBMITTER_FINISHED_TIMEOUT)}s"
                    ),
                )
                raise _Break
            if failed:
                raise _Break
        if self.w.ray_error is not None:
            return self._error(self.w.ray_error)
        info = self.w.submission
        if info is None:
            if self.mode == C.HTTP_MODE:
                self.actions.append(
                    SubmitJob(self._cluster_name(), str(self.status.get("jobId") or ""), dict(self.spec))
                )
                return Step(actions=self.actions, requeue=C.REQUEUE_SECONDS)
            if finished_at is not None:
                self.status.update(
                    jobDeploymentStatus=C.FAILED,
                    reason=C.APP_FAILED,
                    message="Submitter completed but Ray job not found in RayCluster.",
                )
                raise _Break
            return self._error(f"the Ray job {self.status.get('jobId')} is not found")
        terminal = info.status in C.JOB_TERMINAL and (
            self.mode not in C.HAS_SUBMITTER or finished_at is not None
        )
        deployment, reason = C.RUNNING, ""
        if terminal:
            deployment = C.FAILED if info.status == C.JOB_FAILED else C.COMPLETE
            reason = C.APP_FAILED if info.status == C.JOB_FAILED else ""
        self.status.update(
            rayClusterStatus=dict(cluster.get("status") or {}),
            jobStatus=info.status,
            jobDeploymentStatus=deployment,
            reason=reason,
            message=info.message,
        )
        ray_info = dict(self.status.get("rayJobInfo") or {})
        if info.start_time_ms:
            ray_info["startTime"] = _ms(info.start_time_ms)
        if info.end_time_ms:
            ray_info["endTime"] = _ms(info.end_time_ms)
        if ray_info:
            self.status["rayJobInfo"] = ray_info
        return None

    def _releasing(self) -> Step | None:
        """Suspending and Retrying: the cluster and the submitter go, then the status resets."""
        self.actions.extend(cluster_release(self.spec, self.w.cluster))
        cluster_gone = bool(self.spec.get("clusterSelector")) or self.w.cluster is None
        submitter = self.w.submitter if self.mode == C.K8S_JOB_MODE else None
        if submitter is not None and not (submitter.get("metadata") or {}).get("deletionTimestamp"):
            self.actions.append(DeleteSubmitter(submitter["metadata"]["name"]))
        if not cluster_gone or submitter is not None:
            return Step(actions=self.actions, requeue=C.REQUEUE_SECONDS)
        s = self.status
        for key in ("rayClusterStatus", "rayJobInfo"):
            s[key] = {}
        for key in ("rayClusterName", "dashboardURL", "jobId", "message", "reason"):
            s[key] = ""
        s["jobStatus"] = C.JOB_NEW
        s["jobDeploymentStatus"] = C.SUSPENDED if s.get("jobDeploymentStatus") == C.SUSPENDING else C.NEW
        return None

    def _suspended(self) -> Step | None:
        if not self.spec.get("suspend"):
            self.status["jobStatus"] = C.JOB_NEW
            self.status["jobDeploymentStatus"] = C.NEW
            return None
        return Step()

    def _request_actions(self) -> list[Action]:
        """The RayJob's RayResourceRequest made with its cluster, deleted once the driver runs."""
        creating = any(isinstance(a, CreateCluster) for a in self.actions)
        job = {**self.job, "status": self.status}
        return request_actions(job, self.w.cluster, self.w.resource_request, creating=creating)

    # ---- the checks that end the switch early

    def _suspend_if_asked(self) -> None:
        if checks.suspend_if_asked(self.spec, self.status):
            raise _Break

    def _active_deadline(self) -> None:
        if checks.active_deadline(self.spec, self.status, self.w.now):
            raise _Break

    def _pre_running_deadline(self) -> None:
        if checks.pre_running_deadline(self.spec, self.status, self.w.now):
            raise _Break

    def _grace_period(self) -> None:
        if checks.grace_period(self.status, self.w.now, self.w.grace_seconds):
            raise _Break

    # ---- reads and the objects made on the way

    def _cluster_name(self) -> str:
        return str(self.status.get("rayClusterName") or "")

    def _cluster(self) -> Obj | Step:
        """KubeRay's getOrCreateRayClusterInstance: the cluster, or the one made now."""
        if self.w.cluster is not None:
            return self.w.cluster
        ns, name = self.meta.get("namespace", ""), self._cluster_name()
        if self.spec.get("clusterSelector"):
            self.step.events.append(
                Event(
                    "Warning",
                    C.EV_CLUSTER_NOT_FOUND,
                    f"RayCluster {ns}/{name} set in the clusterSelector is not found. "
                    "It must be created manually",
                )
            )
            return self._error(f"clusterSelector mode is enabled, but RayCluster {ns}/{name} is not found")
        manifest = cluster_for_job({**self.job, "status": self.status}, name)
        self.actions.append(CreateCluster(manifest))
        return manifest

    def _dashboard_url(self) -> str | None:
        service = self.w.cluster_service
        if service is None:
            return None
        for port in (service.get("spec") or {}).get("ports") or []:
            if port.get("name") == C.DASHBOARD_PORT_NAME:
                meta = service["metadata"]
                return (
                    f"{meta['name']}.{meta.get('namespace', '')}.svc.{naming.cluster_domain()}:{port['port']}"
                )
        return None

    def _services(self, cluster: Obj) -> None:
        if self.spec.get("clusterSelector"):
            return
        old = self.w.job_service
        selected = (((old or {}).get("spec") or {}).get("selector") or {}).get(L.RAY_CLUSTER)
        if old is not None and selected == str((cluster.get("metadata") or {}).get("name") or ""):
            return  # it selects this cluster's head (the wanted Service's selector names the cluster)
        wanted = job_head_service({**self.job, "status": self.status}, cluster)
        if old is None:
            self.actions.append(CreateService(wanted))
            return
        cluster_ip = (old.get("spec") or {}).get("clusterIP")
        if cluster_ip:
            wanted["spec"]["clusterIP"] = cluster_ip
        self.actions.append(UpdateService(wanted))

    def _error(self, message: str) -> Step:
        return Step(actions=self.actions, events=self.step.events, requeue=C.REQUEUE_SECONDS, error=message)

    # ---- after the switch

    def _write(self) -> None:
        """KubeRay's updateRayJobStatus: written only when the job's status, the deployment
        status or the cluster's status changed; Complete and Failed stamp endTime."""
        self.step.requeue = C.REQUEUE_SECONDS
        if not checks.status_changed(self.original, self.status):
            return
        if self.status.get("jobDeploymentStatus") in C.DEPLOYMENT_TERMINAL:
            self.status["endTime"] = rfc3339(self.w.now)
        self.step.status = {k: v for k, v in self.status.items() if v not in ("", None, {})}


def plan(world: World) -> Step:
    """One reconcile of `world.job`."""
    return _Plan(world).run()
