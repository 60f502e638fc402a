"""What a reconcile sees: one RayCluster, its pods and services, as plain data."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from rayscale.cluster.meta import ClusterMeta
from rayscale.common.types import Obj


@dataclasses.dataclass(frozen=True)
class ClusterSnapshot:
    """A RayCluster body with every pod and service labelled with its name."""

    body: Obj
    pods: Sequence[Obj]
    services: Sequence[Obj]

    @property
    def meta(self) -> ClusterMeta:
        return ClusterMeta.from_body(self.body)

    @property
    def raw_spec(self) -> Obj:
        spec: Obj = self.body.get("spec") or {}
        return spec

    @property
    def status(self) -> Obj:
        status: Obj = self.body.get("status") or {}
        return status
