"""A Ray node drained by someone else (``ray drain-node``, a preemption notice) stays while it runs
work, takes no new work, and goes once idle or dead (as Ray keeps it until then)."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.support.builders import cluster, group, pod

from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import NodeState, RemovalCause, Snapshot
from rayscale.autoscaler.snapshot import build_snapshot
from rayscale.ray import model as ray

NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)
TOTAL = {"CPU": 1.0}


def snapshot(
    node: ray.RayNodeState, *, demand: bool = False, draining: frozenset[str] = frozenset()
) -> Snapshot:
    pending = (ray.ResourceDemand(ray.ResourceRequest({"CPU": 1.0}), 1),) if demand else ()
    state = ray.ClusterState(version=1, session_name="s", nodes=(node,), pending_requests=pending)
    body = cluster(group(replicas=1), autoscaling=True)
    return build_snapshot(body, [pod("w")], state, [], frozenset(), NOW, draining=draining)


def drained(
    *, used: bool, idle_ms: int = 0, status: ray.NodeStatus = ray.NodeStatus.DRAINING
) -> ray.RayNodeState:
    return ray.RayNodeState(
        node_id="id-w",
        status=status,
        instance_id="w",
        idle_duration_ms=idle_ms,
        available_resources={"CPU": 0.0} if used else TOTAL,
        total_resources=TOTAL,
    )


def test_a_busy_node_drained_by_others_stays_and_takes_no_new_work() -> None:
    snap = snapshot(drained(used=True), demand=True)
    decision = schedule(snap)
    assert decision.terminate == ()
    assert decision.groups["small"].launch == 1  # the task waiting needs a new node: w takes none
    assert decision.groups["small"].replicas == 2


def test_once_idle_it_goes_as_drained() -> None:
    for node in (drained(used=False), drained(used=True, idle_ms=3000)):
        snap = snapshot(node)
        assert snap.nodes[0].state is NodeState.DRAINING
        assert [(r.name, r.reason) for r in schedule(snap).terminate] == [("w", RemovalCause.DRAINED)]


def test_once_dead_it_goes_as_node_dead() -> None:
    snap = snapshot(drained(used=True, status=ray.NodeStatus.DEAD))
    assert [(r.name, r.reason) for r in schedule(snap).terminate] == [("w", RemovalCause.NODE_DEAD)]


def test_rayscales_own_accepted_drain_still_goes_at_once() -> None:
    snap = snapshot(drained(used=True), draining=frozenset({"w"}))
    assert [(r.name, r.reason) for r in schedule(snap).terminate] == [("w", RemovalCause.DRAINED)]
