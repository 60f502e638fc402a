"""scheduler-plugins' coscheduling (``--batch-scheduler scheduler-plugins``), as KubeRay v1.6.2's
plugin: every pod goes to the scheduler ``scheduler-plugins-scheduler``; a RayCluster labelled
``ray.io/gang-scheduling-enabled`` also gets a PodGroup named after it (created once, never
resized: the replicas and resources the spec asks for when it is made) and its pods the label
``scheduling.x-k8s.io/pod-group``."""

from __future__ import annotations

from rayscale.api.names import RAYCLUSTER
from rayscale.api.raycluster import RayClusterSpec
from rayscale.batch.gang import desired_counts, gang
from rayscale.batch.model import GANG_LABEL, Plugin, PodGroupWant, PodMetadata
from rayscale.cluster.meta import ClusterMeta

__all__ = ["SchedulerPlugins"]

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
API_GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"


class SchedulerPlugins(Plugin):
    name = "scheduler-plugins"
    scheduler_name = "scheduler-plugins-scheduler"
    reads = frozenset({GANG_LABEL})

    def pod_metadata(self, meta: ClusterMeta, spec: RayClusterSpec, group: str) -> PodMetadata:
        del spec, group
        labels = {POD_GROUP_LABEL: meta.name} if GANG_LABEL in meta.labels else {}
        return PodMetadata(self.scheduler_name, labels)

    def pod_group(self, meta: ClusterMeta, spec: RayClusterSpec) -> PodGroupWant | None:
        if GANG_LABEL not in meta.labels:
            return None
        # KubeRay: always the desired replicas, also when the cluster autoscales (its TODO).
        size = gang(spec, desired_counts(spec))
        owner = {**RAYCLUSTER.type_meta(), "name": meta.name, "uid": meta.uid}
        manifest = {
            "apiVersion": f"{API_GROUP}/{VERSION}",
            "kind": "PodGroup",
            "metadata": {"name": meta.name, "namespace": meta.namespace, "ownerReferences": [owner]},
            "spec": {"minMember": size.min_member, "minResources": size.min_resources},
        }
        return PodGroupWant(API_GROUP, VERSION, PLURAL, manifest, resize=False)
