"""The quota refusals of each autoscaled cluster's groups, kept until they end. I/O.

`record` keeps a ResourceQuota's refusal of a group's pod create (the controller tells it, see
``rayscale.controller.apply.CreateListener``). `QuotaChecks.current`, once per round, ends the
refusals whose quota has room again for what was asked (reading that ResourceQuota at most every
`CHECK_SECONDS`), whose quota is gone, whose group is gone, or that are `RETRY_SECONDS` old, and
answers every group refused now, the scale gates of the spec included (refusals.py). While a worker
pod of the cluster is held by a scheduling gate, it reads the cluster's Kueue Workloads (at most
every `CHECK_SECONDS`): a slice Kueue cannot admit refuses the groups it names, kept as a quota's
refusal is.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from rayscale.autoscaler.memory import ClusterMemory, Shared
from rayscale.autoscaler.refusals import (
    RETRY_SECONDS,
    QuotaRefusal,
    Refused,
    has_room,
    is_quota_refusal,
    kueue_refusals,
    parse_refusal,
    refused_groups,
)
from rayscale.autoscaler.spec_reader import ScalingSpec
from rayscale.common.pods import is_scheduling_gated, is_worker
from rayscale.common.types import ClusterKey, Obj
from rayscale.kube import ops

__all__ = ["CHECK_SECONDS", "QuotaChecks", "record"]

log = logging.getLogger(__name__)
CHECK_SECONDS = 5.0  # a refusing ResourceQuota is read at most this often per group
KUEUE = ""  # quota_checked's key of the cluster's Kueue Workloads (no group is named "")


def record(memory: ClusterMemory, group: str, status: int, message: str, now: datetime) -> bool:
    """Keep a refused pod create of `group` if a ResourceQuota refused it; whether it did. A group
    already refused keeps the time of its first refusal."""
    if not is_quota_refusal(status, message):
        return False
    old = memory.quota_refusals.get(group)
    memory.quota_refusals[group] = parse_refusal(group, message, old.since if old else now)
    return True


class QuotaChecks:
    """Ends the refusals that ended; answers the groups refused now."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    async def current(self, key: ClusterKey, scaling: ScalingSpec, pods: Sequence[Obj]) -> dict[str, Refused]:
        memory = self.shared.memories.of(key)
        names = {g.group_name for g in scaling.spec.workers}
        now, tick = self.shared.wall_clock(), self.shared.clock()
        if any(is_worker(p) and is_scheduling_gated(p) for p in pods):
            await self._kueue(key, scaling, memory, names)
        for group, refusal in list(memory.quota_refusals.items()):
            ended = None
            if group not in names:
                ended = "the group is gone"
            elif (now - refusal.since).total_seconds() >= RETRY_SECONDS:
                ended = f"{RETRY_SECONDS:.0f} s passed: trying the group again"
            elif refusal.quota is not None and tick - memory.quota_checked.get(group, -1e9) >= CHECK_SECONDS:
                memory.quota_checked[group] = tick
                try:
                    quota = await ops.get_resource_quota(self.shared.api, key[0], refusal.quota)
                except ops.KubeError as exc:
                    log.debug("reading ResourceQuota %s/%s: %s", key[0], refusal.quota, exc)
                    continue
                if quota is None:
                    ended = f"ResourceQuota {refusal.quota} is gone"
                elif has_room(refusal, quota):
                    ended = f"ResourceQuota {refusal.quota} has room again"
            if ended is not None:
                log.info("RayCluster %s/%s: group %s may grow again: %s", *key, group, ended)
                del memory.quota_refusals[group]
                memory.quota_checked.pop(group, None)
        memory.blocked = refused_groups(scaling.spec, memory.quota_refusals)
        return memory.blocked

    async def _kueue(
        self, key: ClusterKey, scaling: ScalingSpec, memory: ClusterMemory, names: set[str]
    ) -> None:
        """Keep the refusals of the cluster's Kueue slice that cannot be admitted (its pod sets
        that are worker groups), read at most every `CHECK_SECONDS`."""
        tick = self.shared.clock()
        if tick - memory.quota_checked.get(KUEUE, -1e9) < CHECK_SECONDS or not scaling.meta.uid:
            return
        memory.quota_checked[KUEUE] = tick
        try:
            workloads = await ops.list_kueue_workloads(self.shared.api, key[0], scaling.meta.uid)
        except ops.KubeError as exc:
            log.debug("reading the Kueue Workloads of %s/%s: %s", *key, exc)
            return
        now = self.shared.wall_clock()
        for group, message in kueue_refusals(workloads).items():
            if group in names and group not in memory.quota_refusals:
                memory.quota_refusals[group] = QuotaRefusal(group, message, None, {}, now, source="Kueue")
