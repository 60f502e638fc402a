"""Every custom resource rayscale serves; `rayscale crds` writes one file per entry."""

from __future__ import annotations

from rayscale.api import names, rayjob_v1alpha1
from rayscale.api import raycluster_v1alpha1 as v1alpha1
from rayscale.api.crd import CrdDefinition, OlderVersion, PrinterColumn
from rayscale.api.raycluster import RayClusterSpec, RayClusterStatus
from rayscale.api.raycronjob import RayCronJobSpec, RayCronJobStatus
from rayscale.api.rayjob import RayJobSpec, RayJobStatus
from rayscale.api.rayresourcerequest import RayResourceRequestSpec, RayResourceRequestStatus
from rayscale.api.rayvirtualcluster import (
    RAYVIRTUALCLUSTER_VALIDATIONS,
    RayVirtualClusterSpec,
    RayVirtualClusterStatus,
)

RAYCLUSTER = CrdDefinition(
    names.RAYCLUSTER,
    spec_model=RayClusterSpec,
    status_model=RayClusterStatus,
    categories=("all",),
    printer_columns=(
        PrinterColumn("desired workers", "integer", ".status.desiredWorkerReplicas"),
        PrinterColumn("available workers", "integer", ".status.availableWorkerReplicas"),
        PrinterColumn("cpus", "string", ".status.desiredCPU"),
        PrinterColumn("memory", "string", ".status.desiredMemory"),
        PrinterColumn("gpus", "string", ".status.desiredGPU"),
        PrinterColumn("tpus", "string", ".status.desiredTPU", priority=1),
        PrinterColumn("status", "string", ".status.state"),
        PrinterColumn("age", "date", ".metadata.creationTimestamp"),
        PrinterColumn("head pod IP", "string", ".status.head.podIP", priority=1),
        PrinterColumn("head service IP", "string", ".status.head.serviceIP", priority=1),
    ),
    # As KubeRay's CRD: v1alpha1 served with its own (older) schema, v1 stored, no conversion.
    older_versions=(
        OlderVersion("v1alpha1", v1alpha1.RayClusterSpec, v1alpha1.RayClusterStatus, spec_required=False),
    ),
)

# RayJob and RayCronJob: KubeRay's printer columns and categories (no short names), and no `spec`
# required at the top, as KubeRay's CRDs (a superset of each: KubeRay's API server admits a RayJob
# without a spec, the controller then refuses it).
RAYJOB = CrdDefinition(
    names.RAYJOB,
    spec_model=RayJobSpec,
    status_model=RayJobStatus,
    categories=("all",),
    printer_columns=(
        PrinterColumn("job status", "string", ".status.jobStatus"),
        PrinterColumn("deployment status", "string", ".status.jobDeploymentStatus"),
        PrinterColumn("ray cluster name", "string", ".status.rayClusterName"),
        PrinterColumn("start time", "string", ".status.startTime"),
        PrinterColumn("end time", "string", ".status.endTime"),
        PrinterColumn("age", "date", ".metadata.creationTimestamp"),
    ),
    spec_required=False,
    # As KubeRay's CRD: v1alpha1 served with its own (older) schema, v1 stored, no conversion.
    older_versions=(
        OlderVersion(
            "v1alpha1", rayjob_v1alpha1.RayJobSpec, rayjob_v1alpha1.RayJobStatus, spec_required=False
        ),
    ),
)

RAYCRONJOB = CrdDefinition(
    names.RAYCRONJOB,
    spec_model=RayCronJobSpec,
    status_model=RayCronJobStatus,
    categories=("all",),
    printer_columns=(
        PrinterColumn("schedule", "string", ".spec.schedule"),
        PrinterColumn("last schedule", "string", ".status.lastScheduleTime"),
        PrinterColumn("age", "date", ".metadata.creationTimestamp"),
        PrinterColumn("suspend", "boolean", ".spec.suspend"),
    ),
    spec_required=False,
)

RAYRESOURCEREQUEST = CrdDefinition(
    names.RAYRESOURCEREQUEST,
    spec_model=RayResourceRequestSpec,
    status_model=RayResourceRequestStatus,
    printer_columns=(
        PrinterColumn("cluster", "string", ".spec.clusterName"),
        PrinterColumn("phase", "string", ".status.phase"),
        PrinterColumn("age", "date", ".metadata.creationTimestamp"),
    ),
)

RAYVIRTUALCLUSTER = CrdDefinition(
    names.RAYVIRTUALCLUSTER,
    spec_model=RayVirtualClusterSpec,
    status_model=RayVirtualClusterStatus,
    short_names=("rvc",),
    printer_columns=(
        PrinterColumn("cluster", "string", ".spec.rayClusterName"),
        PrinterColumn("divisible", "boolean", ".spec.divisible"),
        PrinterColumn("phase", "string", ".status.phase"),
        PrinterColumn("revision", "integer", ".status.revision"),
        PrinterColumn("age", "date", ".metadata.creationTimestamp"),
    ),
    validations=RAYVIRTUALCLUSTER_VALIDATIONS,
)

CRDS: tuple[CrdDefinition, ...] = (RAYCLUSTER, RAYJOB, RAYCRONJOB, RAYRESOURCEREQUEST, RAYVIRTUALCLUSTER)
