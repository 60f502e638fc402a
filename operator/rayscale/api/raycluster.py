"""RayCluster (ray.io/v1): the spec and status rayscale reads and writes.

Field names, defaults and enums follow KubeRay's CRD.
Pod templates and other core/v1 objects are kept as preserved, unvalidated objects.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rayscale.api.schema import KubeModel, PreservedObject, Quantity, crd_default, int32

MAX_INT32 = 2147483647
KUBERAY_MANAGER = "ray.io/kuberay-operator"
StringMap = dict[str, str]
UpscalingMode = Literal["Default", "Aggressive", "Conservative"]


class IngressOptions(KubeModel):
    """Options of the head Ingress."""

    host: str | None = None
    path: str | None = crd_default("/")
    path_type: Literal["Exact", "Prefix", "ImplementationSpecific"] | None = crd_default("Prefix")
    tls: list[PreservedObject] | None = None


class HeadGroupSpec(KubeModel):
    """The head pod of the cluster."""

    template: PreservedObject
    ray_start_params: StringMap | None = None
    service_type: str | None = None
    head_service: PreservedObject | None = None
    enable_ingress: bool | None = None
    ingress_options: IngressOptions | None = None
    resources: StringMap | None = None
    labels: StringMap | None = None


# A gate's ``name`` is domain-prefixed (``kueue.k8s.io/quota-exceeded``) and the list's merge key:
# each controller adds and removes only its own gate (server-side apply under its own manager).
class ScaleGate(KubeModel):
    """A controller's signal that the worker group cannot scale up now (quota, queue, maintenance)."""

    name: str = Field(min_length=1)
    reason: str | None = None
    message: str | None = None


# rayscale's autoscaler writes and clears workersToDelete (never the controller); it reads scaleGate
# and never writes it.
class ScaleStrategy(KubeModel):
    """Pods the autoscaler wants deleted, and gates others put on scaling the group up."""

    workers_to_delete: list[str] | None = None
    scale_gate: list[ScaleGate] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


class WorkerGroupSpec(KubeModel):
    """A group of identical worker pods (or of identical multi-host replicas)."""

    group_name: str
    template: PreservedObject
    min_replicas: int = int32(crd_default=0)
    max_replicas: int = int32(crd_default=MAX_INT32)
    replicas: int | None = Field(default=None, json_schema_extra={"format": "int32", "default": 0})
    num_of_hosts: int = int32(crd_default=1)
    idle_timeout_seconds: int | None = int32()
    priority: int = int32(crd_default=0)
    scale_strategy: ScaleStrategy | None = None
    suspend: bool | None = None
    ray_start_params: StringMap | None = None
    resources: StringMap | None = None
    labels: StringMap | None = None

    @property
    def to_delete(self) -> tuple[str, ...]:
        """The pods its ``scaleStrategy.workersToDelete`` lists."""
        return tuple((self.scale_strategy.workers_to_delete if self.scale_strategy else None) or ())


class AutoscalerOptions(KubeModel):
    """Options of the in-tree autoscaler (rayscale's embedded autoscaler reads the Ray-side ones)."""

    version: Literal["v1", "v2"] | None = None
    upscaling_mode: UpscalingMode | None = None
    idle_timeout_seconds: int | None = int32()
    resources: PreservedObject | None = None
    image: str | None = None
    image_pull_policy: str | None = None
    security_context: PreservedObject | None = None
    env: list[PreservedObject] | None = None
    env_from: list[PreservedObject] | None = None
    volume_mounts: list[PreservedObject] | None = None
    command: list[str] | None = None
    args: list[str] | None = None


class RedisCredential(KubeModel):
    """A literal value or an env var source."""

    value: str | None = None
    value_from: PreservedObject | None = None


class GcsStorage(KubeModel):
    """Storage of the embedded (rocksdb) GCS backend."""

    claim_name: str | None = None
    size: str | None = crd_default("1Gi")
    storage_class_name: str | None = None
    access_modes: list[str] | None = crd_default(["ReadWriteOnce"])
    sub_path: str | None = None
    deletion_policy: Literal["DeleteWithCluster", "Retain"] | None = crd_default("DeleteWithCluster")


class GcsFaultToleranceOptions(KubeModel):
    """GCS fault tolerance (external Redis or embedded rocksdb)."""

    backend: Literal["redis", "rocksdb"] | None = Field(
        default=None,
        json_schema_extra={
            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "backend is immutable"}]
        },
    )
    redis_address: str | None = None
    redis_password: RedisCredential | None = None
    redis_username: RedisCredential | None = None
    external_storage_namespace: str | None = None
    storage: GcsStorage | None = None


class UpgradeStrategy(KubeModel):
    """What to do with pods when the spec changes."""

    type: Literal["Recreate", "None"] | None = None


class AuthOptions(KubeModel):
    """Ray token authentication."""

    mode: Literal["disabled", "token"] | None = None
    secret_name: str | None = None
    enable_k8s_token_auth: bool | None = Field(default=None, alias="enableK8sTokenAuth")


