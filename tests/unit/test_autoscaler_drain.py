"""Drain before delete: which hosts are asked and in what order, what a refusal leaves of the decision,
and how long an accepted drain is remembered."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.support.builders import cluster, group, pod
from tests.support.polling import turns

from rayscale.autoscaler.drain import DrainUnit, drain_plan, still_draining, without
from rayscale.autoscaler.draining import drain_units
from rayscale.autoscaler.scheduling.model import (
    Decision,
    Group,
    GroupDecision,
    Node,
    NodeState,
    Removal,
    RemovalCause,
    Snapshot,
)
from rayscale.autoscaler.spec_reader import read_spec
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
        version=1,
        session_name="s",
        nodes=tuple(ray.RayNodeState(f"id-{n}", s, instance_id=n) for n, s in nodes),
    )


def snapshot(*nodes: tuple[str, NodeState], hosts: int = 1) -> Snapshot:
    group = Group("a", {"CPU": 1.0}, num_of_hosts=hosts)
    replica = (lambda n: n.rsplit("-", 1)[0]) if hosts > 1 else (lambda n: None)
    return Snapshot(groups=(group,), nodes=tuple(Node(n, "a", s, replica=replica(n)) for n, s in nodes))


def test_idle_removals_of_running_hosts_drain_others_do_not() -> None:
    d = decision(
        Removal("idle", "a", RemovalCause.IDLE),
        Removal("nopod", "a", RemovalCause.IDLE),
        Removal("failed", "a", RemovalCause.LAUNCH_FAILED),
        Removal("over", "a", RemovalCause.MAX_REPLICAS),
        Removal("dead", "a", RemovalCause.NODE_DEAD),
        Removal("draining", "a", RemovalCause.DRAINED),
    )
    snap = snapshot(
        ("idle", NodeState.RUNNING),
        ("failed", NodeState.PENDING),
        ("over", NodeState.RUNNING),
        ("dead", NodeState.DEAD),
        ("draining", NodeState.DRAINING),
    )
    s = state(
        ("idle", ray.NodeStatus.IDLE),
        ("failed", ray.NodeStatus.IDLE),
        ("over", ray.NodeStatus.RUNNING),
        ("dead", ray.NodeStatus.DEAD),
        ("draining", ray.NodeStatus.DRAINING),
    )
    assert drain_plan(d, snap, s) == (DrainUnit("idle", (("idle", "id-idle"),)),)
    # without the GCS a running host cannot be named: it is planned, with no node id to ask
    assert drain_plan(d, snap, None) == (DrainUnit("idle", (("idle", None),)),)


def test_a_draining_replica_asks_only_its_hosts_that_still_run() -> None:
    hosts = [Removal(f"r1-{h}", "a", RemovalCause.DRAINED, replica="r1") for h in range(3)]
    snap = snapshot(
        ("r1-0", NodeState.DRAINING), ("r1-1", NodeState.RUNNING), ("r1-2", NodeState.RUNNING), hosts=3
    )
    s = state(
        ("r1-0", ray.NodeStatus.DRAINING), ("r1-1", ray.NodeStatus.IDLE), ("r1-2", ray.NodeStatus.RUNNING)
    )
    assert drain_plan(decision(*hosts), snap, s) == (
        DrainUnit("r1", (("r1-1", "id-r1-1"), ("r1-2", "id-r1-2"))),
    )


class Asked:
    """A fake DrainNode: records who was asked; `refuse` names the nodes that refuse."""

    def __init__(self, refuse: frozenset[str] = frozenset(), gate: asyncio.Event | None = None) -> None:
        self.calls: list[str] = []
        self.refuse = refuse
        self.gate = gate

    async def __call__(self, pod: str, node_id: str) -> bool:
        self.calls.append(pod)
        if self.gate is not None:
            await self.gate.wait()
        return node_id not in self.refuse


def unit(name: str, *pods: str) -> DrainUnit:
    return DrainUnit(name, tuple((p, f"id-{p}") for p in pods))


async def test_hosts_are_asked_in_order_and_the_first_refusal_stops_the_asking() -> None:
    ask = Asked(refuse=frozenset({"id-r-1"}))
    outcome = await drain_units([unit("r", "r-0", "r-1", "r-2")], ask)
    assert ask.calls == ["r-0", "r-1"]  # r-2 is never asked
    assert outcome.accepted == {"r-0"}  # remembered: the replica is now bound to go
    assert outcome.refused == {"r-0", "r-1", "r-2"}  # the whole replica stays this round


async def test_a_replica_goes_only_when_every_host_accepted() -> None:
    ask = Asked()
    outcome = await drain_units([unit("r", "r-0", "r-1")], ask)
    assert ask.calls == ["r-0", "r-1"]
    assert (outcome.accepted, outcome.refused) == (frozenset({"r-0", "r-1"}), frozenset())


async def test_units_drain_side_by_side_hosts_one_after_the_other() -> None:
    gate = asyncio.Event()
    ask = Asked(gate=gate)
    task = asyncio.ensure_future(drain_units([unit("r", "r-0", "r-1"), unit("s", "s-0")], ask))
    await turns(10)  # let both units start
    assert sorted(ask.calls) == ["r-0", "s-0"]  # r-1 waits for r-0's answer
    gate.set()
    outcome = await task
    assert ask.calls[-1] == "r-1"
    assert outcome.accepted == {"r-0", "r-1", "s-0"}


async def test_a_host_that_cannot_be_named_keeps_its_replica_and_nobody_is_asked() -> None:
    ask = Asked()
    outcome = await drain_units([DrainUnit("r", (("r-0", "id-r-0"), ("r-1", None)))], ask)
    assert ask.calls == []
    assert (outcome.accepted, outcome.refused) == (frozenset(), frozenset({"r-0", "r-1"}))


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


def test_accepted_drains_are_forgotten_once_listed_or_gone() -> None:
    body: dict[str, Any] = cluster(group("a", replicas=2, scaleStrategy={"workersToDelete": ["w-listed"]}))
    pods = [pod("w-waiting", "a"), pod("w-listed", "a")]
    listed = read_spec(body).workers_to_delete
    assert listed == {"w-listed"}
    assert still_draining({"w-waiting", "w-listed", "w-gone"}, listed, pods) == {"w-waiting"}
