"""A worker group removed from the spec, or a lowered maxReplicas, in whole autoscaling rounds with the
API and the GCS faked: a removed group's busy worker is drained for preemption and deleted by the
autoscaler itself once idle (no workersToDelete can name it), at the annotation's deadline, or at
once with "0"; a refused annotation value warns once and reads as unset; above a lowered
maxReplicas the idle surplus goes as before and the busy surplus drains, held and not replaced."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import group, pod, rc
from tests.support.fakes import KEY, FakeGcs, LoopClock, SettledAutoscaler, gcs_state
from tests.support.fakes import EventLog as Events
from tests.support.fakes import FakeApi as Api
from tests.support.fakes import FakeSource as Source
from tests.support.views import ray_node

from rayscale.api.disruption_annotations import REMOVAL_DRAIN_ANNOTATION
from rayscale.autoscaler.config import AutoscalerConfig
from rayscale.autoscaler.disruptions import CONDITION
from rayscale.autoscaler.spec_removals import CONDITION as REMOVAL_CONDITION
from rayscale.disruption.plan import EVENT_DELETE, EVENT_DRAIN
from rayscale.kube import ops
from rayscale.ray import model as ray

BUSY = ray.NodeStatus.RUNNING
ASKED: list[tuple[str, str, str]] = []  # each drain's node, reason and message


def node(pod: str, status: ray.NodeStatus, *, idle_ms: int = 0, used: float = 0.0) -> ray.RayNodeState:
    return ray_node(pod, status, 4.0 - 4 * used, idle_ms)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Api:
    fake = Api(monkeypatch)
    ASKED.clear()
    drain = FakeGcs.drain_node

    async def asked(gcs: FakeGcs, node_id: str, **kw: Any) -> ray.DrainResult:
        ASKED.append((node_id, str(kw.get("reason", "IDLE_TERMINATION")), str(kw.get("message"))))
        return await drain(gcs, node_id, **kw)

    monkeypatch.setattr(FakeGcs, "drain_node", asked)
    return fake


class Deleted(list[str]):
    """The pods the autoscaler deleted itself."""


@pytest.fixture
def deleted(monkeypatch: pytest.MonkeyPatch) -> Deleted:
    found = Deleted()

    async def delete_pod(api: Any, namespace: str, name: str) -> bool:
        found.append(name)
        return True

    monkeypatch.setattr(ops, "delete_pod", delete_pod)
    return found


def scaler(source: Source, events: Events, clock: LoopClock) -> SettledAutoscaler:
    config = AutoscalerConfig(interval=5, gcs_poll_interval=0, status_pace_seconds=0)
    return SettledAutoscaler(None, source, events, config, clock=clock.mono, wall_clock=clock.now)  # type: ignore[arg-type]


def conditions(api: Api) -> dict[str, dict[str, Any]]:
    found = api.cluster_statuses[-1]["autoscaler"].get("conditions") or []
    return {c["type"]: c for c in found if c}


def removed_group(seconds: str | None = None) -> Source:
    """The cluster with group ``cpu`` only, and a worker ``gpu-1`` of the removed group ``gpu``."""
    body = rc(group("cpu", replicas=0))
    if seconds is not None:
        body["metadata"]["annotations"] = {REMOVAL_DRAIN_ANNOTATION: seconds}
    return Source(body, [pod("rc-head", "headgroup"), pod("gpu-1", "gpu")])


async def test_a_removed_groups_busy_worker_drains_and_is_deleted_once_idle(
    api: Api, deleted: Deleted
) -> None:
    events, clock = Events(), LoopClock()
    FakeGcs.state = gcs_state(node("gpu-1", BUSY, used=1.0))
    auto = scaler(removed_group(), events, clock)
    await auto.step(KEY)
    ((node_id, reason, message),) = ASKED
    assert (node_id, reason) == ("id-gpu-1", "PREEMPTION")
    assert message == "Worker group gpu was removed from the RayCluster's spec."
    assert (deleted, api.patches) == ([], [])  # busy: it stays
    (drain,) = [e for e in events.events if e.reason == EVENT_DRAIN]
    assert "pod gpu-1 of worker group gpu, no deadline" in drain.message
    said = conditions(api)[CONDITION]
    assert said["reason"] == "Draining"
    assert "gpu-1 (group-removed, no deadline)" in said["message"]

    clock.advance(600)
    await auto.step(KEY)
    assert (deleted, len(ASKED)) == ([], 1)  # still busy, no deadline: kept, asked once

    FakeGcs.state = gcs_state(node("gpu-1", ray.NodeStatus.DRAINING, idle_ms=100))
    clock.advance(5)
    await auto.step(KEY)
    assert deleted == ["gpu-1"]
    assert api.patches == []  # no workersToDelete can name it
    (gone,) = [e for e in events.events if e.reason == EVENT_DELETE]
    assert "Deleting pod gpu-1 of worker group gpu: its Ray node is idle after draining." in gone.message
    assert CONDITION not in conditions(api)

    clock.advance(5)
    await auto.step(KEY)  # the watch does not show the deletion yet: not deleted or told twice
    assert deleted == ["gpu-1"]
    assert len([e for e in events.events if e.reason == EVENT_DELETE]) == 1


async def test_the_annotations_deadline_deletes_a_busy_worker(api: Api, deleted: Deleted) -> None:
    events, clock = Events(), LoopClock()
    FakeGcs.state = gcs_state(node("gpu-1", BUSY, used=1.0))
    auto = scaler(removed_group("20"), events, clock)
    await auto.step(KEY)
    assert "gpu-1 (group-removed, deadline 2026-01-01T01:00:20Z)" in conditions(api)[CONDITION]["message"]
    clock.advance(19)
    await auto.step(KEY)
    assert deleted == []
    clock.advance(1)
    await auto.step(KEY)
    assert deleted == ["gpu-1"]
    (gone,) = [e for e in events.events if e.reason == EVENT_DELETE]
    assert "the notice's deadline passed" in gone.message


async def test_0_deletes_at_once_without_a_drain(api: Api, deleted: Deleted) -> None:
    events, clock = Events(), LoopClock()
    FakeGcs.state = gcs_state(node("gpu-1", BUSY, used=1.0))
    auto = scaler(removed_group("0"), events, clock)
    await auto.step(KEY)
    assert (ASKED, deleted) == ([], ["gpu-1"])
    (gone,) = [e for e in events.events if e.reason == EVENT_DELETE]
    assert f"{REMOVAL_DRAIN_ANNOTATION} is 0: deleted at once, without a drain." in gone.message


async def test_a_refused_value_warns_once_and_reads_as_unset(api: Api, deleted: Deleted) -> None:
    events, clock = Events(), LoopClock()
    FakeGcs.state = gcs_state(node("gpu-1", BUSY, used=1.0))
    auto = scaler(removed_group("-3"), events, clock)
    for _ in range(3):
        await auto.step(KEY)
        clock.advance(600)
    (warning,) = [e for e in events.events if e.reason == "InvalidAnnotation"]
    assert warning.type == "Warning"
    assert f"{REMOVAL_DRAIN_ANNOTATION}: '-3' is not a whole number of seconds" in warning.message
    said = conditions(api)
    assert said[REMOVAL_CONDITION]["reason"] == "InvalidAnnotation"
    assert "gpu-1 (group-removed, no deadline)" in said[CONDITION]["message"]  # unset: no deadline
    assert deleted == []


async def test_without_the_gcs_a_removed_groups_worker_waits(api: Api, deleted: Deleted) -> None:
    events, clock = Events(), LoopClock()
    FakeGcs.state = None
    auto = scaler(removed_group(), events, clock)
    await auto.step(KEY)
    clock.advance(600)
    await auto.step(KEY)
    assert (ASKED, deleted) == ([], [])


async def test_above_a_lowered_max_replicas_the_idle_surplus_goes_and_the_busy_stays(
    api: Api, deleted: Deleted
) -> None:
    events, clock = Events(), LoopClock()
    source = Source(rc(group("cpu", replicas=2, max_replicas=1)), [pod("w1", "cpu"), pod("w2", "cpu")])
    FakeGcs.state = gcs_state(node("w1", BUSY, used=1.0), node("w2", ray.NodeStatus.IDLE, idle_ms=5000))
    auto = scaler(source, events, clock)
    await auto.step(KEY)
    assert [("id-w2", "IDLE_TERMINATION", ASKED[0][2])] == ASKED  # the idle one, for idleness
    (patch,) = api.patches
    assert patch[1:] == [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
        {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": ["w2"]}},
    ]
    assert CONDITION not in conditions(api)  # the busy one is within maxReplicas: untouched


async def test_a_busy_surplus_drains_is_held_and_goes_once_idle(api: Api, deleted: Deleted) -> None:
    events, clock = Events(), LoopClock()
    source = Source(rc(group("cpu", replicas=2, max_replicas=1)), [pod("w1", "cpu"), pod("w2", "cpu")])
    FakeGcs.state = gcs_state(node("w1", BUSY, used=1.0), node("w2", BUSY, used=0.5))
    auto = scaler(source, events, clock)
    await auto.step(KEY)
    ((node_id, reason, message),) = ASKED
    assert (node_id, reason) == ("id-w2", "PREEMPTION")  # the least used
    assert message == "Worker group cpu has more replicas than its maxReplicas (1) allows."
    assert api.patches == []  # nothing removed: the busy surplus stays, and counts
    (drain,) = [e for e in events.events if e.reason == EVENT_DRAIN]
    assert "pod w2 of worker group cpu" in drain.message
    assert "w2 (max-replicas, no deadline)" in conditions(api)[CONDITION]["message"]

    for _ in range(2):  # held: no further surplus picked because of it, nothing launched
        clock.advance(5)
        await auto.step(KEY)
    assert (len(ASKED), api.patches) == (1, [])

    FakeGcs.state = gcs_state(node("w1", BUSY, used=1.0), node("w2", ray.NodeStatus.DRAINING, idle_ms=100))
    clock.advance(5)
    await auto.step(KEY)
    (patch,) = api.patches
    assert patch[1:] == [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
        {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": ["w2"]}},
    ]
    (gone,) = [e for e in events.events if e.reason == EVENT_DELETE]
    assert "its Ray node is idle after draining. Worker group cpu has more replicas" in gone.message
    assert deleted == []  # through workersToDelete, as every removal of a group in the spec


async def test_with_0_the_busy_surplus_goes_at_once(api: Api, deleted: Deleted) -> None:
    events, clock = Events(), LoopClock()
    body = rc(group("cpu", replicas=2, max_replicas=1))
    body["metadata"]["annotations"] = {REMOVAL_DRAIN_ANNOTATION: "0"}
    source = Source(body, [pod("w1", "cpu"), pod("w2", "cpu")])
    FakeGcs.state = gcs_state(node("w1", BUSY, used=1.0), node("w2", BUSY, used=0.5))
    auto = scaler(source, events, clock)
    await auto.step(KEY)
    assert ASKED == []
    (patch,) = api.patches
    assert patch[-1]["value"] == {"workersToDelete": ["w2"]}


async def test_while_the_round_is_held_nothing_is_deleted(api: Api, deleted: Deleted) -> None:
    events, clock = Events(), LoopClock()
    FakeGcs.state = gcs_state(node("gpu-1", BUSY, used=1.0), head=False)  # the head's raylet is not running
    auto = scaler(removed_group("0"), events, clock)
    await auto.step(KEY)
    assert deleted == []
    FakeGcs.state = gcs_state(node("gpu-1", BUSY, used=1.0))
    clock.advance(5)
    await auto.step(KEY)
    assert deleted == ["gpu-1"]
