"""The RayClusters kopf's handlers deliver (`rayscale.handlers`; it is an informer's `Sink` too):
this operator's (its `Scope` owns them) kept whole but their managedFields, the others (another
shard's) only as their resourceVersion, and a call to `changed` for each that came, changed or
went."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rayscale.common.types import ClusterKey

# changed(key, body): body is the RayCluster as it is now, None when it was deleted
Changed = Callable[[ClusterKey, Mapping[str, Any] | None], None]


def key_of(obj: Mapping[str, Any]) -> ClusterKey:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class RayClusterIndex:
    def __init__(self, owns: Callable[[Mapping[str, Any]], bool], changed: Changed) -> None:
        self.owns = owns
        self.changed = changed
        self.owned: dict[ClusterKey, dict[str, Any]] = {}
        self.foreign: dict[ClusterKey, str] = {}  # another shard's RayClusters: resourceVersion

    def upsert(self, obj: Mapping[str, Any]) -> None:
        """`obj` as the watch delivered it: its top-level mapping is copied, and its metadata
        without managedFields; the rest is shared, never changed."""
        key = key_of(obj)
        meta = obj.get("metadata") or {}
        if self.owns(obj):
            slim = {k: v for k, v in meta.items() if k != "managedFields"}
            self.owned[key] = {**obj, "metadata": slim}
            self.foreign.pop(key, None)
        else:
            self.foreign[key] = str(meta.get("resourceVersion") or "")
            self.owned.pop(key, None)
        self.changed(key, obj)

    def keys(self) -> set[ClusterKey]:
        """Every RayCluster held, this shard's or not."""
        return {*self.owned, *self.foreign}

    def delete(self, obj: Mapping[str, Any]) -> None:
        self.forget(key_of(obj))

    def forget(self, key: ClusterKey) -> None:
        """RayCluster `key` was deleted (or is found gone)."""
        self.owned.pop(key, None)
        self.foreign.pop(key, None)
        self.changed(key, None)

    def replace(self, namespace: str | None, objs: Sequence[Mapping[str, Any]]) -> None:
        """Every RayCluster of `namespace` (None: every one) is now one of `objs`: the others were
        deleted meanwhile (an informer's relist: `rayscale.kube.informer.Sink`)."""
        listed = {key_of(obj) for obj in objs}
        for key in [*self.owned, *self.foreign]:
            if (namespace is None or key[0] == namespace) and key not in listed:
                self.forget(key)
        for obj in objs:
            self.upsert(obj)
