"""What a batch scheduler integration is made of: the pods' metadata and the PodGroup, as data."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Protocol

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.common.types import Manifest
from rayscale.resources import QuantityError, parse_quantity

__all__ = ["GANG_LABEL", "BatchScheduler", "Plugin", "PodGroupWant", "PodMetadata", "resized"]

#: The RayCluster label (any value) that makes it a gang for YuniKorn and scheduler-plugins.
GANG_LABEL = "ray.io/gang-scheduling-enabled"


@dataclasses.dataclass(frozen=True)
class PodMetadata:
    """What a scheduler adds to one pod: labels, annotations and its ``schedulerName``."""

    scheduler_name: str
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def applied(self, pod: Manifest) -> Manifest:
        """A copy of `pod` with this metadata added (existing keys overwritten, as KubeRay)."""
        meta = dict(pod.get("metadata") or {})
        if self.labels:
            meta["labels"] = {**(meta.get("labels") or {}), **self.labels}
        if self.annotations:
            meta["annotations"] = {**(meta.get("annotations") or {}), **self.annotations}
        spec = {**(pod.get("spec") or {}), "schedulerName": self.scheduler_name}
        return {**pod, "metadata": meta, "spec": spec}


@dataclasses.dataclass(frozen=True)
class PodGroupWant:
    """The PodGroup a RayCluster needs. `resize`: an existing one whose ``minMember`` or
    ``minResources`` differ is updated to these (Volcano); else one that exists is left as it is
    (scheduler-plugins)."""

    group: str  # the API group: scheduling.volcano.sh, scheduling.x-k8s.io
    version: str
    plural: str
    manifest: Manifest
    resize: bool

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.manifest["metadata"]["namespace"])


class BatchScheduler(Protocol):
    """One scheduler's integration; `name` is KubeRay's name for it (``--batch-scheduler``)."""

    name: str
    #: the pods' ``schedulerName``
    scheduler_name: str
    #: the RayCluster labels (and annotations) this integration reads
    reads: frozenset[str]

    def pod_metadata(self, meta: ClusterMeta, spec: RayClusterSpec, group: str) -> PodMetadata:
        """What a pod of `group` (``headgroup`` for the head) gets."""
        ...

    def pod_group(self, meta: ClusterMeta, spec: RayClusterSpec) -> PodGroupWant | None:
        """The PodGroup to create or keep, None when the scheduler needs none.

        Raises ValueError for a RayCluster whose labels cannot make one (KubeRay returns the
        error from its reconcile and creates no pod)."""
        ...

    def notes(self, meta: ClusterMeta) -> list[str]:
        """What the user should know about this RayCluster under this scheduler (Warning Events)."""
        ...


class Plugin:
    """What a scheduler's integration does unless it says otherwise: no PodGroup, nothing to say."""

    def pod_group(self, meta: ClusterMeta, spec: RayClusterSpec) -> PodGroupWant | None:
        del meta, spec
        return None

    def notes(self, meta: ClusterMeta) -> list[str]:
        del meta
        return []


def _same_quantities(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    """KubeRay's quotav1.Equals: the same resource names, each the same amount."""
    if set(a) != set(b):
        return False
    try:
        return all(parse_quantity(str(a[k])) == parse_quantity(str(b[k])) for k in a)
    except QuantityError:
        return False


def resized(existing: Manifest, want: PodGroupWant) -> Manifest | None:
    """`existing` with `want`'s ``minMember`` and ``minResources`` when it is to be resized and
    either differs (KubeRay's volcano plugin: an Update of the PodGroup it read); None otherwise."""
    if not want.resize:
        return None
    spec = existing.get("spec") or {}
    wanted = want.manifest["spec"]
    resources = spec.get("minResources")
    if (
        spec.get("minMember") == wanted["minMember"]
        and isinstance(resources, Mapping)
        and _same_quantities(resources, wanted["minResources"])
    ):
        return None
    return {
        **existing,
        "spec": {**spec, "minMember": wanted["minMember"], "minResources": wanted["minResources"]},
    }
