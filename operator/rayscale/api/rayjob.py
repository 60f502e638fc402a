"""RayJob (ray.io/v1): the spec and status of KubeRay v1.6.2's RayJob, and the words of its API.

Field names, defaults, enums and CEL rules follow KubeRay's CRD, so that every RayJob KubeRay's
API server admits is admitted here too (the CRD is a superset of KubeRay's: nothing is stricter).
``rayClusterSpec`` and ``status.rayClusterStatus`` are the RayCluster's own models; the submitter's
pod template is a preserved object, as the RayCluster's pod templates are.

The enums below are the values KubeRay's controller writes and reads (``JobDeploymentStatus``,
``JobStatus``, ``JobFailedReason``) or accepts (``JobSubmissionMode``, ``DeletionPolicyType``).
Status fields and ``submissionMode`` stay plain strings in the schema, as in KubeRay's CRD (no enum:
KubeRay's API server accepts any value there, so this one does too).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, WithJsonSchema

from rayscale.api.raycluster import KUBERAY_MANAGER, RayClusterSpec, RayClusterStatus, StringMap
from rayscale.api.schema import JsonDict, KubeModel, PreservedObject, crd_default, int32

INT32: JsonDict = {"format": "int32"}
INT64: JsonDict = {"format": "int64"}
DATE_TIME: JsonDict = {"format": "date-time"}
MULTIKUEUE_MANAGER = "kueue.x-k8s.io/multikueue"


# (no docstrings on the enums: pydantic would put them in the CRD's schema)
class JobDeploymentStatus(StrEnum):  # status.jobDeploymentStatus: the RayJob's own lifecycle
    NEW = ""  # KubeRay's JobDeploymentStatusNew: nothing done yet (the field is unset)
    INITIALIZING = "Initializing"
    WAITING = "Waiting"  # InteractiveMode: waiting for the user to submit the job
    RUNNING = "Running"
    COMPLETE = "Complete"
    FAILED = "Failed"
    VALIDATION_FAILED = "ValidationFailed"
    SUSPENDING = "Suspending"
    SUSPENDED = "Suspended"
    RETRYING = "Retrying"


class JobStatus(StrEnum):  # status.jobStatus: Ray's job status
    NEW = ""  # KubeRay's JobStatusNew: no Ray job yet
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class JobFailedReason(StrEnum):  # status.reason, once jobDeploymentStatus is Failed
    SUBMISSION_FAILED = "SubmissionFailed"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    PRE_RUNNING_DEADLINE_EXCEEDED = "PreRunningDeadlineExceeded"
    APP_FAILED = "AppFailed"
    TRANSITION_GRACE_PERIOD_EXCEEDED = "JobDeploymentStatusTransitionGracePeriodExceeded"
    VALIDATION_FAILED = "ValidationFailed"


class JobSubmissionMode(StrEnum):  # spec.submissionMode
    K8S_JOB = "K8sJobMode"  # a submitter Kubernetes Job runs `ray job submit`
    HTTP = "HTTPMode"  # the operator submits the job to the dashboard
    INTERACTIVE = "InteractiveMode"  # the user submits it; the operator waits for its ID
    SIDECAR = "SidecarMode"  # a container in the head pod submits it


class DeletionPolicyType(StrEnum):  # what a deletion rule (or legacy policy) deletes; KubeRay's order
    DELETE_CLUSTER = "DeleteCluster"  # the whole RayCluster
    DELETE_WORKERS = "DeleteWorkers"  # its workers only
    DELETE_SELF = "DeleteSelf"  # the RayJob itself, and with it everything it owns
    DELETE_NONE = "DeleteNone"  # nothing


#: Ray's terminal job statuses (KubeRay's IsJobTerminal, Ray's JobStatus.is_terminal()).
JOB_TERMINAL: frozenset[str] = frozenset({JobStatus.STOPPED, JobStatus.SUCCEEDED, JobStatus.FAILED})
#: The RayJob's terminal deployment statuses (KubeRay's IsJobDeploymentTerminal).
DEPLOYMENT_TERMINAL: frozenset[str] = frozenset({JobDeploymentStatus.COMPLETE, JobDeploymentStatus.FAILED})


def _rules(*rules: tuple[str, str]) -> JsonDict:
    """CEL rules (x-kubernetes-validations) of a schema node: (rule, message) pairs."""
    return {"x-kubernetes-validations": [{"rule": rule, "message": message} for rule, message in rules]}


class DeletionCondition(KubeModel):
    """When a deletion rule applies: a terminal jobStatus or jobDeploymentStatus, after ttlSeconds."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            (
                "!(has(self.jobStatus) && has(self.jobDeploymentStatus))",
                "JobStatus and JobDeploymentStatus cannot be used together within the same deletion "
                "condition.",
            ),
            (
                "has(self.jobStatus) || has(self.jobDeploymentStatus)",
                "the deletion condition requires either the JobStatus or the JobDeploymentStatus field.",
            ),
        )
    )

    job_status: Literal["SUCCEEDED", "FAILED"] | None = None
    # an enum of one value, not pydantic's `const` (no keyword of a CRD's schema)
    job_deployment_status: (
        Annotated[Literal["Failed"], WithJsonSchema({"type": "string", "enum": ["Failed"]})] | None
    ) = None
    ttl_seconds: int = Field(default=0, ge=0, json_schema_extra={**INT32, "default": 0})


