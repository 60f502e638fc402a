"""Which watch events mark which queue: the controller's event filter.

Every event only marks its RayCluster dirty; the controller's work queue then runs one
level-based reconcile per cluster at a time (`rayscale.controller.runner`), and the autoscaler's
queue one autoscaling round. A RayCluster event marks each only when something it acts on changed
(`reconciled_facts`): status writes alone start no autoscaling round. Service events
mark only the controller; RayResourceRequest and RayVirtualCluster events only the autoscaler.
Nothing is marked for another shard's RayCluster.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from rayscale.api.names import RAYCLUSTER
from rayscale.common.types import ClusterKey
from rayscale.kube.index_source import IndexSource
from rayscale.kube.scope import Scope
from rayscale.metrics import Metrics

log = logging.getLogger(__name__)


class ControllerQueue(Protocol):
    def mark(self, key: ClusterKey) -> None: ...


class AutoscalerQueue(Protocol):
    def mark(self, key: ClusterKey, reason: str = "") -> None:
        """`reason`: the kind of object that changed, the next round's trigger."""

    def pod_create_refused(self, key: ClusterKey, group: str, status: int, message: str) -> None:
        """The controller's create of a pod of `group` was refused (``apply.CreateListener``)."""


def reconciled_facts(body: Mapping[str, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """What of a RayCluster, when it changes, each half acts on: (the autoscaler's, the
    controller's).

    The autoscaler reads the metadata and the spec (generation), and of the status only what it
    wrote itself: a status write (the controller's worker counts and conditions, its own
    ``status.autoscaler``) starts no round. The controller reconciles the same, and the status's
    state and conditions too (a step such as suspending acts on the condition the step before
    wrote); a status write that moves only the worker counts or times (most of its own) is not
    reconciled."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    scaled = (
        meta.get("uid"),
        meta.get("generation"),
        meta.get("deletionTimestamp"),
        tuple(sorted((meta.get("labels") or {}).items())),
        tuple(sorted((meta.get("annotations") or {}).items())),
        tuple(meta.get("finalizers") or ()),
    )
    conditions = [(c.get("type"), c.get("status"), c.get("reason")) for c in status.get("conditions") or []]
    return scaled, (*scaled, status.get("state"), tuple(conditions))


class EventFilter:
    """Marks the queues (`controller`, `autoscaler`: set once they exist) for each watch event.
    `source` is the indexes the events were applied to before."""

    def __init__(self, scope: Scope, *, metrics: Metrics | None = None, run_controller: bool = True) -> None:
        self.scope = scope
        self.metrics = metrics if run_controller else None  # series of the RayCluster controller
        self.source: IndexSource | None = None
        self.controller: ControllerQueue | None = None
        self.autoscaler: AutoscalerQueue | None = None
        # What of each RayCluster handed to the controller and the autoscaler, when it changes,
        # each acts on (`reconciled_facts`). One that leaves the scope is handed over once more,
        # so that both let go of it.
        self.facts: dict[ClusterKey, tuple[tuple[Any, ...], tuple[Any, ...]]] = {}

    def _hand(
        self, key: ClusterKey, reason: str, *, controller: bool = True, autoscaler: bool = True
    ) -> None:
        """Mark `key` for the controller and the autoscaler (unless told not to), which records
        `reason` (the kind of object that changed) as its next round's trigger."""
        if controller and self.controller is not None:
            self.controller.mark(key)
        if autoscaler and self.autoscaler is not None:
            self.autoscaler.mark(key, reason)

    def _foreign(self, key: ClusterKey) -> bool:
        return self.source is not None and self.source.foreign(key)

    def raycluster_changed(self, key: ClusterKey, body: Mapping[str, Any] | None) -> None:
        """A RayCluster of this shard is marked; one that was and is no longer (deleted: `body`
        None, or its labels moved it to another shard) is marked once more, so that both halves
        let go of it (its series go with it); another shard's is not touched."""
        ours = body is not None and self.scope.owns(body)
        if not ours and key not in self.facts:
            return
        if self.metrics is not None:
            named = {"metadata": {"namespace": key[0], "name": key[1]}}
            self.metrics.raycluster_watched(body if body is not None else named, deleted=not ours)
        controller = autoscaler = True
        if body is not None and ours:
            facts = reconciled_facts(body)
            before = self.facts.get(key)
            autoscaler = before is None or before[0] != facts[0]
            controller = before is None or before[1] != facts[1]
            self.facts[key] = facts
        else:
            self.facts.pop(key, None)
            if body is not None:
                log.info(
                    "RayCluster %s/%s left this operator's scope (%s): let go", *key, self.scope.describe()
                )
        self._hand(key, RAYCLUSTER.kind, controller=controller, autoscaler=autoscaler)

    def pod_changed(self, key: ClusterKey) -> None:
        """A pod of `key` came, changed or went."""
        if not self._foreign(key):
            self._hand(key, "pod")

    def service_changed(self, key: ClusterKey) -> None:
        """A Service of `key` came, changed or went: the controller's business only."""
        if self.controller is not None and not self._foreign(key):
            self.controller.mark(key)

    def request_changed(self, reason: str, key: ClusterKey) -> None:
        """A RayResourceRequest or RayVirtualCluster (`reason`) bound to `key` came, changed or
        went: the autoscaler's business only."""
        if not self._foreign(key):
            self._hand(key, reason, controller=False)

    def pod_create_refused(self, key: ClusterKey, group: str, status: int, message: str) -> None:
        """The controller's create of a pod of `group` was refused: told to the autoscaler (a
        ResourceQuota's refusal is a failed launch at once)."""
        if self.autoscaler is not None:
            self.autoscaler.pod_create_refused(key, group, status, message)
