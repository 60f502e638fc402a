"""Disruption notices in the autoscaling round: the glue's pure parts (disruptions.py, the snapshot's
leaving pods), then whole rounds with the API and the GCS faked: a cordon drains a busy worker for
preemption and deletes it once idle, a spot notice deletes at its deadline, the head is only
reported, and without the GCS only a deadline deletes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
from tests.support.builders import group, pod, rc
from tests.support.fakes import KEY, FakeGcs, LoopClock, SettledAutoscaler, gcs_state
from tests.support.fakes import EventLog as Events
from tests.support.fakes import FakeApi as Api
from tests.support.fakes import FakeSource as Source

from rayscale.autoscaler import gcs_link
from rayscale.autoscaler.config import AutoscalerConfig
from rayscale.autoscaler.disruptions import (
    CONDITION,
    disruption_condition,
    events_to_post,
    plan_round,
    ray_nodes,
    remember_asked,
)
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import Group, NodeState, drained_while_working
from rayscale.autoscaler.snapshot import build_snapshot
from rayscale.common.pods import pod_name
from rayscale.disruption.notice import Notice
from rayscale.disruption.plan import EVENT_DELETE, EVENT_DRAIN, EVENT_HEAD, AskedDrain, DisruptionPlan, Drain
from rayscale.ray import model as ray

CLOCK_START = LoopClock.START
CORDON = Notice("cordon", "Node n1 is cordoned (spec.unschedulable).", None, hard=False)
GROUPS = (Group("small", {"CPU": 1.0}),)


def on(node: str, body: dict[str, Any]) -> dict[str, Any]:
    body["spec"]["nodeName"] = node
    return body


def spot(seconds: float) -> Notice:
    return Notice(
        "spot", "Node n1 has an EC2 Spot interruption notice.", CLOCK_START + timedelta(seconds=seconds), True
    )


def node(name: str, status: ray.NodeStatus, *, idle_ms: int = 0, used: float = 0.0) -> ray.RayNodeState:
    return ray.RayNodeState(
        f"id-{name}",
        status,
        instance_id=name,
        idle_duration_ms=idle_ms,
        total_resources={"CPU": 1.0},
        available_resources={"CPU": 1.0 - used},
    )


# ---------------------------------------------------------------------------- the pure glue


def test_rays_view_of_each_worker_pod() -> None:
    pods = [pod("busy"), pod("idle"), pod("drn-busy"), pod("drn-idle"), pod("dead"), pod("none")]
    state = gcs_state(
        node("busy", ray.NodeStatus.RUNNING, used=1.0),
        node("idle", ray.NodeStatus.IDLE, idle_ms=5000),
        node("drn-busy", ray.NodeStatus.DRAINING, used=1.0),
        node("drn-idle", ray.NodeStatus.DRAINING, idle_ms=10),
        node("dead", ray.NodeStatus.DEAD),
    )
    seen = ray_nodes(pods, state)
    assert {name: (n.node_id, n.idle, n.draining) for name, n in seen.items()} == {
        "busy": ("id-busy", False, False),
        "idle": ("id-idle", True, False),
        "drn-busy": ("id-drn-busy", False, True),
        "drn-idle": ("id-drn-idle", True, True),
    }


def test_a_round_plans_from_the_nodes_and_pods_notices() -> None:
    pods = [on("n1", pod("w1")), on("n2", pod("w2")), on("n3", pod("w3"))]
    pods[2]["status"]["conditions"].append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "EvictionByEvictionAPI",
            "lastTransitionTime": "2026-01-01T01:00:00Z",
        }
    )
    state = gcs_state(*(node(pod_name(p), ray.NodeStatus.RUNNING, used=1.0) for p in pods))
    result = plan_round(GROUPS, pods, state, {"n1": CORDON, "other": spot(0)}, {}, CLOCK_START)
    assert [(d.pod, d.node_id, d.reason) for d in result.drains] == [
        ("w1", "id-w1", "PREEMPTION"),
        ("w3", "id-w3", "PREEMPTION"),
    ]
    assert [(w.pod, w.source) for w in result.waiting] == [
        ("w1", "cordon"),
        ("w3", "pod:EvictionByEvictionAPI"),
    ]
    assert plan_round(GROUPS, pods[1:2], state, {"n1": CORDON}, {}, CLOCK_START) == DisruptionPlan()


def test_without_rays_state_a_round_asks_nothing() -> None:
    pods = [on("n1", pod("w1"))]
    result = plan_round(GROUPS, pods, None, {"n1": spot(30)}, {}, CLOCK_START)
    assert (result.drains, result.deletes, [w.pod for w in result.waiting]) == ((), (), ["w1"])
    late = plan_round(GROUPS, pods, None, {"n1": spot(30)}, {}, CLOCK_START + timedelta(seconds=30))
    assert [d.pod for d in late.deletes] == ["w1"]


def test_accepted_drains_are_remembered_while_their_pods_exist() -> None:
    before = {"gone": AskedDrain(CLOCK_START, None), "kept": AskedDrain(CLOCK_START, None)}
    drains = [Drain("w1", "a1", "PREEMPTION", "m", None), Drain("w2", "a2", "PREEMPTION", "m", None)]
    now = CLOCK_START + timedelta(seconds=5)
    out = remember_asked(before, drains, {"w1"}, [pod("kept"), pod("w1"), pod("w2")], now)
    assert out == {"kept": AskedDrain(CLOCK_START, None), "w1": AskedDrain(now, None, "a1")}  # its Ray node


def test_only_what_the_round_did_is_posted() -> None:
    pods = [on("h", pod("head", "headgroup")), on("n1", pod("w1")), on("n2", pod("w2"))]
    state = gcs_state(node("w1", ray.NodeStatus.RUNNING, used=1.0))  # w2 has no Ray node: deleted at once
    result = plan_round(GROUPS, pods, state, {"h": CORDON, "n1": CORDON, "n2": CORDON}, {}, CLOCK_START)
    assert [e.reason for e in result.events] == [EVENT_HEAD, EVENT_DRAIN, EVENT_DELETE]
    assert events_to_post(result, (), (), head_posted=True) == []
    assert [e.reason for e in events_to_post(result, {"w1"}, (), head_posted=False)] == [
        EVENT_HEAD,
        EVENT_DRAIN,
    ]
    assert [e.reason for e in events_to_post(result, (), {"w2"}, head_posted=True)] == [EVENT_DELETE]


def test_the_condition_says_what_is_still_draining_and_keeps_its_time() -> None:
    pods = [on("n1", pod("w1"))]
    state = gcs_state(node("w1", ray.NodeStatus.RUNNING, used=1.0))
    result = plan_round(GROUPS, pods, state, {"n1": spot(120)}, {}, CLOCK_START)
    first = disruption_condition(result, CLOCK_START, None)
    assert first is not None
    assert (first["type"], first["status"], first["reason"]) == (CONDITION, "True", "Draining")
    assert "w1 (spot, deadline 2026-01-01T01:02:00Z)" in first["message"]
    later = disruption_condition(result, CLOCK_START + timedelta(seconds=9), {"conditions": [first]})
    assert later == first
    assert disruption_condition(DisruptionPlan(), CLOCK_START, {"conditions": [first]}) is None


def test_a_leaving_pod_is_held_and_replaced_within_max_replicas() -> None:
    body = rc(group("small", replicas=1, min_replicas=1, max_replicas=2))
    state = gcs_state(node("w1", ray.NodeStatus.RUNNING, used=1.0))
    snap = build_snapshot(body, [pod("w1")], state, [], frozenset(), CLOCK_START, leaving={"w1"})
    (held,) = snap.nodes
    assert held.state is NodeState.DRAINING
    assert drained_while_working(held)
    decision = schedule(snap)
    assert decision.terminate == ()  # it stays while it works
    assert decision.groups["small"].replicas == 2  # its replacement for minReplicas starts at once

    at_max = rc(group("small", replicas=1, min_replicas=1, max_replicas=1))
    snap = build_snapshot(at_max, [pod("w1")], state, [], frozenset(), CLOCK_START, leaving={"w1"})
    assert schedule(snap).groups["small"].replicas == 1  # no replacement past maxReplicas


# ---------------------------------------------------------------------------- whole rounds


class Gcs(FakeGcs):
    """FakeGcs that keeps each drain's reason, message and deadline."""

    asked: list[tuple[str, str, str, int]] = []

    async def drain_node(self, node_id: str, **kw: Any) -> ray.DrainResult:
        Gcs.asked.append(
            (node_id, str(kw.get("reason")), str(kw.get("message")), int(kw.get("deadline_ms", 0)))
        )
        return await super().drain_node(node_id, **kw)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Api:
    fake = Api(monkeypatch)
    Gcs.asked = []
    monkeypatch.setattr(gcs_link, "connect", Gcs)
    return fake


