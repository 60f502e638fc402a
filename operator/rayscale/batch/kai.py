"""NVIDIA KAI-Scheduler (``--batch-scheduler kai-scheduler``), as KubeRay v1.6.2's plugin: the
pods go to the scheduler ``kai-scheduler`` with the RayCluster's label ``kai.scheduler/queue``;
KAI's own PodGrouper makes the gang, so no PodGroup is created here. Without that label KAI
leaves the pods pending (KubeRay only logs it; rayscale says so in a Warning Event)."""

from __future__ import annotations

from rayscale.api.raycluster import RayClusterSpec
from rayscale.batch.model import Plugin, PodMetadata
from rayscale.cluster.meta import ClusterMeta

__all__ = ["Kai"]

QUEUE = "kai.scheduler/queue"


class Kai(Plugin):
    name = "kai-scheduler"
    scheduler_name = "kai-scheduler"
    reads = frozenset({QUEUE})

    def pod_metadata(self, meta: ClusterMeta, spec: RayClusterSpec, group: str) -> PodMetadata:
        del spec, group
        queue = meta.labels.get(QUEUE)
        return PodMetadata(self.scheduler_name, {QUEUE: queue} if queue else {})

    def notes(self, meta: ClusterMeta) -> list[str]:
        if meta.labels.get(QUEUE):
            return []
        return [f"it has no label {QUEUE}: KAI-Scheduler leaves its pods pending until they name a queue"]
