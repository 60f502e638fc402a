"""`StatusWriter`: each RayCluster's ``status.autoscaler`` written off the rounds, the newest only.

A round decides, patches ``replicas`` and hands the status it computed to the writer, which writes
it in a task of its own under the cluster's report flow (`rayscale.kube.flow.report_flow`): the API
client's rate limit serves those writes only while no ``replicas`` patch, pod create or other
working request waits. So a round never waits for its status write, and under load a cluster's
status is written at most once per wait: a status that changes again before its write went out is
replaced by the newer one (the one write carries both changes).

The write is a merge patch from what the API server holds, as the writer knows it (the status the
watch showed when the cluster's first write was handed over, then each write that landed), to the
newest status. Until the watch shows that write, or for `SETTLE_SECONDS` at most, `latest` gives
the newest status handed over (written or not) for the next round to compare with: a round never
writes again what is on its way. A failed write is logged and forgotten; the next round that finds
the status changed writes it from what the watch shows.

A cluster's status is written at most once every `pace` seconds (``STATUS_PACE_SECONDS``): a replica
moving from booting to ready to idle in a few seconds is one write, not three. The first write of a
cluster, and one after a quiet spell, go at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from rayscale.autoscaler.status import merge_patch
from rayscale.common.types import ClusterKey, Obj
from rayscale.kube import flow

__all__ = ["SETTLE_SECONDS", "StatusWriter"]

log = logging.getLogger(__name__)

#: Seconds after its last write that the writer's status of a cluster stands for what the watch
#: shows (the watch delivers a write within this, or the API server's own state is read again).
SETTLE_SECONDS = 30.0

Write = Callable[[ClusterKey, dict[str, Any]], Awaitable[None]]


@dataclasses.dataclass
class _Cluster:
    held: Obj | None  # what the API server holds, as far as the writer knows
    newest: Obj  # the newest status handed over
    task: asyncio.Task[None] | None = None
    landed_at: float | None = None  # when the newest landed (monotonic)


class StatusWriter:
    def __init__(
        self,
        write: Write,
        clock: Callable[[], float],
        *,
        pace: float = 0.0,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._write = write  # raises on failure
        self._clock = clock
        self._pace = pace
        self._sleep = sleep
        self._clusters: dict[ClusterKey, _Cluster] = {}
        self._written_at: dict[ClusterKey, float] = {}  # when each cluster's last write went

    def latest(self, key: ClusterKey, watched: Obj | None) -> Obj | None:
        """The status of `key` a round compares with: the newest handed over while it is on its way
        or the watch may not show it yet, else `watched` (what the watch shows)."""
        entry = self._clusters.get(key)
        if entry is None:
            return watched
        settled = entry.landed_at is not None and self._clock() - entry.landed_at >= SETTLE_SECONDS
        if entry.task is None and (watched == entry.newest or settled):
            del self._clusters[key]  # the watch caught up (or is the truth again)
            return watched
        return entry.newest

    def submit(self, key: ClusterKey, watched: Obj | None, status: Obj) -> None:
        """Write `status` as ``status.autoscaler`` of `key` soon; `watched` is what the watch shows."""
        entry = self._clusters.get(key)
        if entry is None:
            entry = self._clusters[key] = _Cluster(held=watched, newest=status)
        entry.newest, entry.landed_at = status, None
        if entry.task is None:
            entry.task = asyncio.create_task(self._run(key, entry), name=f"rayscale-status-{key[0]}/{key[1]}")

    def pending(self) -> int:
        """Clusters whose newest status has not landed yet."""
        return sum(1 for e in self._clusters.values() if e.task is not None)

    def forget(self, key: ClusterKey) -> None:
        """Drop what is kept about `key`; a write not yet sent is not sent."""
        self._written_at.pop(key, None)
        entry = self._clusters.pop(key, None)
        if entry is not None and entry.task is not None:
            entry.task.cancel()

    async def idle(self) -> None:
        """Return once every status handed over has been written (or failed)."""
        while tasks := [e.task for e in self._clusters.values() if e.task is not None]:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self) -> None:
        for key in list(self._clusters):
            self.forget(key)

    async def _run(self, key: ClusterKey, entry: _Cluster) -> None:
        try:
            while entry.held is not entry.newest:
                wait = self._written_at.get(key, -self._pace) + self._pace - self._clock()
                if wait > 0:
                    await self._sleep(wait)  # the pace: what changes meanwhile goes in this write
                status = entry.newest
                patch = {"status": {"autoscaler": merge_patch(entry.held or {}, status)}}
                with flow.working_for(flow.report_flow(key)):
                    await self._write(key, patch)
                self._written_at[key] = self._clock()
                entry.held = status
            entry.landed_at = self._clock()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # logged; the next round that finds a change writes again
            log.warning("status.autoscaler of %s/%s not written: %s", *key, exc)
            if self._clusters.get(key) is entry:
                del self._clusters[key]
        finally:
            entry.task = None
