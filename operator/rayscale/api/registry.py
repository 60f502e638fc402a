"""Every custom resource rayscale serves; `rayscale crds` writes one file per entry."""

from __future__ import annotations

from rayscale.api.crd import CrdDefinition, PrinterColumn
from rayscale.api.raycluster import RayClusterSpec, RayClusterStatus

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

CRDS: tuple[CrdDefinition, ...] = (RAYCLUSTER,)