def scaler(
    source: Source, events: Events, clock: LoopClock, notices: Mapping[str, Notice]
) -> SettledAutoscaler:
    config = AutoscalerConfig(interval=5, gcs_poll_interval=0, status_pace_seconds=0)
    return SettledAutoscaler(
        None,  # type: ignore[arg-type]
        source,
        events,
        config,
        clock=clock.mono,
        wall_clock=clock.now,
        node_notices=notices,
    )


def condition(api: Api) -> dict[str, Any] | None:
    conditions = api.cluster_statuses[-1]["autoscaler"].get("conditions") or []
    return next((c for c in conditions if c and c.get("type") == CONDITION), None)


async def test_a_cordon_drains_a_busy_worker_for_preemption_and_deletes_it_once_idle(api: Api) -> None:
    events, clock = Events(), LoopClock()
    source = Source(rc(group("small", replicas=1)), [on("n1", pod("w1"))])
    FakeGcs.state = gcs_state(node("w1", ray.NodeStatus.RUNNING, used=1.0))
    auto = scaler(source, events, clock, {"n1": CORDON})
    await auto.step(KEY)
    assert Gcs.asked == [("id-w1", "PREEMPTION", CORDON.message, 0)]
    assert api.patches == []  # busy: it stays
    assert [(e.type, e.reason) for e in events.events] == [("Normal", EVENT_DRAIN)]
    found = condition(api)
    assert found is not None
    assert found["reason"] == "Draining"
    assert "w1 (cordon, no deadline)" in found["message"]

    clock.advance(5)
    FakeGcs.state = gcs_state(node("w1", ray.NodeStatus.DRAINING, used=1.0))
    await auto.step(KEY)
    assert len(Gcs.asked) == 1  # asked once
    assert api.patches == []

    clock.advance(5)
    FakeGcs.state = gcs_state(node("w1", ray.NodeStatus.DRAINING, idle_ms=100))
    await auto.step(KEY)
    (patch,) = api.patches
    assert patch[1:] == [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 0},
        {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": ["w1"]}},
    ]
    deleted = [e for e in events.events if e.reason == EVENT_DELETE]
    assert len(deleted) == 1
    assert "its Ray node is idle after draining" in deleted[0].message


