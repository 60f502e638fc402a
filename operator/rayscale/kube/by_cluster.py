"""Objects by the RayCluster they belong to: the slim copies of the Ray pods and the Ray Services
(fed by an informer, `rayscale.kube.informer`) and of the RayResourceRequests and the
RayVirtualClusters (fed by kopf's handlers, `rayscale.handlers`), and a call to `changed` for the
RayCluster of every object that came, changed or went."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from rayscale.common import labels as L
from rayscale.common import pods
from rayscale.common.types import ClusterKey, Obj

ObjKey = tuple[str, str]  # (namespace, object name)


def slim_service(obj: Obj) -> dict[str, Any]:
    return pods.slim(obj, ("clusterIP", "ports", "type"))


def slim_custom(more: Sequence[str], obj: Obj) -> dict[str, Any]:
    """A RayResourceRequest or RayVirtualCluster: what the autoscaler reads of its metadata (and
    `more` of it), its spec and status."""
    meta = obj.get("metadata") or {}
    keep = ("name", "namespace", "uid", "generation", "deletionTimestamp", "resourceVersion", *more)
    return {
        "metadata": {k: meta[k] for k in keep if k in meta},
        "spec": dict(obj.get("spec") or {}),
        "status": dict(obj.get("status") or {}),
    }


def by_label(obj: Obj) -> str | None:
    """The RayCluster named by the object's `ray.io/cluster` label (pods, Services)."""
    cluster = ((obj.get("metadata") or {}).get("labels") or {}).get(L.RAY_CLUSTER)
    return str(cluster) if cluster is not None else None


def by_spec(field: str) -> Callable[[Obj], str | None]:
    """The RayCluster named by the object's `spec.<field>` ("" when it names none)."""

    def cluster(obj: Obj) -> str | None:
        return str((obj.get("spec") or {}).get(field) or "")

    return cluster


class ByCluster:
    """A `rayscale.kube.informer.Sink` (or fed by kopf's handlers): each object as `slim(obj)`,
    under the RayCluster `cluster_of(obj)` names in the object's namespace (None: under none, as
    if gone)."""

    def __init__(
        self,
        changed: Callable[[ClusterKey], None],
        *,
        cluster_of: Callable[[Obj], str | None] = by_label,
        slim: Callable[[Obj], dict[str, Any]] = pods.slim_pod,
    ) -> None:
        self.changed = changed
        self.cluster_of = cluster_of
        self.slim = slim
        self._by_cluster: dict[ClusterKey, dict[ObjKey, dict[str, Any]]] = {}
        self._cluster_of: dict[ObjKey, ClusterKey] = {}

    def of(self, key: ClusterKey) -> list[dict[str, Any]]:
        return list(self._by_cluster.get(key, {}).values())

    def __len__(self) -> int:
        return len(self._cluster_of)

    def keys(self) -> Collection[ObjKey]:
        """The (namespace, name) of every object held."""
        return self._cluster_of.keys()

    def _keys(self, obj: Obj) -> tuple[ObjKey, ClusterKey | None]:
        meta = obj.get("metadata") or {}
        ns = str(meta.get("namespace") or "")
        cluster = self.cluster_of(obj)
        return (ns, str(meta.get("name") or "")), ((ns, cluster) if cluster is not None else None)

    def upsert(self, obj: Obj) -> None:
        key, cluster = self._keys(obj)
        old = self._cluster_of.get(key)
        if old is not None and old != cluster:
            self._drop(key, old)
        if cluster is None:  # e.g. its ray.io/cluster label was removed: no longer a Ray object
            return
        self._by_cluster.setdefault(cluster, {})[key] = self.slim(obj)
        self._cluster_of[key] = cluster
        self.changed(cluster)

    def delete(self, obj: Obj) -> None:
        key, _ = self._keys(obj)
        old = self._cluster_of.get(key)
        if old is not None:
            self._drop(key, old)

    def replace(self, namespace: str | None, objs: Sequence[Obj]) -> None:
        """Every object of `namespace` (None: every object) is now one of `objs`: the others went.
        Each RayCluster that had or has an object there is changed (a relist may hide any change)."""
        gone = {key for key in self._cluster_of if namespace is None or key[0] == namespace}
        for obj in objs:
            gone.discard(self._keys(obj)[0])
        for key in gone:
            self._drop(key, self._cluster_of[key])
        for obj in objs:
            self.upsert(obj)

    def _drop(self, key: ObjKey, cluster: ClusterKey) -> None:
        del self._cluster_of[key]
        group = self._by_cluster.get(cluster, {})
        group.pop(key, None)
        if not group:
            self._by_cluster.pop(cluster, None)
        self.changed(cluster)
