"""The life of each worker replica: states, since carried over, slices as one, failures, Events, summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import yaml
from tests.support.builders import pod
from tests.support.fakes import LoopClock

from rayscale.api.crd import crd_manifest
from rayscale.api.registry import RAYCLUSTER
from rayscale.autoscaler.lifecycle import (
    GONE_MAX,
    GONE_SECONDS,
    Lives,
    ReplicaLife,
    ReplicaState,
    next_lives,
    notices,
    replica_summary,
)
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import Group, Node, NodeState, RemovalCause, Snapshot
from rayscale.autoscaler.status import GcsHealth, autoscaler_patch, autoscaler_status
from rayscale.ray import model as ray

T0 = LoopClock.START  # 2026-01-01T01:00:00Z
CPU = Group("cpu", {"CPU": 4}, max_replicas=10)
TPU = Group("tpu", {"TPU": 4}, num_of_hosts=2, max_replicas=4)
R = ReplicaState


def snap(*nodes: Node) -> Snapshot:
    return Snapshot(groups=(CPU, TPU), nodes=nodes)


def gcs(*pods: str, status: ray.NodeStatus = ray.NodeStatus.RUNNING) -> ray.ClusterState:
    return ray.ClusterState(1, "s", tuple(ray.RayNodeState(f"id-{p}", status, instance_id=p) for p in pods))


def step(
    lives: Lives,
    now: datetime,
    *nodes: Node,
    pods: Sequence[Mapping[str, Any]] = (),
    state: ray.ClusterState | None = None,
    removed: Mapping[str, RemovalCause] | None = None,
    slow_after: float = 600.0,
) -> Lives:
    return next_lives(lives, snap(*nodes), pods, state, removed or {}, now, slow_after=slow_after)


def by_replica(lives: Lives) -> dict[str, ReplicaLife]:
    return {life.replica: life for life in lives.current}


def test_every_state_from_one_round() -> None:
    now = T0
    failed = pod("p-failed", "cpu", phase="Failed")
    failed["status"].update(reason="Evicted", message="The node was low on memory.")
    nodes = (
        Node("unborn:cpu:0", "cpu", NodeState.PENDING, pending_seconds=30),
        Node("p-sched", "cpu", NodeState.PENDING, pending_seconds=20),
        Node("p-boot", "cpu", NodeState.PENDING, booting=True, pending_seconds=10),
        Node("p-ready", "cpu"),
        Node("p-idle", "cpu", idle_seconds=40),
        Node("p-drain", "cpu", NodeState.DRAINING),
        Node("p-term", "cpu", NodeState.TERMINATING),
        Node("p-failed", "cpu", NodeState.TERMINATING),
        Node("p-dead", "cpu", NodeState.DEAD),
    )
    pods = [pod("p-term", "cpu", deleting="2026-01-01T00:59:00Z"), failed]
    lives = by_replica(step(Lives(), now, *nodes, pods=pods, state=gcs("p-ready", "p-idle")))
    assert {name: life.state for name, life in lives.items()} == {
        "unborn:cpu:0": R.REQUESTED,
        "p-sched": R.SCHEDULING,
        "p-boot": R.BOOTING,
        "p-ready": R.READY,
        "p-idle": R.IDLE,
        "p-drain": R.DRAINING,
        "p-term": R.DRAINING,
        "p-failed": R.FAILED,
        "p-dead": R.FAILED,
    }
    # since: from the replica's own clocks where it has them, else now
    assert lives["unborn:cpu:0"].since == now - timedelta(seconds=30)
    assert lives["p-sched"].since == now - timedelta(seconds=20)
    assert lives["p-boot"].since == now - timedelta(seconds=10)
    assert lives["p-idle"].since == lives["p-idle"].idle_since == now - timedelta(seconds=40)
    assert lives["p-ready"].since == now
    assert lives["p-ready"].idle_since is None
    assert lives["unborn:cpu:0"].pods == ()
    assert lives["p-ready"].pods == ("p-ready",)
    assert lives["p-ready"].ray_nodes == ("id-p-ready",)
    assert lives["p-boot"].ray_nodes == ()
    assert (lives["p-failed"].cause, lives["p-dead"].cause, lives["p-drain"].cause) == (
        "POD_FAILED",
        "NODE_DEAD",
        "DRAINED",
    )
    assert lives["p-failed"].message == "pod p-failed failed (Evicted: The node was low on memory.)"
    assert lives["p-term"].cause is None


def test_a_never_restarted_ray_container_that_exited_is_a_failed_pod() -> None:
    dead = pod("w", "cpu", terminated=True, restart_policy="Never")
    (life,) = step(Lives(), T0, Node("w", "cpu", NodeState.TERMINATING), pods=[dead]).current
    assert (life.state, life.cause) == (R.FAILED, "POD_FAILED")
    assert "restartPolicy is Never" in (life.message or "")


def test_since_is_carried_while_the_state_stays_and_moves_when_it_changes() -> None:
    clock = LoopClock()
    lives = step(Lives(), clock.now(), Node("w", "cpu", NodeState.PENDING, pending_seconds=3))
    assert by_replica(lives)["w"].since == clock.wall_at(-3)
    clock.advance(5)  # its clock says 8 s now: the carried since stays
    lives = step(lives, clock.now(), Node("w", "cpu", NodeState.PENDING, pending_seconds=8.4))
    assert by_replica(lives)["w"].since == clock.wall_at(-3)
    clock.advance(5)  # scheduled 2 s ago: booting since then
    lives = step(lives, clock.now(), Node("w", "cpu", NodeState.PENDING, booting=True, pending_seconds=2))
    assert (by_replica(lives)["w"].state, by_replica(lives)["w"].since) == (R.BOOTING, clock.wall_at(8))
    clock.advance(5)
    lives = step(lives, clock.now(), Node("w", "cpu"), state=gcs("w"))
    assert (by_replica(lives)["w"].state, by_replica(lives)["w"].since) == (R.READY, clock.wall_at(15))
    clock.advance(5)
    lives = step(lives, clock.now(), Node("w", "cpu", idle_seconds=3), state=gcs("w"))
    w = by_replica(lives)["w"]
    assert (w.state, w.since, w.idle_since) == (R.IDLE, clock.wall_at(17), clock.wall_at(17))
    clock.advance(5)  # Ray's idle time moved on (and a little jitter): idle_since stays
    lives = step(lives, clock.now(), Node("w", "cpu", idle_seconds=8.7), state=gcs("w"))
    assert by_replica(lives)["w"].idle_since == clock.wall_at(17)
    assert by_replica(lives)["w"].started == clock.wall_at(-3)  # when it began to start, all along


def test_a_multi_host_slice_is_one_replica_whose_hosts_combine() -> None:
    clock = LoopClock()

    def hosts(*states: Node) -> list[Node]:
        return [
            Node(f"t-{i}", "tpu", n.state, "r1", idle_seconds=n.idle_seconds, booting=n.booting)
            for i, n in enumerate(states)
        ]

    boot = Node("", "tpu", NodeState.PENDING, booting=True)
    lives = step(Lives(), clock.now(), *hosts(boot, Node("", "tpu")), state=gcs("t-1"))
    (slice_,) = lives.current
    assert (slice_.replica, slice_.pods, slice_.state) == ("r1", ("t-0", "t-1"), R.BOOTING)
    assert slice_.ray_nodes == ("id-t-1",)
    clock.advance(5)
    idle, busy = Node("", "tpu", idle_seconds=30), Node("", "tpu")
    lives = step(lives, clock.now(), *hosts(idle, busy), state=gcs("t-0", "t-1"))
    assert [life.state for life in lives.current] == [R.READY]  # idle only when every host is
    clock.advance(5)
    lives = step(lives, clock.now(), *hosts(idle, Node("", "tpu", idle_seconds=3)), state=gcs("t-0", "t-1"))
    (slice_,) = lives.current
    assert (slice_.state, slice_.idle_since) == (
        R.IDLE,
        clock.now() - timedelta(seconds=3),
    )  # the latest host
    clock.advance(5)
    lives = step(lives, clock.now(), *hosts(idle, Node("", "tpu", NodeState.DEAD)), state=gcs("t-0"))
    assert [(life.state, life.cause) for life in lives.current] == [(R.FAILED, "NODE_DEAD")]


def test_a_launch_failure_is_failed_then_kept_gone_for_a_while() -> None:
    clock = LoopClock()
    late = Node("w", "cpu", NodeState.PENDING, pending_seconds=901)
    lives = step(Lives(), clock.now(), late, removed={"w": RemovalCause.LAUNCH_FAILED})
    (w,) = lives.current
    assert (w.state, w.cause, w.since) == (R.FAILED, "LAUNCH_FAILED", clock.now())
    assert w.message == "pod not scheduled within 900s: removed, group cpu backs off"
    failed_at = clock.now()
    clock.advance(5)  # listed in workersToDelete: still failed, since kept
    lives = step(lives, clock.now(), Node("w", "cpu", NodeState.TERMINATING))
    assert [(life.state, life.since) for life in lives.current] == [(R.FAILED, failed_at)]
    clock.advance(5)  # gone
    lives = step(lives, clock.now())
    assert lives.current == ()
    assert [(life.replica, life.state, life.gone) for life in lives.gone] == [("w", R.FAILED, True)]
    clock.advance(GONE_SECONDS - 10)
    lives = step(lives, clock.now())
    assert len(lives.gone) == 1
    clock.advance(1)
    assert step(lives, clock.now()).gone == ()


def test_a_removed_replica_drains_then_is_kept_as_removed() -> None:
    clock = LoopClock()
    lives = step(
        Lives(),
        clock.now(),
        Node("w", "cpu", idle_seconds=90),
        state=gcs("w"),
        removed={"w": RemovalCause.IDLE},
    )
    assert [(life.state, life.cause) for life in lives.current] == [(R.DRAINING, "IDLE")]
    drained_at = clock.now()
    clock.advance(5)
    lives = step(lives, clock.now(), Node("w", "cpu", NodeState.TERMINATING))
    assert [(life.state, life.cause, life.since) for life in lives.current] == [
        (R.DRAINING, "IDLE", drained_at)
    ]
    clock.advance(5)
    lives = step(lives, clock.now())
    assert [(life.state, life.cause, life.since, life.gone) for life in lives.gone] == [
        (R.REMOVED, "IDLE", clock.now(), True)
    ]


def test_replicas_that_disappear_otherwise_are_dropped_and_gone_ones_are_bounded() -> None:
    clock = LoopClock()
    dead = [Node(f"w-{i:02}", "cpu", NodeState.DEAD) for i in range(GONE_MAX + 5)]
    lives = step(
        Lives(), clock.now(), *dead, Node("ok", "cpu"), Node("unborn:cpu:0", "cpu", NodeState.PENDING)
    )
    clock.advance(5)
    lives = step(lives, clock.now())
    assert lives.current == ()
    assert len(lives.gone) == GONE_MAX
    assert {life.state for life in lives.gone} == {R.FAILED}  # ready and requested ones are not kept


def test_an_unborn_name_used_again_is_a_new_replica_and_fails_anew() -> None:
    clock = LoopClock()
    unborn = Node("unborn:cpu:0", "cpu", NodeState.PENDING, pending_seconds=901)
    lives = step(Lives(), clock.now(), unborn, removed={"unborn:cpu:0": RemovalCause.LAUNCH_FAILED})
    first = notices(Lives(), lives, clock.now())
    assert [n.reason for n in first] == ["ReplicaFailed"]  # failed: not also slow
    assert "pod not created within 900s" in first[0].message
    clock.advance(5)  # minReplicas: the spec still asks for it
    again = step(lives, clock.now(), Node("unborn:cpu:0", "cpu", NodeState.PENDING, pending_seconds=1))
    assert [life.state for life in again.current] == [R.REQUESTED]
    assert [(life.state, life.gone) for life in again.gone] == [(R.FAILED, True)]
    assert notices(lives, again, clock.now()) == []
    clock.advance(5)
    failed_again = step(again, clock.now(), unborn, removed={"unborn:cpu:0": RemovalCause.LAUNCH_FAILED})
    assert [n.reason for n in notices(again, failed_again, clock.now())] == ["ReplicaFailed"]


def test_events_only_when_a_replica_fails_or_is_slow_to_start_and_once() -> None:
    clock = LoopClock()
    posted: list[str] = []
    lives = Lives()
    for i in range(6):  # w boots past the threshold; r runs and idles; x dies
        nodes = (
            Node("w", "cpu", NodeState.PENDING, booting=True, pending_seconds=100 * i),
            Node("r", "cpu", idle_seconds=float(i % 2)),
            Node("x", "cpu", NodeState.DEAD if i >= 2 else NodeState.RUNNING),
        )
        new = step(lives, clock.now(), *nodes, state=gcs("r", "x"), slow_after=250)
        posted += [f"{n.reason}: {n.message}" for n in notices(lives, new, clock.now())]
        lives = new
        clock.advance(100)
    assert posted == [
        "ReplicaFailed: group cpu: replica x failed (NODE_DEAD): the Ray node of pod x died",
        "ReplicaSlowToStart: group cpu: replica w has been starting for 300s"
        " (booting since 2026-01-01T01:00:00Z)",
    ]


def test_summary_is_bounded_and_stable_so_an_unchanged_cluster_writes_no_status() -> None:
    clock = LoopClock()
    nodes = [
        Node("a", "cpu"),
        Node("b", "cpu", idle_seconds=5),
        Node("c", "cpu", NodeState.PENDING, pending_seconds=50),
        Node("d", "cpu", NodeState.PENDING, booting=True, pending_seconds=20),
        *(Node(f"t-{h}", "tpu", replica="r1") for h in range(2)),
        *(Node(f"dead-{i}", "cpu", NodeState.DEAD) for i in range(5)),
    ]
    state = gcs("a", "b", "t-0", "t-1")
    lives = step(
        Lives(), clock.now(), *nodes, state=state, pods=[pod("c", "cpu", created="2026-01-01T00:59:00Z")]
    )
    summary = replica_summary(lives)
    assert summary["counts"] == {
        "cpu": {"scheduling": 1, "booting": 1, "ready": 1, "idle": 1, "failed": 5},
        "tpu": {"ready": 1},
    }
    # c was created a minute ago (before its scheduling clock's 50 s): it has been starting longest
    assert summary["oldestStarting"] == {
        "group": "cpu",
        "replica": "c",
        "state": "scheduling",
        "since": "2026-01-01T00:59:00Z",
    }
    assert len(summary["failed"]) == 3
    assert summary["failed"][0]["cause"] == "NODE_DEAD"

    group = (CPU, TPU)
    health = GcsHealth("x:6379", reachable=True, last_contact=clock.now())

    def status(lives: Lives, now: datetime) -> dict[str, Any]:
        snapshot = Snapshot(groups=group, nodes=tuple(nodes))
        return autoscaler_status(
            snapshot, schedule(snapshot), health, {}, now, replicas=replica_summary(lives)
        )

    written = status(lives, clock.now())
    for _ in range(3):  # rounds later, clocks moved on: nothing to write
        clock.advance(5)
        nodes[1] = Node("b", "cpu", idle_seconds=5 + (clock.now() - T0).total_seconds())
        nodes[2] = Node(
            "c", "cpu", NodeState.PENDING, pending_seconds=50 + (clock.now() - T0).total_seconds()
        )
        lives = step(lives, clock.now(), *nodes, state=state)
        assert autoscaler_patch(written, status(lives, clock.now()), clock.now()) is None
    nodes[0] = Node("a", "cpu", idle_seconds=1)  # a state changed: written
    lives = step(lives, clock.now(), *nodes, state=state)
    patch = autoscaler_patch(written, status(lives, clock.now()), clock.now())
    assert patch is not None
    counts = patch["status"]["autoscaler"]["replicas"]["counts"]["cpu"]
    assert counts == {"scheduling": 1, "booting": 1, "ready": None, "idle": 2, "failed": 5}


def _unknown_keys(value: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Paths in `value` the structural schema would prune (or that have another type)."""
    if isinstance(value, dict):
        props = schema.get("properties")
        out = []
        for key, sub in value.items():
            inner = props.get(key) if props is not None else schema.get("additionalProperties")
            if inner is None:
                out.append(f"{path}.{key}")
            else:
                out += _unknown_keys(sub, inner, f"{path}.{key}")
        return out
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _unknown_keys(v, schema["items"], f"{path}[{i}]")]
    kinds: dict[str, type | tuple[type, ...]] = {
        "string": str,
        "integer": int,
        "boolean": bool,
        "number": (int, float),
    }
    return [] if isinstance(value, kinds[schema["type"]]) else [f"{path}: {type(value).__name__}"]


