"""A Ray node drained by someone else (``ray drain-node``, a preemption notice) stays while it runs
work, takes no new work, and goes once idle or dead (as Ray keeps it until then)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from tests.support.builders import cluster, group, pod

from rayscale.autoscaler.lifecycle import Lives, ReplicaState, next_lives
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling import model as m
from rayscale.autoscaler.scheduling.model import Group, Node, NodeState, RemovalCause, Snapshot
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


def _scenario(
    *nodes: Node, min_replicas: int = 0, max_replicas: int = 4, constraint: bool = False
) -> Snapshot:
    small = Group("small", TOTAL, min_replicas=min_replicas, max_replicas=max_replicas)
    wanted = (m.Constraint({"CPU": 1.0}, count=2),) if constraint else ()
    return Snapshot(groups=(small,), nodes=nodes, constraints=wanted)


BUSY = Node("w", "small", NodeState.DRAINING, available={"CPU": 0.0})


def test_the_live_snapshot_reads_it_as_drained_while_working() -> None:
    node = snapshot(drained(used=True)).nodes[0]
    assert node.state is NodeState.DRAINING
    assert m.drained_while_working(node)
    assert not m.drained_while_working(snapshot(drained(used=False)).nodes[0])
    assert not m.drained_while_working(snapshot(drained(used=True), draining=frozenset({"w"})).nodes[0])


def test_it_does_not_keep_its_groups_minimum_a_replacement_starts() -> None:
    decision = schedule(_scenario(BUSY, min_replicas=1))
    assert decision.terminate == ()
    assert decision.groups["small"].launch == 1
    assert decision.groups["small"].replicas == 2  # its pod stays beside the new one


def test_its_pod_still_counts_towards_max_replicas_and_the_worker_cap() -> None:
    decision = schedule(_scenario(BUSY, min_replicas=1, max_replicas=1))
    assert (decision.groups["small"].launch, decision.groups["small"].replicas) == (0, 1)
    capped = dataclasses.replace(_scenario(BUSY, min_replicas=1), options=m.Options(max_workers=1))
    assert schedule(capped).groups["small"].launch == 0


def test_its_capacity_holds_no_request_resources_bundle() -> None:
    free = Node("w", "small", NodeState.DRAINING, available={"CPU": 1.0})  # work ended a moment ago
    decision = schedule(_scenario(free, constraint=True))
    assert decision.groups["small"].launch == 2
    assert decision.terminate == ()


def test_its_replica_is_shown_draining_without_a_removal_cause() -> None:
    snap = snapshot(drained(used=True))
    lives = next_lives(Lives(), snap, [pod("w")], None, {}, NOW)
    assert [(r.state, r.cause) for r in lives.current] == [(ReplicaState.DRAINING, None)]
