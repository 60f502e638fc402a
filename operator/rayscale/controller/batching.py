"""The batch scheduler (``--batch-scheduler``, `rayscale.batch`) in a plan: the PodGroup to make
before any pod, each created pod's scheduler, labels and annotations, and Warning Events for what
a RayCluster's labels ask that this operator's scheduler will not do."""

from __future__ import annotations

from rayscale.api.raycluster import RayClusterSpec
from rayscale.batch.model import BatchScheduler, PodMetadata
from rayscale.batch.registry import label_notes
from rayscale.cluster.meta import ClusterMeta
from rayscale.common import labels as L
from rayscale.controller.plan import CreatePod, EventSpec, EventType, Plan

__all__ = ["REASON", "decorate_pods", "pod_group_problem"]

REASON = "BatchScheduler"


def pod_group_problem(
    meta: ClusterMeta, spec: RayClusterSpec, batch: BatchScheduler | None, plan: Plan
) -> str | None:
    """Put the PodGroup `batch` wants into `plan`; the reason none can be made (KubeRay's error:
    then no pod is created, as KubeRay's reconcile returns before its pods)."""
    if batch is None:
        return None
    try:
        plan.pod_group = batch.pod_group(meta, spec)
    except ValueError as exc:
        return str(exc)
    return None


def decorate_pods(meta: ClusterMeta, spec: RayClusterSpec, batch: BatchScheduler | None, plan: Plan) -> None:
    """Each pod the plan creates, with what `batch` adds to it (KubeRay's AddMetadataToChildResource:
    the head as group ``headgroup``); when the plan creates pods, one Warning Event per thing the
    RayCluster's labels ask that will not happen."""
    if not any(step.creates for step in plan.steps):
        return
    notes = label_notes(batch, meta) + (batch.notes(meta) if batch else [])
    for note in notes:
        message = f"RayCluster {meta.namespace}/{meta.name}: {note}"
        plan.events.append(EventSpec(EventType.WARNING, REASON, message, action="Schedule"))
    if batch is None:
        return
    made: dict[str, PodMetadata] = {}
    for step in plan.steps:
        creates = []
        for create in step.creates:
            group = create.group or L.HEAD_GROUP
            if group not in made:
                made[group] = batch.pod_metadata(meta, spec, group)
            creates.append(CreatePod(create.group, create.kind, made[group].applied(create.manifest)))
        step.creates = creates
