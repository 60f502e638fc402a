"""RayCluster ray.io/v1alpha1: the older version KubeRay still serves beside v1.

KubeRay's CRD serves v1alpha1 (not stored, not deprecated) with the schema of its v1alpha1 types, and
no conversion webhook: an object written as v1alpha1 is pruned to these fields, stored as v1 (only
its apiVersion changes) and served under both versions, so the controller, which watches v1, sees
it like any other RayCluster (with v1's defaults). These models describe that schema and nothing
else: the controller never parses them. They are v1's models cut down to KubeRay's v1alpha1 fields
(same names, formats and defaults), except that ``rayStartParams`` is required, as it was then, and
the status has neither conditions nor rayscale's autoscaler status.
"""

from __future__ import annotations

from pydantic import Field

from rayscale.api.raycluster import MAX_INT32, StringMap, UpscalingMode
from rayscale.api.schema import KubeModel, PreservedObject, Quantity, int32


class ScaleStrategy(KubeModel):
    """Pods the autoscaler wants deleted (v1alpha1 has no scaleGate)."""

    workers_to_delete: list[str] | None = None


class AutoscalerOptions(KubeModel):
    """Options of Ray's autoscaler sidecar."""

    resources: PreservedObject | None = None
    image: str | None = None
    image_pull_policy: str | None = None
    security_context: PreservedObject | None = None
    idle_timeout_seconds: int | None = int32()
    upscaling_mode: UpscalingMode | None = None
    env: list[PreservedObject] | None = None
    env_from: list[PreservedObject] | None = None
    volume_mounts: list[PreservedObject] | None = None


class HeadGroupSpec(KubeModel):
    """The head pod of the cluster."""

    template: PreservedObject
    head_service: PreservedObject | None = None
    enable_ingress: bool | None = None
    ray_start_params: StringMap
    service_type: str | None = None


class WorkerGroupSpec(KubeModel):
    """A group of identical worker pods."""

    group_name: str
    replicas: int | None = Field(default=None, json_schema_extra={"format": "int32", "default": 0})
    min_replicas: int = int32(crd_default=0)
    max_replicas: int = int32(crd_default=MAX_INT32)
    ray_start_params: StringMap
    template: PreservedObject
    scale_strategy: ScaleStrategy | None = None


class RayClusterSpec(KubeModel):
    """Desired state of a Ray cluster, as v1alpha1 knew it."""

    enable_in_tree_autoscaling: bool | None = None
    autoscaler_options: AutoscalerOptions | None = None
    suspend: bool | None = None
    head_service_annotations: StringMap | None = None
    head_group_spec: HeadGroupSpec
    ray_version: str | None = None
    worker_group_specs: list[WorkerGroupSpec] | None = None


class HeadInfo(KubeModel):
    """Where the head pod and its Service are."""

    pod_ip: str | None = Field(default=None, alias="podIP")
    service_ip: str | None = Field(default=None, alias="serviceIP")


class RayClusterStatus(KubeModel):
    """Observed state of a Ray cluster, as v1alpha1 shows it."""

    last_update_time: str | None = Field(
        default=None, json_schema_extra={"format": "date-time", "nullable": True}
    )
    endpoints: StringMap | None = None
    desired_cpu: Quantity | None = Field(default=None, alias="desiredCPU")
    desired_memory: Quantity | None = None
    desired_gpu: Quantity | None = Field(default=None, alias="desiredGPU")
    desired_tpu: Quantity | None = Field(default=None, alias="desiredTPU")
    head: HeadInfo | None = None
    state: str | None = None
    reason: str | None = None
    ready_worker_replicas: int | None = int32()
    available_worker_replicas: int | None = int32()
    desired_worker_replicas: int | None = int32()
    min_worker_replicas: int | None = int32()
    max_worker_replicas: int | None = int32()
    observed_generation: int | None = Field(default=None, json_schema_extra={"format": "int64"})