class RayClusterSpec(KubeModel):
    """Desired state of a Ray cluster."""

    head_group_spec: HeadGroupSpec
    worker_group_specs: list[WorkerGroupSpec] | None = None
    ray_version: str | None = None
    enable_in_tree_autoscaling: bool | None = None
    autoscaler_options: AutoscalerOptions | None = None
    suspend: bool | None = None
    managed_by: str | None = Field(
        default=None,
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "the managedBy field is immutable"},
                {
                    "rule": "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",
                    "message": "the managedBy field value must be either "
                    "'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'",
                },
            ]
        },
    )
    head_service_annotations: StringMap | None = None
    gcs_fault_tolerance_options: GcsFaultToleranceOptions | None = None
    upgrade_strategy: UpgradeStrategy | None = None
    auth_options: AuthOptions | None = None
    network_policy: PreservedObject | None = None
    tls_options: PreservedObject | None = None
    history_server_options: PreservedObject | None = None

    @property
    def workers(self) -> list[WorkerGroupSpec]:
        return self.worker_group_specs or []

    @property
    def autoscaling(self) -> bool:
        return bool(self.enable_in_tree_autoscaling)


# The condition types of a RayCluster's status, as KubeRay names them.
HEAD_POD_READY = "HeadPodReady"
PROVISIONED = "RayClusterProvisioned"
REPLICA_FAILURE = "ReplicaFailure"
SUSPENDING = "RayClusterSuspending"
SUSPENDED = "RayClusterSuspended"
SPEC_VALID = "SpecValid"


class Condition(KubeModel):
    """A standard metav1.Condition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    observed_generation: int | None = Field(default=None, json_schema_extra={"format": "int64"})
    last_transition_time: str = Field(json_schema_extra={"format": "date-time"})
    reason: str
    message: str | None = None


class HeadInfo(KubeModel):
    """Where the head pod and its Service are."""

    pod_ip: str | None = Field(default=None, alias="podIP")
    pod_name: str | None = None
    service_ip: str | None = Field(default=None, alias="serviceIP")
    service_name: str | None = None


class AutoscalerGroupStatus(KubeModel):
    """One worker group in the autoscaler's latest decision (counts in replicas)."""

    name: str
    current: int = int32(0)  # replicas that exist or are being created, not being deleted
    desired: int = int32(0)  # replicas after the decision
    pending: int = int32(0)  # current replicas not running yet
    idle: int = int32(0)  # running replicas idle according to Ray
    backoff_until: str | None = Field(default=None, json_schema_extra={"format": "date-time"})


class UnmetDemandStatus(KubeModel):
    """Demand the latest decision could not place, and why."""

    kind: Literal["demand", "gang", "constraint"]
    resources: dict[str, float] | None = None  # one task, actor or bundle (demand, constraint)
    bundles: list[dict[str, float]] | None = None  # the bundles of one placement group (gang)
    strategy: str | None = None  # the placement group's strategy (gang)
    count: int = int32(0)
    reason: str
    message: str


class GcsReachability(KubeModel):
    """Whether the autoscaler can read the cluster's demand from Ray's GCS."""

    address: str | None = None
    reachable: bool = False
    last_error: str | None = None
    last_contact_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})


class ReplicaBrief(KubeModel):
    """One worker replica in the autoscaler's summary of the replicas."""

    group: str
    replica: str  # the replica name (multi-host), the pod name, or unborn:<group>:<n> (no pod yet)
    state: str  # requested | scheduling | booting | ready | idle | draining | failed | removed
    since: str = Field(json_schema_extra={"format": "date-time"})
    cause: str | None = None  # failed: POD_FAILED | LAUNCH_FAILED | NODE_DEAD
    message: str | None = None


class AutoscalerReplicas(KubeModel):
    """The worker replicas by state: counts, the one starting the longest, the latest failures."""

    counts: dict[str, dict[str, int]] | None = None  # group -> state -> replicas
    oldest_starting: ReplicaBrief | None = None  # since: when it began to start
    failed: list[ReplicaBrief] | None = None  # the latest failed replicas (gone within 10 min or not)


class AutoscalerStatus(KubeModel):
    """What rayscale's autoscaler decided for the cluster, and why (written by the autoscaler only)."""

    last_decision_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    groups: list[AutoscalerGroupStatus] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    unmet_demand: list[UnmetDemandStatus] | None = None
    gcs: GcsReachability | None = None
    replicas: AutoscalerReplicas | None = None
    # RayCompatible: False (reason AutoscalerV1, RayTooOld, DrainUnsupported, ReportUnsupported)
    # when rayscale cannot fully serve the cluster's Ray.
    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


class RayClusterStatus(KubeModel):
    """Observed state of a Ray cluster, written by the controller (autoscaler: by the autoscaler)."""

    state: str | None = None
    reason: str | None = None
    state_transition_times: dict[str, str] | None = None
    ready_worker_replicas: int | None = int32()
    available_worker_replicas: int | None = int32()
    desired_worker_replicas: int | None = int32()
    min_worker_replicas: int | None = int32()
    max_worker_replicas: int | None = int32()
    desired_cpu: Quantity | None = Field(default=None, alias="desiredCPU")
    desired_memory: Quantity | None = None
    desired_gpu: Quantity | None = Field(default=None, alias="desiredGPU")
    desired_tpu: Quantity | None = Field(default=None, alias="desiredTPU")
    last_update_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    endpoints: StringMap | None = None
    head: HeadInfo | None = None
    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    observed_generation: int | None = Field(default=None, json_schema_extra={"format": "int64"})
    autoscaler: AutoscalerStatus | None = None
