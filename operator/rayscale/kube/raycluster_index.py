"""The RayClusters an informer (`rayscale.kube.informer`) delivers: this operator's (its `Scope`
owns them) kept whole but their managedFields, the others (another shard's) only as their
resourceVersion, and a call to `changed` for each that came, changed or went."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rayscale.kube.informer import Obj

ClusterKey = tuple[str, str]  # (namespace, RayCluster name)
# changed(key, body): body is the RayCluster as it is now, None when it was deleted
Changed = Callable[[ClusterKey, Mapping[str, Any] | None], None]


def _key(obj: Obj) -> ClusterKey:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class RayClusterIndex:
    """A `rayscale.kube.informer.Sink`."""

    def __init__(self, owns: Callable[[Mapping[str, Any]], bool], changed: Changed) -> None:
        self.owns = owns
        self.changed = changed
        self.owned: dict[ClusterKey, Obj] = {}
        self.foreign: dict[ClusterKey, str] = {}  # another shard's RayClusters: resourceVersion

    def upsert(self, obj: Obj) -> None:
        key = _key(obj)
        meta = obj.get("metadata") or {}
        if self.owns(obj):
            meta.pop("managedFields", None)
            self.owned[key] = obj
            self.foreign.pop(key, None)
        else:
            self.foreign[key] = str(meta.get("resourceVersion") or "")
            self.owned.pop(key, None)
        self.changed(key, obj)

    def delete(self, obj: Obj) -> None:
        key = _key(obj)
        self.owned.pop(key, None)
        self.foreign.pop(key, None)
        self.changed(key, None)

    def replace(self, namespace: str | None, objs: Sequence[Obj]) -> None:
        """Every RayCluster of `namespace` (None: every one) is now one of `objs`: the others were
        deleted meanwhile."""
        listed = {_key(obj) for obj in objs}
        for key in [*self.owned, *self.foreign]:
            if (namespace is None or key[0] == namespace) and key not in listed:
                self.owned.pop(key, None)
                self.foreign.pop(key, None)
                self.changed(key, None)
        for obj in objs:
            self.upsert(obj)
