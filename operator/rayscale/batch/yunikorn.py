"""Apache YuniKorn (``--batch-scheduler yunikorn``), as KubeRay v1.6.2's plugin: the pods go to
the scheduler ``yunikorn`` with the labels ``applicationId`` and ``queue`` from the RayCluster's
``yunikorn.apache.org/app-id`` and ``yunikorn.apache.org/queue``. A RayCluster labelled
``ray.io/gang-scheduling-enabled`` is a gang: each pod carries the task groups (the RayCluster's
own annotation ``yunikorn.apache.org/task-groups`` if it has one, else one task group per group:
the head, then each worker group with ``minReplicas x numOfHosts`` members and one pod's
resources, node selector, tolerations and affinity) and its own group's name. YuniKorn makes its
placeholders from these; no object is created here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayscale.api.raycluster import RayClusterSpec
from rayscale.batch import gojson
from rayscale.batch.gang import pod_resources
from rayscale.batch.model import GANG_LABEL, Plugin, PodMetadata
from rayscale.cluster.meta import ClusterMeta
from rayscale.common import labels as L

__all__ = ["YuniKorn", "task_groups"]

APP_ID = "yunikorn.apache.org/app-id"
QUEUE = "yunikorn.apache.org/queue"
TASK_GROUPS = "yunikorn.apache.org/task-groups"
TASK_GROUP_NAME = "yunikorn.apache.org/task-group-name"
#: the RayCluster label -> the pod label YuniKorn reads (its older names, as KubeRay writes them)
POD_LABELS = {APP_ID: "applicationId", QUEUE: "queue"}


def _task_group(name: str, members: int, template: Mapping[str, Any]) -> dict[str, Any]:
    pod = template.get("spec") or {}
    group: dict[str, Any] = {"minResource": pod_resources(template)}
    if pod.get("nodeSelector"):
        group["nodeSelector"] = gojson.encode("map", pod["nodeSelector"])
    if pod.get("affinity") is not None:
        group["affinity"] = gojson.encode("Affinity", pod["affinity"])
    group["name"] = name
    if pod.get("tolerations"):
        group["tolerations"] = gojson.encode("[]Toleration", pod["tolerations"])
    group["minMember"] = members
    return group


def task_groups(spec: RayClusterSpec) -> str:
    """KubeRay's task groups of a RayCluster, as the JSON text it writes."""
    groups = [_task_group(L.HEAD_GROUP, 1, spec.head_group_spec.template)]
    groups += [_task_group(g.group_name, g.min_replicas * g.num_of_hosts, g.template) for g in spec.workers]
    return gojson.dumps(groups)


class YuniKorn(Plugin):
    name = "yunikorn"
    scheduler_name = "yunikorn"
    reads = frozenset({APP_ID, QUEUE, GANG_LABEL})

    def pod_metadata(self, meta: ClusterMeta, spec: RayClusterSpec, group: str) -> PodMetadata:
        labels = {theirs: meta.labels[ours] for ours, theirs in POD_LABELS.items() if meta.labels.get(ours)}
        annotations: dict[str, str] = {}
        if GANG_LABEL in meta.labels:
            annotations[TASK_GROUPS] = meta.annotations.get(TASK_GROUPS) or task_groups(spec)
            if group:
                annotations[TASK_GROUP_NAME] = group
        return PodMetadata(self.scheduler_name, labels, annotations)
