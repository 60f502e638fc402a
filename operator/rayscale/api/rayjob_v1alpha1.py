"""RayJob ray.io/v1alpha1: the older version KubeRay's RayJob CRD still serves beside v1.

As for the RayCluster (see raycluster_v1alpha1): served, not stored, no conversion. An object written
as v1alpha1 is pruned to these fields and stored as v1, so these models are v1's cut down to KubeRay's
v1alpha1 fields (same names, formats and defaults), except that ``entrypoint`` is required, as it
was then; the cluster inside is the RayCluster's v1alpha1. The controller never parses them.
"""

from __future__ import annotations

from pydantic import Field

from rayscale.api.raycluster import StringMap
from rayscale.api.raycluster_v1alpha1 import RayClusterSpec, RayClusterStatus
from rayscale.api.rayjob import DATE_TIME, INT64
from rayscale.api.schema import KubeModel, PreservedObject, int32


class RayJobSpec(KubeModel):
    """Desired state of a RayJob, as v1alpha1 knew it."""

    submitter_pod_template: PreservedObject | None = None
    metadata: StringMap | None = None
    ray_cluster_spec: RayClusterSpec | None = None
    cluster_selector: StringMap | None = None
    entrypoint: str
    runtime_env_yaml: str | None = Field(default=None, alias="runtimeEnvYAML")
    job_id: str | None = None
    entrypoint_resources: str | None = None
    ttl_seconds_after_finished: int = int32(crd_default=0)
    entrypoint_num_cpus: float | None = None
    entrypoint_num_gpus: float | None = None
    shutdown_after_job_finishes: bool | None = None
    suspend: bool | None = None


class RayJobStatus(KubeModel):
    """Observed state of a RayJob, as v1alpha1 shows it."""

    job_id: str | None = None
    ray_cluster_name: str | None = None
    dashboard_url: str | None = Field(default=None, alias="dashboardURL")
    job_status: str | None = None
    job_deployment_status: str | None = None
    message: str | None = None
    start_time: str | None = Field(default=None, json_schema_extra=DATE_TIME)
    end_time: str | None = Field(default=None, json_schema_extra=DATE_TIME)
    ray_cluster_status: RayClusterStatus | None = None
    observed_generation: int | None = Field(default=None, json_schema_extra=INT64)
