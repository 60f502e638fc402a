"""Drain before delete: which removals drain, and what a refusal leaves of the decision."""

from __future__ import annotations

from rayscale.autoscaler.drain import drain_targets, without
from rayscale.autoscaler.scheduling.model import Decision, GroupDecision, Removal, RemovalCause
from rayscale.ray import model as ray


def decision(*removals: Removal, replicas: int = 1) -> Decision:
    gone = len({r.replica or r.name for r in removals})
    return Decision(
        groups={"a": GroupDecision(current=replicas + gone, replicas=replicas, launch=0, terminate=gone)},
        terminate=removals,
        unmet=(),
        placements=(),
    )


def state(*nodes: tuple[str, ray.NodeStatus]) -> ray.ClusterState:
    return ray.ClusterState(
        version=1, session_name="s", nodes=tuple(ray.NodeState(f"id-{n}", s, instance_id=n) for n, s in nodes)
    )


def test_only_idle_removals_of_live_nodes_drain() -> None:
    d = decision(
        Removal("idle", "a", RemovalCause.IDLE),
        Removal("dead", "a", RemovalCause.IDLE),
        Removal("nopod", "a", RemovalCause.IDLE),
        Removal("failed", "a", RemovalCause.LAUNCH_FAILED),
        Removal("over", "a", RemovalCause.MAX_REPLICAS),
    )
    s = state(
        ("idle", ray.NodeStatus.IDLE),
        ("dead", ray.NodeStatus.DEAD),
        ("failed", ray.NodeStatus.IDLE),
        ("over", ray.NodeStatus.RUNNING),
    )
    assert drain_targets(d, s) == {"idle": "id-idle"}
    assert drain_targets(d, None) == {}


def test_refused_node_stays_and_its_replica_is_counted_back() -> None:
    d = decision(Removal("w1", "a", RemovalCause.IDLE), Removal("w2", "a", RemovalCause.IDLE), replicas=0)
    kept = without(d, {"w2"})
    assert [r.name for r in kept.terminate] == ["w1"]
    assert kept.groups["a"] == GroupDecision(current=2, replicas=1, launch=0, terminate=1)
    assert without(d, set()) is d


def test_multi_host_replica_goes_whole_or_stays_whole() -> None:
    hosts = [Removal(f"r1-{h}", "a", RemovalCause.IDLE, replica="r1") for h in range(2)]
    other = [Removal(f"r2-{h}", "a", RemovalCause.IDLE, replica="r2") for h in range(2)]
    kept = without(decision(*hosts, *other, replicas=0), {"r1-1"})
    assert [r.name for r in kept.terminate] == ["r2-0", "r2-1"]
    assert kept.groups["a"] == GroupDecision(current=2, replicas=1, launch=0, terminate=1)
