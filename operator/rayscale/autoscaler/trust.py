"""When Ray's view of a cluster cannot be trusted to remove anything (pure).

Four moments. While a worker's raylet has restarted (its pod has two live Ray nodes: the new one
and the old one, whose death the GCS has not noticed yet, which takes its health checks up to
half a minute): the old node's actors and tasks are placed again only once Ray notices, so until
then an idle worker may be about to get them, and the round removes nothing (it still launches).
Right after the GCS answers again following an outage (it was frozen, restarted
with fault tolerance, or cut off) while the head runs the same session: for a few seconds
(`SETTLE_SECONDS`) it still reports what it knew before (actors pending that have been placed,
busy nodes with their resources free), so the round changes nothing at all until its view has
caught up. And two right after the head restarts:

- the GCS answers but the head's own raylet is not alive in it (no live node holds
  ``node:__internal_head__``): the head is starting, or its raylet is down. Like Ray's autoscaler,
  which skips scaling until the head node runs, the round then changes nothing at all;
- the GCS session name changed (a new head without GCS fault tolerance): the workers of the old
  session are unknown to the new GCS until their raylets re-register or die. For a grace period
  the round launches what demand needs but removes nothing, so no worker is taken for a failed
  launch or an idle one while Ray is still learning what runs.

While held, the scheduler sees a snapshot in which nothing is due to go (`held_snapshot`) and any
removal left (caps) is dropped (`without_removals`), so no group backs off either.

Without the GCS (state None) nothing is held here: the snapshot then counts running pods as busy.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rayscale.autoscaler.demand import head_node
from rayscale.autoscaler.drain import without
from rayscale.autoscaler.scheduling.model import Decision, GroupDecision, Node, NodeState, Snapshot
from rayscale.ray import model as ray

__all__ = [
    "DEFAULT_GRACE_SECONDS",
    "GATED_HEAD",
    "SETTLE_SECONDS",
    "Hold",
    "Session",
    "held_snapshot",
    "hold",
    "next_session",
    "restarted_raylets",
    "without_launches",
    "without_removals",
]

# After a GCS outage, the seconds its view takes to catch up (the raylets' reports, the actors and
# placement groups scheduled meanwhile). Measured: a launch on the first answer after a 15 s freeze
# was for demand that had been placed already.
SETTLE_SECONDS = 10.0

# Without GCS fault tolerance a worker's raylet gives up on the lost GCS after 60 s (Ray's
# gcs_rpc_server_reconnect_timeout_s) and exits; its container restarts and `ray start` registers
# with the new head. Twice that covers the restart and the registration on a busy node.
DEFAULT_GRACE_SECONDS = 120.0


@dataclass(frozen=True, slots=True)
class Session:
    """The GCS session rayscale last saw for a cluster, and when it replaced another."""

    name: str
    changed_at: float | None = None  # clock time; None: the first session seen (no change known)


def next_session(previous: Session | None, state: ray.ClusterState | None, now: float) -> Session | None:
    """The session after reading `state` at clock time `now` (unchanged when the GCS said nothing)."""
    if state is None or not state.session_name:
        return previous
    if previous is None:
        return Session(state.session_name)
    if previous.name != state.session_name:
        return Session(state.session_name, now)
    return previous


@dataclass(frozen=True, slots=True)
class Hold:
    """Why this round must not remove anything; `launches`: whether it may still launch."""

    reason: str
    launches: bool


#: The head pod is held by a scheduling gate (Kueue's elastic-job gate, until its Workload is
#: admitted): a scale-up now would change the Workload that gates it, and under Kueue a slice it
#: cannot admit keeps the head gated too. Nothing is launched until the gate is lifted.
GATED_HEAD = Hold("the head pod waits for a scheduling gate (a queue's admission)", launches=False)


def hold(
    state: ray.ClusterState | None,
    session: Session | None,
    now: float,
    grace: float,
    back_at: float | None = None,
) -> Hold | None:
    """The hold this round is under, or None when Ray's state can be acted on. `back_at`: when the
    GCS answered again after an outage (clock time), if it did."""
    if state is None:
        return None
    if head_node(state) is None:
        return Hold("the head's raylet is not running in Ray's GCS", launches=False)
    changed_at = session.changed_at if session is not None else None
    if back_at is not None and (changed_at is None or changed_at < back_at):  # the same session
        left = back_at + SETTLE_SECONDS - now
        if left > 0:
            return Hold(f"Ray's GCS answers again after an outage: {left:.0f}s for its view to settle",
                        launches=False)  # fmt: skip
    if restarted := restarted_raylets(state):
        return Hold(f"Ray has not noticed yet that the raylet of {', '.join(restarted)} restarted "
                    "(its old node's work is placed again once it does)", launches=True)  # fmt: skip
    if session is not None and session.changed_at is not None:
        left = session.changed_at + grace - now
        if left > 0:
            return Hold(f"Ray's GCS session changed (head restart): {left:.0f}s of grace left", launches=True)
    return None


def restarted_raylets(state: ray.ClusterState) -> list[str]:
    """Pods (instance ids) with more than one live Ray node: a raylet restarted, and the GCS still
    takes its old node for alive."""
    alive: dict[str, int] = {}
    for node in state.nodes:
        if node.alive and node.instance_id:
            alive[node.instance_id] = alive.get(node.instance_id, 0) + 1
    return sorted(name for name, count in alive.items() if count > 1)


def _held(node: Node) -> Node:
    if node.state in (NodeState.DRAINING, NodeState.DEAD):
        # Their removal waits: they count as running hosts that take no work.
        return dataclasses.replace(node, state=NodeState.RUNNING, available={}, idle_seconds=0.0)
    return dataclasses.replace(node, idle_seconds=0.0, pending_seconds=0.0)


def held_snapshot(snapshot: Snapshot) -> Snapshot:
    """`snapshot` with nothing due to go: no host idle, pending past a limit, draining or dead."""
    return dataclasses.replace(snapshot, nodes=tuple(_held(n) for n in snapshot.nodes))


def without_removals(decision: Decision) -> Decision:
    """`decision` with every removal dropped (their replicas counted back)."""
    return without(decision, {r.name for r in decision.terminate})


def without_launches(decision: Decision) -> Decision:
    """`decision` with every launch dropped (to be used on a decision without removals)."""
    groups = {
        name: GroupDecision(
            current=g.current, replicas=g.replicas - g.launch, launch=0, terminate=g.terminate
        )
        for name, g in decision.groups.items()
    }
    return dataclasses.replace(decision, groups=groups)
