"""The watch-fed indexes, and `IndexSource`: the one reader of them both halves use.

The RayClusters, RayResourceRequests and RayVirtualClusters are indexed by kopf's handlers
(`rayscale.handlers`), the Ray pods and Services by informers (`rayscale.kube.informer`); both
halves read what they see through `IndexSource`, never the API server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rayscale.common.types import ClusterKey
from rayscale.kube.by_cluster import ByCluster
from rayscale.kube.raycluster_index import RayClusterIndex


@dataclasses.dataclass
class Indexes:
    """The RayClusters (this shard's whole, the others' as a version) and the objects bound to
    each RayCluster: its pods and Services (by label), its RayResourceRequests and
    RayVirtualClusters (by a spec field)."""

    clusters: RayClusterIndex
    pods: ByCluster
    services: ByCluster
    requests: ByCluster
    virtual_clusters: ByCluster


class IndexSource:
    """The controller's and the autoscaler's view of the cluster, read from the indexes.

    A RayCluster outside this operator's `Scope` (another shard's) is not there, and neither are
    the RayResourceRequests and RayVirtualClusters bound to it: the autoscaler lets go of it
    without a word. A RayCluster that does not exist at all is not there either, but its requests
    and virtual clusters are: they are told so, as without shards.
    """

    def __init__(self, indexes: Indexes) -> None:
        self.indexes = indexes

    def cluster(self, key: ClusterKey) -> Mapping[str, Any] | None:
        return self.indexes.clusters.owned.get(key)

    def pods(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        return self.indexes.pods.of(key)

    def services(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        return self.indexes.services.of(key)

    def foreign(self, key: ClusterKey) -> bool:
        """`key` is a RayCluster that exists and is another shard's."""
        clusters = self.indexes.clusters
        return key in clusters.foreign and key not in clusters.owned

    def requests(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        return [] if self.foreign(key) else self.indexes.requests.of(key)

    def virtual_clusters(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        return [] if self.foreign(key) else self.indexes.virtual_clusters.of(key)

    def cluster_keys(self) -> Sequence[ClusterKey]:
        return list(self.indexes.clusters.owned)

    def resource_versions(self) -> dict[ClusterKey, str]:
        """Every RayCluster the watch delivered, this shard's or not, at its resourceVersion."""
        clusters = self.indexes.clusters
        out = dict(clusters.foreign)
        for key, body in clusters.owned.items():
            out[key] = str(body["metadata"].get("resourceVersion", ""))
        return out