def test_the_summary_is_what_the_crd_schema_keeps() -> None:
    """Anything the API server prunes would differ from what the next round computes: a write every round."""
    crd = yaml.safe_load(yaml.safe_dump(crd_manifest(RAYCLUSTER)))
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = v1["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["autoscaler"]
    failed = pod("p", "cpu", phase="Failed")
    nodes = (Node("p", "cpu", NodeState.TERMINATING), Node("q", "cpu", NodeState.PENDING, pending_seconds=9))
    summary = replica_summary(step(Lives(), T0, *nodes, pods=[failed]))
    assert set(summary) == {"counts", "oldestStarting", "failed"}
    assert _unknown_keys({"replicas": summary}, schema) == []


def test_without_the_gcs_a_running_replica_keeps_what_ray_last_said() -> None:
    clock = LoopClock()
    lives = step(
        Lives(), clock.now(), Node("w", "cpu", idle_seconds=30), Node("v", "cpu"), state=gcs("w", "v")
    )
    before = by_replica(lives)
    clock.advance(5)  # unreachable: the snapshot counts running pods as busy
    lives = step(lives, clock.now(), Node("w", "cpu"), Node("v", "cpu"), Node("u", "cpu"), state=None)
    after = by_replica(lives)
    assert {name: life.state for name, life in after.items()} == {"w": R.IDLE, "v": R.READY, "u": R.READY}
    assert (after["w"].since, after["w"].idle_since, after["w"].ray_nodes) == (
        before["w"].since,
        before["w"].idle_since,
        ("id-w",),
    )
