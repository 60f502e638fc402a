"""The names of rayscale's custom resources, spelled once: group, version, plural and kind.

Everything that calls the Kubernetes API for a RayCluster, RayJob, RayCronJob, RayResourceRequest or
RayVirtualCluster (the operator, `rayscale status`, the tests, e2e and the benchmarks) takes the
names from here;
`rayscale.api.registry` builds the CustomResourceDefinitions from them.
"""

from __future__ import annotations

import dataclasses

__all__ = ["RAYCLUSTER", "RAYCRONJOB", "RAYJOB", "RAYRESOURCEREQUEST", "RAYVIRTUALCLUSTER", "ResourceName"]


@dataclasses.dataclass(frozen=True)
class ResourceName:
    group: str
    version: str  # the version rayscale reads and writes: the CRD's storage version
    plural: str
    kind: str
    singular: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def path(self) -> tuple[str, str, str]:
        """(group, version, plural): the first arguments of the custom objects API's calls."""
        return self.group, self.version, self.plural

    def at(self, namespace: str) -> tuple[str, str, str, str]:
        """(group, version, namespace, plural): the first arguments of the namespaced calls."""
        return self.group, self.version, namespace, self.plural

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    def type_meta(self) -> dict[str, str]:
        """apiVersion and kind, as an object of this kind starts."""
        return {"apiVersion": self.api_version, "kind": self.kind}


RAYCLUSTER = ResourceName("ray.io", "v1", "rayclusters", "RayCluster", "raycluster")
RAYJOB = ResourceName("ray.io", "v1", "rayjobs", "RayJob", "rayjob")
RAYCRONJOB = ResourceName("ray.io", "v1", "raycronjobs", "RayCronJob", "raycronjob")
RAYRESOURCEREQUEST = ResourceName(
    "rayscale.io", "v1alpha1", "rayresourcerequests", "RayResourceRequest", "rayresourcerequest"
)
RAYVIRTUALCLUSTER = ResourceName(
    "rayscale.io", "v1alpha1", "rayvirtualclusters", "RayVirtualCluster", "rayvirtualcluster"
)
