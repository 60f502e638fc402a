"""One cluster's view as the autoscaler observes it (`observed`): groups, Ray nodes, a decision with
every kind of node, replica lives and the history, for the view's and the status page's tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rayscale.autoscaler.history import DecisionHistory, decision_record
from rayscale.autoscaler.lifecycle import Lives, next_lives
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import (
    Constraint,
    Demand,
    Gang,
    Group,
    Node,
    NodeState,
    RemovalCause,
    Snapshot,
    Strategy,
)
from rayscale.autoscaler.status import GcsHealth
from rayscale.autoscaler.view import Observed
from rayscale.ray import model as ray

T0 = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)
GCS = GcsHealth("demo-head-svc.ns.svc.cluster.local:6379", reachable=True, last_contact=T0)
GROUPS = (
    Group("cpu", {"CPU": 4, "memory": 8 * 2**30}, max_replicas=10),
    Group("gpu", {"CPU": 8, "GPU": 1}, max_replicas=1, backoff=True),
    Group("tpu", {"TPU": 4}, num_of_hosts=2),
)
HEAD = ray.RayNodeState(
    "aa01",
    ray.NodeStatus.RUNNING,
    instance_id="demo-head",
    total_resources={"CPU": 2.0, "node:__internal_head__": 1.0, "node:10.0.0.1": 1.0},
    available_resources={"CPU": 1.5, "node:__internal_head__": 1.0},
)


def ray_node(pod: str, status: ray.NodeStatus, available: float, idle_ms: int = 0) -> ray.RayNodeState:
    return ray.RayNodeState(
        f"id-{pod}",
        status,
        instance_id=pod,
        idle_duration_ms=idle_ms,
        total_resources={"CPU": 4.0, "memory": 8.0 * 2**30},
        available_resources={"CPU": available, "memory": 8.0 * 2**30},
    )


def observed(
    state: ray.ClusterState | None = None, hold: str | None = None
) -> tuple[Observed, DecisionHistory]:
    snapshot = Snapshot(
        groups=GROUPS,
        nodes=(
            Node("cpu-a", "cpu", available={"CPU": 1}),
            Node("cpu-b", "cpu", idle_seconds=30),
            Node("cpu-c", "cpu", NodeState.DEAD),
            Node("tpu-0", "tpu", NodeState.PENDING, replica="s1", booting=True, pending_seconds=40),
            Node("tpu-1", "tpu", NodeState.PENDING, replica="s1", pending_seconds=20),
            Node("unborn:cpu:0", "cpu", NodeState.PENDING, pending_seconds=5),
        ),
        demands=(Demand({"CPU": 1}, 3), Demand({"GPU": 1}, 2)),
        gangs=(Gang(Strategy.PACK, ({"CPU": 1}, {"CPU": 1})),),
        constraints=(Constraint({"CPU": 4}, 2, unit="ns/reserve"),),
    )
    decision = schedule(snapshot)
    removed = {r.name: r.reason for r in decision.terminate}
    assert removed == {"cpu-c": RemovalCause.NODE_DEAD}
    lives = next_lives(Lives(), snapshot, [], state, removed, T0)
    history = DecisionHistory()
    history.add(
        decision_record(snapshot, decision, T0 - timedelta(seconds=5), trigger="RayCluster", written=True)
    )
    history.add(decision_record(snapshot, decision, T0, held=hold))
    until = {"gpu": T0 + timedelta(minutes=5)}
    return Observed("ns", "demo", T0, snapshot, decision, state, GCS, hold, until, lives), history
