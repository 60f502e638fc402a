"""Keeps each RayCluster's PodDisruptionBudgets (`rayscale.controller.budgets`) in step with its
annotation and groups: the I/O, the Events, and the ``DisruptionBudgets`` condition they end in.

A cluster that never asked for budgets costs nothing: no call is made for it. One that asks (or
whose condition says it had budgets, so that removing the annotation removes them, across restarts
of the operator too) has its namespace's budgets listed when its spec or annotation changed, and
otherwise at most once per `recheck` seconds (the resync period), which is also when a budget
deleted by hand is made again and a new budget of someone else's is found in the way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Hashable, Sequence

from kubernetes_asyncio import client

from rayscale.api.disruption_annotations import DISRUPTION_BUDGET_ANNOTATION, enabled
from rayscale.api.raycluster import Condition, RayClusterSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.common.types import ClusterKey, Obj
from rayscale.controller import budgets
from rayscale.controller.budgets import Verdict
from rayscale.kube import pdb_ops
from rayscale.kube.events import EventSink
from rayscale.kube.ops import KubeError

log = logging.getLogger(__name__)
#: the chart value that grants the operator the budgets' RBAC (charts/rayscale/templates/rbac-pdb.yaml)
CHART_VALUE = "podDisruptionBudgets.enabled"
FORBIDDEN = 403


@dataclasses.dataclass(frozen=True)
class Unchanged:
    """Nothing was looked at: the condition stays as stored."""


UNCHANGED = Unchanged()


class BudgetKeeper:
    def __init__(self, api: client.ApiClient, events: EventSink, *, recheck: float) -> None:
        self.api, self.events, self.recheck = api, events, recheck
        self._seen: dict[ClusterKey, tuple[Hashable, float]] = {}  # inputs and loop time of the last look

    def forget(self, key: ClusterKey) -> None:
        self._seen.pop(key, None)

    async def keep(
        self, meta: ClusterMeta, spec: RayClusterSpec, pods: Sequence[Obj], stored: Condition | None
    ) -> Verdict | Unchanged | None:
        """Bring the cluster's budgets in step; the condition to write (None: none), or `UNCHANGED`."""
        key = (meta.namespace, meta.name)
        wants = enabled(meta.annotations, DISRUPTION_BUDGET_ANNOTATION)
        if not wants and stored is None:
            self._seen.pop(key, None)
            return UNCHANGED
        inputs = (meta.uid, meta.generation, wants)
        clock = asyncio.get_running_loop().time()
        last = self._seen.get(key)
        if last is not None and last[0] == inputs and clock - last[1] < self.recheck:
            return UNCHANGED
        result = await self._apply(meta, spec, pods, wants)
        if result is not None and result.reason == "ApplyFailed":
            self._seen.pop(key, None)  # looked at again on the next reconcile
        else:
            self._seen[key] = (inputs, clock)
        if result is not None and result.warning and (stored is None or stored.message != result.message):
            self.events.post(meta.subject(), "Warning", result.warning, result.message)
        return result

    async def _apply(
        self, meta: ClusterMeta, spec: RayClusterSpec, pods: Sequence[Obj], wants: bool
    ) -> Verdict | None:
        ns = meta.namespace
        try:
            pdbs = await pdb_ops.list_pdbs(self.api, ns)
        except KubeError as exc:
            if not wants:  # nothing could have been made where nothing can be listed
                return None
            if exc.status == FORBIDDEN:
                return budgets.forbidden_verdict(meta, str(exc), CHART_VALUE)
            return budgets.verdict(meta, wants, None, str(exc))
        plan = budgets.plan_budgets(meta, spec, wants, pdbs, pods)
        try:
            for name in plan.deletes:
                if await pdb_ops.delete_pdb(self.api, ns, name):
                    self._told(meta, "DeletedPodDisruptionBudget", f"Deleted poddisruptionbudget {ns}/{name}")
            for manifest in plan.creates:
                name = manifest["metadata"]["name"]
                if await pdb_ops.create_pdb(self.api, ns, manifest):
                    self._told(meta, "CreatedPodDisruptionBudget", f"Created poddisruptionbudget {ns}/{name}")
            for name, patch in plan.updates.items():
                if await pdb_ops.patch_pdb(self.api, ns, name, patch):
                    self._told(meta, "UpdatedPodDisruptionBudget", f"Updated poddisruptionbudget {ns}/{name}")
        except KubeError as exc:
            log.info("RayCluster %s/%s: budgets not applied: %s", ns, meta.name, exc)
            if exc.status == FORBIDDEN:
                return budgets.forbidden_verdict(meta, str(exc), CHART_VALUE)
            return budgets.verdict(meta, wants, plan, str(exc))
        return budgets.verdict(meta, wants, plan, None)

    def _told(self, meta: ClusterMeta, reason: str, message: str) -> None:
        self.events.post(meta.subject(), "Normal", reason, message)


def condition_value(result: Verdict | None) -> tuple[bool, str, str] | None:
    """The condition `status.put_condition` writes for a result (None: removed)."""
    return None if result is None else (result.status, result.reason, result.message)
