"""What a reconcile sees: one RayCluster, read once, with its pods and services as plain data.

Making a `ClusterSnapshot` is the controller's one reader of the RayCluster: the metadata
(`ClusterMeta`: names, finalizers, deletion, resourceVersion, the subject of Events), the status
as stored (typed: `RayClusterStatus`) and ``spec.managedBy`` are read here; the spec is read by
`ClusterSnapshot.spec` (`parse_and_validate`) and by nothing else. After that a reconcile never
reads the RayCluster body again.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from rayscale.api.raycluster import Condition, RayClusterSpec, RayClusterStatus
from rayscale.cluster.job_end import finished_spec
from rayscale.cluster.limits import DEFAULT_MAX_PODS
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.validation import Invalid, parse_and_validate
from rayscale.common.types import Obj
from rayscale.controller.status import FOREIGN

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ClusterSnapshot:
    """A RayCluster, read from `body` once, and every pod and service labelled with its name."""

    body: dataclasses.InitVar[Obj]
    pods: Sequence[Obj]
    services: Sequence[Obj]
    meta: ClusterMeta = dataclasses.field(init=False)
    status: RayClusterStatus = dataclasses.field(init=False)  # as stored, the controller's keys
    managed_by: str | None = dataclasses.field(init=False)  # spec.managedBy, read before the spec
    _spec: Obj = dataclasses.field(init=False, repr=False)  # `spec`'s input, nobody else's

    def __post_init__(self, body: Obj) -> None:
        meta = ClusterMeta.from_body(body)
        spec: Obj = body.get("spec") or {}
        managed_by = spec.get("managedBy") if isinstance(spec, Mapping) else None
        object.__setattr__(self, "meta", meta)
        object.__setattr__(self, "status", _typed_status(meta, body.get("status") or {}))
        object.__setattr__(self, "managed_by", str(managed_by) if managed_by else None)
        object.__setattr__(self, "_spec", spec)

    def spec(self, *, max_pods: int = DEFAULT_MAX_PODS) -> RayClusterSpec | Invalid:
        """The parsed spec, or why it is invalid (`max_pods`: worker pods one RayCluster may ask for)."""
        spec = parse_and_validate(self.meta, self._spec, max_pods=max_pods)
        # a finished RayJob's cluster keeps no worker (its groups' minimum counts as 0)
        return spec if isinstance(spec, Invalid) else finished_spec(self.meta.annotations, spec)

    @property
    def stored_status(self) -> dict[str, Any]:
        """The status as the API server stores it (the controller's keys): what the new status is
        computed from and the status write patches."""
        return self.status.model_dump(by_alias=True, exclude_unset=True, mode="json")

    def condition(self, kind: str) -> Condition | None:
        """The stored condition of type `kind`, or None."""
        return next((c for c in self.status.conditions or () if c.type == kind), None)

    def condition_true(self, kind: str) -> bool:
        found = self.condition(kind)
        return found is not None and found.status == "True"


def _typed_status(meta: ClusterMeta, raw: Obj) -> RayClusterStatus:
    """The stored status, typed, but for the keys another writer owns (`status.FOREIGN`: the
    controller neither reads nor writes them, and their shape is their writer's concern). One the
    CRD's schema would refuse (it requires what the model does) is read as empty: the status
    written next replaces every field the controller owns."""
    try:
        owned = {k: v for k, v in raw.items() if k not in FOREIGN} if isinstance(raw, Mapping) else raw
        return RayClusterStatus.model_validate(owned)
    except ValidationError as exc:
        log.warning("RayCluster %s/%s: status not readable, rewritten (%s)", meta.namespace, meta.name, exc)
        return RayClusterStatus()
