"""Ray's demand read between full rounds: a periodic round of a cluster stops right after its GCS
read when Ray's state reads as it did at the last full round and that round is less than
``interval`` old.

Ray's GCS tells nobody when demand appears; Ray's own autoscaler reads it every 5 s. rayscale reads
it every ``gcs_poll_interval`` (1 s by default; with more clusters than ``gcs_poll_budget`` reads a
second allow, as seldom as the budget needs, never less often than a full round) and plans,
schedules and writes only when something a decision depends on changed: the pending tasks and
actors, the placement groups, the ``request_resources`` constraint, the session, or a node (joined,
gone, its status, its free resources). What only time changes (idle durations, boot and provision
clocks, backoffs, holds) waits for the full round every ``interval``; Kubernetes changes start a
full round at once as before. A cluster whose last full round found nothing time can change
(`settled`: every worker busy and running, or none; no demand; no backoff; no hold) waits for the
full round only as long as its status may go unwritten (``status_refresh_seconds``). A cluster whose
GCS did not answer is read again only at its next full round. A read that finds nothing new counts
in the decision history as a round that decided the same (the newest decision repeats).
"""

from __future__ import annotations

from collections.abc import Hashable

from rayscale.autoscaler.config import AutoscalerConfig
from rayscale.autoscaler.scheduling.model import NodeState, Snapshot
from rayscale.ray.model import ClusterState

__all__ = ["RAY_STATE", "delay", "due", "fingerprint", "settled"]

RAY_STATE = "Ray state"  # the trigger of a round a changed GCS read started


def fingerprint(state: ClusterState | None) -> Hashable:
    """What of `state` a decision depends on, beyond the clocks; None for no state."""
    if state is None:
        return None
    nodes = tuple(
        sorted(
            (n.node_id, n.instance_id, n.status.value, tuple(sorted(n.available_resources.items())))
            for n in state.nodes
        )
    )
    return (state.session_name, repr(state.pending_requests), repr(state.pending_gangs),
            repr(state.constraints), nodes)  # fmt: skip


def settled(snapshot: Snapshot, held: bool) -> bool:
    """Whether only a change (of Ray's state or of Kubernetes objects) can change the decision
    on `snapshot`: no hold, no group backing off or refused, no pending demand, and every worker running and
    busy (or none at all)."""
    if held or snapshot.demands or snapshot.gangs or any(g.backoff or g.refused for g in snapshot.groups):
        return False
    return all(n.state is NodeState.RUNNING and n.idle_seconds == 0 and not n.booting for n in snapshot.nodes)


def due(full_at: float | None, now: float, config: AutoscalerConfig, *, calm: bool = False) -> bool:
    """Whether the next round must be a full one: polling is off, no full round ran yet, or the
    last one is `interval` old (`status_refresh_seconds` when it found the cluster `settled`)."""
    if config.gcs_poll_interval <= 0 or full_at is None:
        return True
    return now - full_at >= (config.status_refresh_seconds if calm else config.interval)


def delay(state: ClusterState | None, config: AutoscalerConfig, clusters: int = 1) -> float:
    """Seconds to the cluster's next round: the poll interval while its GCS answers (longer when
    `clusters` reads at that interval would pass ``gcs_poll_budget`` reads a second), else the full
    interval."""
    if state is None or config.gcs_poll_interval <= 0:
        return config.interval
    every = config.gcs_poll_interval
    if config.gcs_poll_budget > 0:
        every = max(every, clusters / config.gcs_poll_budget)
    return min(every, config.interval)
