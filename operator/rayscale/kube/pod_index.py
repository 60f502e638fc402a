"""The operator's Ray pods, by RayCluster: the slim copies (`rayscale.common.pods.slim_pod`) the
pod informer (`rayscale.kube.informer`) keeps, and a call to `changed` for the RayCluster of every
pod that came, changed or went."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rayscale.common import labels as L
from rayscale.common import pods
from rayscale.kube.informer import Obj

ClusterKey = tuple[str, str]  # (namespace, RayCluster name)
PodKey = tuple[str, str]  # (namespace, pod name)


def _keys(obj: Obj) -> tuple[PodKey, ClusterKey | None]:
    meta = obj.get("metadata") or {}
    ns = str(meta.get("namespace") or "")
    cluster = (meta.get("labels") or {}).get(L.RAY_CLUSTER)
    return (ns, str(meta.get("name") or "")), ((ns, str(cluster)) if cluster is not None else None)


class PodIndex:
    """A `rayscale.kube.informer.Sink`."""

    def __init__(self, changed: Callable[[ClusterKey], None]) -> None:
        self.changed = changed
        self._by_cluster: dict[ClusterKey, dict[PodKey, dict[str, Any]]] = {}
        self._cluster_of: dict[PodKey, ClusterKey] = {}

    def pods(self, key: ClusterKey) -> list[dict[str, Any]]:
        return list(self._by_cluster.get(key, {}).values())

    def __len__(self) -> int:
        return len(self._cluster_of)

    def upsert(self, obj: Obj) -> None:
        pod, cluster = _keys(obj)
        old = self._cluster_of.get(pod)
        if old is not None and old != cluster:
            self._drop(pod, old)
        if cluster is None:  # its ray.io/cluster label was removed: no longer a Ray pod
            return
        self._by_cluster.setdefault(cluster, {})[pod] = pods.slim_pod(obj)
        self._cluster_of[pod] = cluster
        self.changed(cluster)

    def delete(self, obj: Obj) -> None:
        pod, _ = _keys(obj)
        old = self._cluster_of.get(pod)
        if old is not None:
            self._drop(pod, old)

    def replace(self, namespace: str | None, objs: Sequence[Obj]) -> None:
        """Every pod of `namespace` (None: every pod) is now one of `objs`: the others went. Each
        RayCluster that had or has a pod there is changed (a relist may hide any change)."""
        gone = {pod for pod in self._cluster_of if namespace is None or pod[0] == namespace}
        for obj in objs:
            gone.discard(_keys(obj)[0])
        for pod in gone:
            self._drop(pod, self._cluster_of[pod])
        for obj in objs:
            self.upsert(obj)

    def _drop(self, pod: PodKey, cluster: ClusterKey) -> None:
        del self._cluster_of[pod]
        group = self._by_cluster.get(cluster, {})
        group.pop(pod, None)
        if not group:
            self._by_cluster.pop(cluster, None)
        self.changed(cluster)
