"""Volcano (``--batch-scheduler volcano``), as KubeRay v1.6.2's volcano plugin: a PodGroup
``ray-<cluster>-pg`` owned by the RayCluster (its annotations copied, ``spec.queue`` from the
label ``volcano.sh/queue-name``, ``spec.priorityClassName`` from ``ray.io/priority-class-name``,
``spec.networkTopology`` from ``volcano.sh/network-topology-mode`` and
``volcano.sh/network-topology-highest-tier-allowed``), sized by `rayscale.batch.gang` and resized
when the spec changes; each pod names it (annotation ``scheduling.k8s.io/group-name``), names its
group (``volcano.sh/task-spec``) and carries the queue and priority labels."""

from __future__ import annotations

from typing import Any

from rayscale.api.raycluster import RayClusterSpec
from rayscale.batch.gang import gang, kuberay_counts
from rayscale.batch.model import Plugin, PodGroupWant, PodMetadata
from rayscale.cluster.meta import ClusterMeta
from rayscale.common import labels as L

__all__ = ["Volcano"]

QUEUE = "volcano.sh/queue-name"
PRIORITY_CLASS_LABEL = "ray.io/priority-class-name"
TOPOLOGY_MODE = "volcano.sh/network-topology-mode"
TOPOLOGY_TIER = "volcano.sh/network-topology-highest-tier-allowed"
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
API_GROUP, VERSION, PLURAL = "scheduling.volcano.sh", "v1beta1", "podgroups"


def pod_group_name(meta: ClusterMeta) -> str:
    """``ray-<name>-pg``; a RayJob's RayCluster's is named after the RayJob."""
    name = meta.name
    if meta.labels.get(L.ORIGINATED_FROM_CRD) == L.ORIGIN_RAYJOB:
        name = meta.labels.get(L.ORIGINATED_FROM_CR_NAME) or name
    return f"ray-{name}-pg"


def _go_atoi(text: str) -> int:
    """Go's strconv.Atoi: an optional sign and decimal digits, nothing else."""
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise ValueError(f'strconv.Atoi: parsing "{text}": invalid syntax')
    return int(text)


class Volcano(Plugin):
    name = "volcano"
    scheduler_name = "volcano"
    reads = frozenset({QUEUE, PRIORITY_CLASS_LABEL, TOPOLOGY_MODE, TOPOLOGY_TIER})

    def pod_metadata(self, meta: ClusterMeta, spec: RayClusterSpec, group: str) -> PodMetadata:
        del spec
        labels = {k: meta.labels[k] for k in (QUEUE, PRIORITY_CLASS_LABEL) if meta.labels.get(k)}
        annotations = {GROUP_NAME_ANNOTATION: pod_group_name(meta), TASK_SPEC_ANNOTATION: group}
        return PodMetadata(self.scheduler_name, labels, annotations)

    def pod_group(self, meta: ClusterMeta, spec: RayClusterSpec) -> PodGroupWant | None:
        if meta.labels.get(L.ORIGINATED_FROM_CRD) == L.ORIGIN_RAYJOB:
            return None  # KubeRay: the RayJob's PodGroup, made by the RayJob's controller
        size = gang(spec, kuberay_counts(spec))
        name = pod_group_name(meta)
        pg_spec: dict[str, Any] = {"minMember": size.min_member, "minResources": size.min_resources}
        if TOPOLOGY_MODE in meta.labels:
            topology: dict[str, Any] = {"mode": meta.labels[TOPOLOGY_MODE]}
            if TOPOLOGY_TIER in meta.labels:
                try:
                    topology["highestTierAllowed"] = _go_atoi(meta.labels[TOPOLOGY_TIER])
                except ValueError as exc:
                    raise ValueError(
                        f"failed to convert {TOPOLOGY_TIER} label to int: {exc} for podgroup {name} in"
                        f" namespace {meta.namespace}"
                    ) from exc
            pg_spec["networkTopology"] = topology
        if QUEUE in meta.labels:
            pg_spec["queue"] = meta.labels[QUEUE]
        if PRIORITY_CLASS_LABEL in meta.labels:
            pg_spec["priorityClassName"] = meta.labels[PRIORITY_CLASS_LABEL]
        manifest = {
            "apiVersion": f"{API_GROUP}/{VERSION}",
            "kind": "PodGroup",
            "metadata": {
                "name": name,
                "namespace": meta.namespace,
                "ownerReferences": [meta.owner_reference()],
                "annotations": dict(meta.annotations),
            },
            "spec": pg_spec,
            "status": {"phase": "Pending"},
        }
        return PodGroupWant(API_GROUP, VERSION, PLURAL, manifest, resize=True)

    def notes(self, meta: ClusterMeta) -> list[str]:
        if meta.labels.get(L.ORIGINATED_FROM_CRD) == L.ORIGIN_RAYJOB:
            return [
                f"its pods name the PodGroup {pod_group_name(meta)} of the RayJob that made it, which"
                " rayscale's RayJob controller does not create yet: Volcano holds them until it exists"
            ]
        return []
