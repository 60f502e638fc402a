"""One host's state in its replica's life (pure): what `lifecycle` combines into the replica's.

A host's state follows from its snapshot node (see snapshot.py) and its pod: requested (no pod
yet), scheduling, booting, ready, idle, draining (its Ray node accepted a drain, or its pod is
going; with a removal cause unless it was drained by someone else while it works), or failed
(its pod failed, its Ray node died). The states of a replica's hosts combine in `ORDER`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from rayscale.autoscaler.scheduling.model import Node, NodeState, RemovalCause, drained_while_working
from rayscale.autoscaler.snapshot import is_unborn
from rayscale.common.pods import is_unhealthy, phase, pod_name
from rayscale.common.types import Obj

__all__ = [
    "ORDER",
    "RANK",
    "STARTING",
    "FailureCause",
    "HostState",
    "ReplicaState",
    "host_state",
    "in_listing_order",
    "listing_rank",
]


class ReplicaState(StrEnum):
    REQUESTED = "requested"
    SCHEDULING = "scheduling"
    BOOTING = "booting"
    READY = "ready"
    IDLE = "idle"
    DRAINING = "draining"
    FAILED = "failed"
    REMOVED = "removed"  # gone after draining (kept for a while, like failed ones)


STARTING = frozenset({ReplicaState.REQUESTED, ReplicaState.SCHEDULING, ReplicaState.BOOTING})
# Which host state wins when the hosts of one replica differ (first wins; idle only when all are).
ORDER = (
    ReplicaState.FAILED,
    ReplicaState.DRAINING,
    ReplicaState.REQUESTED,
    ReplicaState.SCHEDULING,
    ReplicaState.BOOTING,
    ReplicaState.READY,
    ReplicaState.IDLE,
)
RANK = {state: rank for rank, state in enumerate(ORDER)}
# The order replicas are listed and counted in (`rayscale status`, the status page): ReplicaState's.
_LISTING = {str(state): rank for rank, state in enumerate(ReplicaState)}


def listing_rank(state: str) -> int:
    """Where replicas in `state` are listed: in ReplicaState's order, a state not known after all."""
    return _LISTING.get(state, len(_LISTING))


def in_listing_order(states: Iterable[str]) -> list[str]:
    """`states` as they are listed: the known ones in ReplicaState's order, then any other by name."""
    return sorted(states, key=lambda state: (listing_rank(state), state))


class FailureCause(StrEnum):
    POD_FAILED = "POD_FAILED"  # a pod failed (or its Ray container exited with restartPolicy Never)
    LAUNCH_FAILED = "LAUNCH_FAILED"  # not provisioned or booted in time: removed, the group backs off
    NODE_DEAD = "NODE_DEAD"  # its Ray node died while the pod ran: removed, replaced


@dataclass(frozen=True, slots=True)
class HostState:
    node: Node
    state: ReplicaState
    cause: str | None = None
    message: str | None = None


def _pod_failure(pod: Obj | None) -> str | None:
    """What failed of a pod the snapshot counts as going, or None when it did not fail."""
    if pod is None:
        return None
    name, ended = pod_name(pod), phase(pod)
    if ended in ("Failed", "Succeeded"):
        status = pod.get("status") or {}
        detail = ": ".join(str(status[k]) for k in ("reason", "message") if status.get(k))
        return f"pod {name} {ended.lower()}" + (f" ({detail[:300]})" if detail else "")
    if is_unhealthy(pod):
        return f"pod {name}: its Ray container exited and restartPolicy is Never"
    return None


def host_state(node: Node, pod: Obj | None) -> HostState:
    if is_unborn(node.name):
        return HostState(node, ReplicaState.REQUESTED)
    if node.state is NodeState.TERMINATING:
        failed = _pod_failure(pod)
        if failed is not None:
            return HostState(node, ReplicaState.FAILED, FailureCause.POD_FAILED, failed)
        return HostState(node, ReplicaState.DRAINING)
    if node.state is NodeState.DRAINING:
        still = drained_while_working(node)  # drained by someone else: stays while it works
        return HostState(node, ReplicaState.DRAINING, None if still else RemovalCause.DRAINED)
    if node.state is NodeState.DEAD:
        died = f"the Ray node of pod {node.name} died"
        return HostState(node, ReplicaState.FAILED, FailureCause.NODE_DEAD, died)
    if node.state is NodeState.PENDING:
        return HostState(node, ReplicaState.BOOTING if node.booting else ReplicaState.SCHEDULING)
    return HostState(node, ReplicaState.IDLE if node.idle_seconds > 0 else ReplicaState.READY)
