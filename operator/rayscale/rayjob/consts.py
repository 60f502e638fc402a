"""The words of KubeRay's RayJob API: states, reasons, labels, Event reasons, defaults. Spelled once."""

from __future__ import annotations

from typing import Final

from rayscale.common.labels import ORIGIN_RAYJOB

# status.jobDeploymentStatus
NEW: Final = ""  # KubeRay's JobDeploymentStatusNew: no status yet
INITIALIZING: Final = "Initializing"
WAITING: Final = "Waiting"
RUNNING: Final = "Running"
COMPLETE: Final = "Complete"
FAILED: Final = "Failed"
VALIDATION_FAILED: Final = "ValidationFailed"
SUSPENDING: Final = "Suspending"
SUSPENDED: Final = "Suspended"
RETRYING: Final = "Retrying"
DEPLOYMENT_TERMINAL: Final = frozenset({COMPLETE, FAILED})

# status.jobStatus: Ray's job status; "" is KubeRay's JobStatusNew
JOB_NEW: Final = ""
JOB_STOPPED: Final = "STOPPED"
JOB_SUCCEEDED: Final = "SUCCEEDED"
JOB_FAILED: Final = "FAILED"
JOB_TERMINAL: Final = frozenset({JOB_STOPPED, JOB_SUCCEEDED, JOB_FAILED})

# status.reason
SUBMISSION_FAILED: Final = "SubmissionFailed"
DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
PRE_RUNNING_DEADLINE_EXCEEDED: Final = "PreRunningDeadlineExceeded"
APP_FAILED: Final = "AppFailed"
VALIDATION_FAILED_REASON: Final = "ValidationFailed"
GRACE_PERIOD_EXCEEDED: Final = "JobDeploymentStatusTransitionGracePeriodExceeded"

# spec.submissionMode
K8S_JOB_MODE: Final = "K8sJobMode"
HTTP_MODE: Final = "HTTPMode"
INTERACTIVE_MODE: Final = "InteractiveMode"
SIDECAR_MODE: Final = "SidecarMode"
HAS_SUBMITTER: Final = frozenset({K8S_JOB_MODE, SIDECAR_MODE})

# deletion policies, most destructive last
DELETE_NONE: Final = "DeleteNone"
DELETE_WORKERS: Final = "DeleteWorkers"
DELETE_CLUSTER: Final = "DeleteCluster"
DELETE_SELF: Final = "DeleteSelf"
POLICY_IMPACT: Final = {DELETE_NONE: 1, DELETE_WORKERS: 2, DELETE_CLUSTER: 3, DELETE_SELF: 4}

FINALIZER: Final = "ray.io/rayjob-finalizer"
CLUSTER_SELECTOR_LABEL: Final = "ray.io/cluster"  # the clusterSelector key naming the RayCluster
SUBMISSION_MODE_LABEL: Final = "ray.io/job-submission-mode"
DISABLE_HEAD_RESTART_ANNOTATION: Final = "ray.io/disable-provisioned-head-restart"
CRD_LABEL_VALUE: Final = ORIGIN_RAYJOB
SUBMITTER_CONTAINER: Final = "ray-job-submitter"
DASHBOARD_PORT_NAME: Final = "dashboard"
DEFAULT_DASHBOARD_PORT: Final = 8265
DASHBOARD_ADDRESS_ENV: Final = "RAY_DASHBOARD_ADDRESS"
SUBMISSION_ID_ENV: Final = "RAY_JOB_SUBMISSION_ID"
MAX_NAME: Final = 47  # KubeRay's MaxRayJobNameLength: the RayCluster's 53 less "-" and 5 characters
SUBMITTER_BACKOFF_LIMIT: Final = 2

REQUEUE_SECONDS: Final = 3.0  # KubeRay's RayJobDefaultRequeueDuration
# rayscale's: a running Ray job's record is read this often (a GCS key-value get, not KubeRay's
# dashboard call every REQUEUE_SECONDS), so its status shows within one autoscaler round
RUNNING_POLL_SECONDS: Final = 2.0
# rayscale's: a reconcile planned before the watch showed a RayCluster or Service it had created
# looks again after this (sooner when the watch delivers it; rayscale.rayjob.created)
STALE_WORLD_SECONDS: Final = 1.0
SUBMITTER_FINISHED_TIMEOUT: Final = 30.0  # after the submitter ended, Ray's job must end within it
TRANSITION_GRACE_SECONDS: Final = 300.0  # Ray's job ended, the RayJob not yet Complete or Failed
DELETION_MARGIN_SECONDS: Final = 2.0  # a TTL's requeue lands this much after the TTL

# Event reasons (KubeRay's)
EV_INVALID_METADATA: Final = "InvalidRayJobMetadata"
EV_INVALID_SPEC: Final = "InvalidRayJobSpec"
EV_INVALID_STATUS: Final = "InvalidRayJobStatus"
EV_CREATED_SUBMITTER: Final = "CreatedRayJobSubmitter"
EV_DELETED_SUBMITTER: Final = "DeletedRayJobSubmitter"
EV_FAILED_CREATE_SUBMITTER: Final = "FailedToCreateRayJobSubmitter"
EV_FAILED_DELETE_SUBMITTER: Final = "FailedToDeleteRayJobSubmitter"
EV_CREATED_CLUSTER: Final = "CreatedRayCluster"
EV_UPDATED_CLUSTER: Final = "UpdatedRayCluster"
EV_DELETED_CLUSTER: Final = "DeletedRayCluster"
EV_FAILED_CREATE_CLUSTER: Final = "FailedToCreateRayCluster"
EV_FAILED_DELETE_CLUSTER: Final = "FailedToDeleteRayCluster"
EV_FAILED_UPDATE_CLUSTER: Final = "FailedToUpdateRayCluster"
EV_CLUSTER_NOT_FOUND: Final = "RayClusterNotFound"
EV_WORKERS_DRAINED: Final = (
    "DrainedWorkers"  # rayscale's, on the RayCluster: DeleteWorkers drained them first
)
EV_WORKERS_NOT_DRAINED: Final = "WorkersNotDrained"  # rayscale's: Ray could not be asked
EV_CREATED_SERVICE: Final = "CreatedService"
EV_UPDATED_SERVICE: Final = "UpdatedService"
EV_FAILED_CREATE_SERVICE: Final = "FailedToCreateService"
EV_FAILED_UPDATE_SERVICE: Final = "FailedToUpdateService"