async def test_a_spot_notice_deletes_a_busy_worker_at_its_deadline(api: Api) -> None:
    events, clock = Events(), LoopClock()
    source = Source(rc(group("small", replicas=1)), [on("n1", pod("w1"))])
    FakeGcs.state = gcs_state(node("w1", ray.NodeStatus.RUNNING, used=1.0))
    auto = scaler(source, events, clock, {"n1": spot(30)})
    await auto.step(KEY)
    ((_, reason, _, deadline_ms),) = Gcs.asked
    assert (reason, deadline_ms) == (
        "PREEMPTION",
        int((CLOCK_START + timedelta(seconds=30)).timestamp() * 1000),
    )
    assert api.patches == []

    clock.advance(30)
    await auto.step(KEY)  # still busy, but the deadline passed
    (patch,) = api.patches
    assert {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
            "value": {"workersToDelete": ["w1"]}} in patch  # fmt: skip
    (deleted,) = [e for e in events.events if e.reason == EVENT_DELETE]
    assert "the notice's deadline passed" in deleted.message


async def test_the_head_is_never_drained_and_warned_once(api: Api) -> None:
    events, clock = Events(), LoopClock()
    source = Source(rc(group("small", replicas=0)), [on("n1", pod("rc-head", "headgroup"))])
    FakeGcs.state = gcs_state()
    auto = scaler(source, events, clock, {"n1": spot(30)})
    for _ in range(3):
        await auto.step(KEY)
        clock.advance(60)
    assert Gcs.asked == []
    assert api.patches == []
    (warning,) = [e for e in events.events if e.reason == EVENT_HEAD]
    assert warning.type == "Warning"
    assert "rc-head" in warning.message