class DeletionRule(KubeModel):
    """One deletion action and the condition that triggers it."""

    policy: DeletionPolicyType
    condition: DeletionCondition


class DeletionPolicy(KubeModel):
    """The legacy single-stage policy of onSuccess / onFailure (deprecated by KubeRay)."""

    policy: DeletionPolicyType | None = None


class DeletionStrategy(KubeModel):
    """Cleanup once the RayJob is terminal: legacy onSuccess and onFailure, or deletionRules."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            (
                "!((has(self.onSuccess) || has(self.onFailure)) && has(self.deletionRules))",
                "legacy policies (onSuccess/onFailure) and deletionRules cannot be used together "
                "within the same deletionStrategy",
            ),
            (
                "((has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules))",
                "deletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules "
                "field (cannot be empty)",
            ),
        )
    )

    on_success: DeletionPolicy | None = None
    on_failure: DeletionPolicy | None = None
    deletion_rules: list[DeletionRule] | None = Field(
        default=None, min_length=1, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )


class SubmitterConfig(KubeModel):
    """The submitter Kubernetes Job's settings."""

    backoff_limit: int | None = int32()


class RayJobSpec(KubeModel):
    """Desired state of a RayJob: the cluster to run on (or select), the job, and its cleanup."""

    active_deadline_seconds: int | None = int32()
    backoff_limit: int = int32(crd_default=0)
    ray_cluster_spec: RayClusterSpec | None = None
    submitter_pod_template: PreservedObject | None = None
    metadata: StringMap | None = None
    cluster_selector: StringMap | None = None
    submitter_config: SubmitterConfig | None = None
    managed_by: str | None = Field(
        default=None,
        json_schema_extra=_rules(
            ("self == oldSelf", "the managedBy field is immutable"),
            (
                f"self in ['{KUBERAY_MANAGER}', '{MULTIKUEUE_MANAGER}']",
                f"the managedBy field value must be either '{KUBERAY_MANAGER}' or '{MULTIKUEUE_MANAGER}'",
            ),
        ),
    )
    deletion_strategy: DeletionStrategy | None = None
    entrypoint: str | None = None
    runtime_env_yaml: str | None = Field(default=None, alias="runtimeEnvYAML")
    job_id: str | None = None
    submission_mode: str = crd_default(JobSubmissionMode.K8S_JOB.value, JobSubmissionMode.K8S_JOB.value)
    entrypoint_resources: str | None = None
    entrypoint_num_cpus: float | None = None
    entrypoint_num_gpus: float | None = None
    ttl_seconds_after_finished: int = int32(crd_default=0)
    pre_running_deadline_seconds: int | None = Field(default=None, ge=1, json_schema_extra=INT32)
    shutdown_after_job_finishes: bool | None = None
    suspend: bool | None = None


class RayJobStatusInfo(KubeModel):
    """What the Ray dashboard said about the job: when it started and ended."""

    start_time: str | None = Field(default=None, json_schema_extra=DATE_TIME)
    end_time: str | None = Field(default=None, json_schema_extra=DATE_TIME)


class RayJobStatus(KubeModel):
    """Observed state of a RayJob, written by the controller through the status subresource."""

    ray_job_info: RayJobStatusInfo | None = None
    job_id: str | None = None
    ray_cluster_name: str | None = None
    dashboard_url: str | None = Field(default=None, alias="dashboardURL")
    job_status: str | None = None  # a JobStatus
    job_deployment_status: str | None = None  # a JobDeploymentStatus
    reason: str | None = None  # a JobFailedReason
    message: str | None = None
    start_time: str | None = Field(default=None, json_schema_extra=DATE_TIME)
    end_time: str | None = Field(default=None, json_schema_extra=DATE_TIME)
    succeeded: int = int32(crd_default=0)
    failed: int = int32(crd_default=0)
    ray_cluster_status: RayClusterStatus | None = None
    observed_generation: int | None = Field(default=None, json_schema_extra=INT64)


__all__ = [
    "DEPLOYMENT_TERMINAL",
    "JOB_TERMINAL",
    "DeletionCondition",
    "DeletionPolicy",
    "DeletionPolicyType",
    "DeletionRule",
    "DeletionStrategy",
    "JobDeploymentStatus",
    "JobFailedReason",
    "JobStatus",
    "JobSubmissionMode",
    "RayJobSpec",
    "RayJobStatus",
    "RayJobStatusInfo",
    "SubmitterConfig",
]
