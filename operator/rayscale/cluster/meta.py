"""A RayCluster's metadata as plain data: what both halves read of it, and its owner reference."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from rayscale.api.names import RAYCLUSTER

__all__ = ["ClusterMeta"]


@dataclasses.dataclass(frozen=True)
class ClusterMeta:
    namespace: str
    name: str
    uid: str
    generation: int = 0
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    deletion_timestamp: str = ""  # RFC 3339; empty while the cluster is not being deleted
    finalizers: tuple[str, ...] = ()
    resource_version: str = ""

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ClusterMeta:
        meta = body.get("metadata") or {}
        return cls(
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            uid=meta.get("uid", ""),
            generation=int(meta.get("generation") or 0),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            deletion_timestamp=str(meta.get("deletionTimestamp") or ""),
            finalizers=tuple(meta.get("finalizers") or ()),
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    @property
    def deleting(self) -> bool:
        return bool(self.deletion_timestamp)

    def subject(self) -> dict[str, Any]:
        """The cluster as the object an Event is about (what `EventSink.post` reads of it)."""
        return {
            **RAYCLUSTER.type_meta(),
            "metadata": {"name": self.name, "namespace": self.namespace, "uid": self.uid},
        }

    def owner_reference(self) -> dict[str, Any]:
        return {
            **RAYCLUSTER.type_meta(),
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
