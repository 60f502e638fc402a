"""Every custom resource rayscale serves; `rayscale crds` writes one file per entry."""

from __future__ import annotations

from rayscale.api.crd import CrdDefinition, PrinterColumn
from rayscale.api.raycluster import RayClusterSpec, RayClusterStatus
from rayscale.api.rayresourcerequest import RayResourceRequestSpec, RayResourceRequestStatus

RAYCLUSTER = CrdDefinition(
    group="ray.io",
    kind="RayCluster",
    plural="rayclusters",
    singular="raycluster",
    versions=("v1",),
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
)

RAYRESOURCEREQUEST = CrdDefinition(
    group="rayscale.io",
    kind="RayResourceRequest",
    plural="rayresourcerequests",
    singular="rayresourcerequest",
    versions=("v1alpha1",),
    spec_model=RayResourceRequestSpec,
    status_model=RayResourceRequestStatus,
    printer_columns=(
        PrinterColumn("cluster", "string", ".spec.clusterName"),
        PrinterColumn("phase", "string", ".status.phase"),
        PrinterColumn("age", "date", ".metadata.creationTimestamp"),
    ),
)

CRDS: tuple[CrdDefinition, ...] = (RAYCLUSTER, RAYRESOURCEREQUEST)