async def test_without_the_gcs_nothing_is_drained_and_only_the_deadline_deletes(api: Api) -> None:
    events, clock = Events(), LoopClock()
    source = Source(rc(group("small", replicas=1)), [on("n1", pod("w1"))])
    FakeGcs.state = None
    auto = scaler(source, events, clock, {"n1": spot(30)})
    await auto.step(KEY)
    assert (Gcs.asked, api.patches) == ([], [])
    clock.advance(30)
    await auto.step(KEY)
    (patch,) = api.patches
    assert patch[-1]["value"] == {"workersToDelete": ["w1"]}


def test_a_node_notice_change_marks_the_clusters_with_pods_on_it() -> None:
    source = Source(rc(group("small", replicas=1)), [on("n1", pod("w1"))])
    auto = scaler(source, Events(), LoopClock(), {})
    auto._memory.of(KEY)  # a cluster the autoscaler knows
    marked: list[tuple[str, ...]] = []
    auto.queue = type("Q", (), {"mark": lambda self, key: marked.append(key)})()
    auto.node_changed("n2")
    assert marked == []
    auto.node_changed("n1")
    assert marked == [KEY]


async def test_a_multi_host_replica_with_one_host_cordoned_drains_whole_gets_a_new_slice_and_goes_whole(
    api: Api,
) -> None:
    events, clock = Events(), LoopClock()
    hosts = [
        on("n1", pod("tpu-a-0", "tpu", replica="tpu-a", host=0)),
        on("n2", pod("tpu-a-1", "tpu", replica="tpu-a", host=1)),
    ]
    source = Source(rc(group("tpu", replicas=1, min_replicas=1, max_replicas=2, hosts=2)), hosts)
    FakeGcs.state = gcs_state(*(node(pod_name(h), ray.NodeStatus.RUNNING, used=1.0) for h in hosts))
    auto = scaler(source, events, clock, {"n1": CORDON})
    await auto.step(KEY)
    assert sorted(node_id for node_id, *_ in Gcs.asked) == ["id-tpu-a-0", "id-tpu-a-1"]  # the whole replica
    assert api.replicas() == [2]  # a new slice at once: the leaving one no longer counts towards the minimum
    assert all("workersToDelete" not in json.dumps(op) for op in api.patches[0])

    clock.advance(5)
    FakeGcs.state = gcs_state(
        node("tpu-a-0", ray.NodeStatus.DRAINING, idle_ms=100),
        node("tpu-a-1", ray.NodeStatus.DRAINING, used=1.0),
    )
    assert source.body is not None
    source.body["spec"]["workerGroupSpecs"][0]["replicas"] = 2  # the patch, as the watch shows it
    await auto.step(KEY)
    assert len(api.patches) == 1  # one host still works: the replica stays whole

    clock.advance(5)
    FakeGcs.state = gcs_state(*(node(pod_name(h), ray.NodeStatus.DRAINING, idle_ms=100) for h in hosts))
    await auto.step(KEY)
    last = api.patches[-1]
    assert {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1} in last
    assert {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
            "value": {"workersToDelete": ["tpu-a-0", "tpu-a-1"]}} in last  # fmt: skip
