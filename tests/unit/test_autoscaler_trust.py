"""When Ray's state may not remove anything: the head's raylet down, a fresh GCS session (virtual time)."""

from __future__ import annotations

import dataclasses

from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import (
    Demand,
    Group,
    GroupDecision,
    Node,
    NodeState,
    Options,
    Snapshot,
)
from rayscale.autoscaler.trust import (
    DEFAULT_GRACE_SECONDS,
    SETTLE_SECONDS,
    Session,
    held_snapshot,
    hold,
    next_session,
    without_launches,
    without_removals,
)
from rayscale.ray import model as ray

HEAD = ray.RayNodeState(
    "id-head", ray.NodeStatus.RUNNING, total_resources={"CPU": 0.0, "node:__internal_head__": 1.0}
)


def state(session: str = "s1", *nodes: ray.RayNodeState) -> ray.ClusterState:
    return ray.ClusterState(version=1, session_name=session, nodes=nodes)


def test_sessions_change_only_when_the_gcs_names_another() -> None:
    first = next_session(None, state("s1", HEAD), 10.0)
    assert first == Session("s1")  # the first one seen is no change
    assert next_session(first, state("s1", HEAD), 20.0) is first
    assert next_session(first, None, 20.0) is first  # unreachable: nothing known
    assert next_session(first, state(""), 20.0) is first  # a GCS that does not say
    assert next_session(first, state("s2", HEAD), 30.0) == Session("s2", 30.0)


def test_held_while_the_head_raylet_is_not_running() -> None:
    dead_head = ray.RayNodeState("id-old", ray.NodeStatus.DEAD, total_resources=HEAD.total_resources)
    for nodes in ((), (dead_head,)):
        held = hold(state("s1", *nodes), Session("s1"), 0.0, DEFAULT_GRACE_SECONDS)
        assert held is not None, nodes
        assert not held.launches
    assert hold(state("s1", HEAD), Session("s1"), 0.0, DEFAULT_GRACE_SECONDS) is None
    assert hold(None, Session("s1"), 0.0, DEFAULT_GRACE_SECONDS) is None  # the snapshot handles that


def test_held_for_a_grace_period_after_a_session_change() -> None:
    changed = Session("s2", changed_at=1000.0)
    during = hold(state("s2", HEAD), changed, 1000.0 + 119, 120.0)
    assert during is not None
    assert during.launches
    assert "1s of grace left" in during.reason
    assert hold(state("s2", HEAD), changed, 1000.0 + 120, 120.0) is None
    assert DEFAULT_GRACE_SECONDS == 120.0


def test_a_held_snapshot_removes_nothing_but_still_launches() -> None:
    group = Group("a", {"CPU": 1.0}, max_replicas=1)  # two hosts above max as well
    snap = Snapshot(
        groups=(group, Group("b", {"GPU": 1.0})),
        nodes=(
            Node("idle", "a", NodeState.RUNNING, idle_seconds=10_000),
            Node("late", "a", NodeState.PENDING, pending_seconds=10_000),
            Node("late-boot", "a", NodeState.PENDING, pending_seconds=10_000, booting=True),
            Node("dead", "a", NodeState.DEAD),
            Node("drained", "a", NodeState.DRAINING),
        ),
        demands=(Demand({"GPU": 1.0}),),
        options=Options(idle_timeout_seconds=60),
    )
    assert {r.reason for r in schedule(snap).terminate} >= {"IDLE", "LAUNCH_FAILED", "NODE_DEAD", "DRAINED"}
    decision = without_removals(schedule(held_snapshot(snap)))
    assert decision.terminate == ()
    assert decision.groups["a"] == GroupDecision(current=5, replicas=5, launch=0, terminate=0)
    assert decision.groups["b"].launch == 1
    frozen = without_launches(decision)
    assert frozen.groups["b"] == GroupDecision(current=0, replicas=0, launch=0, terminate=0)


def test_held_while_the_gcs_view_settles_after_an_outage() -> None:
    back = 1000.0
    during = hold(state("s1", HEAD), Session("s1"), back + SETTLE_SECONDS - 1, DEFAULT_GRACE_SECONDS, back)
    assert during is not None
    assert not during.launches  # a launch for demand already placed is a pod created twice
    assert "1s for its view to settle" in during.reason
    assert hold(state("s1", HEAD), Session("s1"), back + SETTLE_SECONDS, DEFAULT_GRACE_SECONDS, back) is None
    # The head restarted during the outage: a new session, whose view is new (the grace applies)
    changed = Session("s2", changed_at=back + 0.001)
    grace = hold(state("s2", HEAD), changed, back + 1, DEFAULT_GRACE_SECONDS, back)
    assert grace is not None
    assert grace.launches


def test_nothing_removed_while_ray_has_not_noticed_a_restarted_raylet() -> None:
    old = ray.RayNodeState("id-old", ray.NodeStatus.IDLE, instance_id="w", idle_duration_ms=3_600_000)
    new = ray.RayNodeState("id-new", ray.NodeStatus.IDLE, instance_id="w", idle_duration_ms=1000)
    other = ray.RayNodeState("id-x", ray.NodeStatus.IDLE, instance_id="x", idle_duration_ms=3_600_000)
    held = hold(state("s1", HEAD, old, new, other), Session("s1"), 0.0, DEFAULT_GRACE_SECONDS)
    assert held is not None
    assert held.launches  # the old node's actors need somewhere to go
    assert "raylet of w restarted" in held.reason
    gone = dataclasses.replace(old, status=ray.NodeStatus.DEAD)  # the GCS noticed: act again
    assert hold(state("s1", HEAD, gone, new, other), Session("s1"), 0.0, DEFAULT_GRACE_SECONDS) is None
