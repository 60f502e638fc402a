"""Ray's state read between full rounds (autoscaler/poll.py): demand reaches a decision within a
poll interval, and a read that finds nothing new plans, writes and reports nothing."""

from __future__ import annotations

import dataclasses

import pytest
from tests.support.builders import group, pod, rc
from tests.support.fakes import KEY, FakeGcs, LoopClock, autoscaler, gcs_state
from tests.support.fakes import FakeApi as Api
from tests.support.fakes import FakeSource as Source

from rayscale.autoscaler import poll
from rayscale.autoscaler.config import AutoscalerConfig
from rayscale.ray import model as ray

BUSY = ray.RayNodeState("id-w", ray.NodeStatus.RUNNING, instance_id="w", available_resources={"CPU": 0.0})
IDLE = ray.RayNodeState("id-w", ray.NodeStatus.IDLE, instance_id="w", idle_duration_ms=10_000)


def demand(cpus: int) -> ray.ClusterState:
    pending = (ray.ResourceDemand(ray.ResourceRequest({"CPU": 1.0}), cpus),)
    return dataclasses.replace(gcs_state(BUSY), pending_requests=pending)


def setup(monkeypatch: pytest.MonkeyPatch, node: ray.RayNodeState = BUSY) -> tuple[Api, Source, LoopClock]:
    api = Api(monkeypatch)
    FakeGcs.state = gcs_state(node)
    body = rc(group("a", replicas=1, maxReplicas=5, rayStartParams={"num-cpus": "1"}))
    return api, Source(body, [pod("w", "a")]), LoopClock()


def triggers(scaler: object) -> list[str]:
    view = scaler.view(KEY)  # type: ignore[attr-defined]
    assert view is not None
    return [d["trigger"] for d in view["decisions"]]


async def test_new_demand_is_decided_at_the_next_read_and_named_as_its_trigger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api, source, clock = setup(monkeypatch)
    scaler = autoscaler(source, clock=clock, poll=1)
    assert await scaler.step(KEY) == 1  # the full round; the next read in a second
    calls = len(FakeGcs.calls)
    clock.t += 1
    assert await scaler.step(KEY) == 1  # Ray reads the same: nothing more
    assert FakeGcs.calls[calls:] == ["GetClusterResourceState"]
    assert (api.patches, len(triggers(scaler))) == ([], 1)
    view = scaler.view(KEY)
    assert view is not None
    assert view["decisions"][0]["repeats"] == 1  # the read stands for a round deciding the same
    FakeGcs.state = demand(2)
    clock.t += 1
    assert await scaler.step(KEY) == 1
    (patch,) = api.patches
    assert patch[1] == {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}
    assert triggers(scaler)[0] == poll.RAY_STATE


async def test_a_read_that_finds_nothing_new_plans_nothing_until_the_full_round_is_due(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api, source, clock = setup(monkeypatch, IDLE)  # an idle worker: its idle time decides
    scaler = autoscaler(source, clock=clock, poll=1)
    await scaler.step(KEY)
    statuses, reports = len(api.cluster_statuses), len(FakeGcs.reports)
    for _ in range(4):
        clock.t += 1
        await scaler.step(KEY)
    assert (len(api.cluster_statuses), len(FakeGcs.reports)) == (statuses, reports)
    read, report = "GetClusterResourceState", "ReportAutoscalingState"
    assert FakeGcs.calls == [read, report, read, read, read, read]
    clock.t += 1  # 5 s after the full round: the next is full again (Ray holds its report already)
    await scaler.step(KEY)
    assert FakeGcs.calls[6:] == [read]
    assert scaler.metrics.quiet_reads._value.get() == 4  # that read was a full round's


async def test_an_unreachable_gcs_is_read_only_in_full_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    _, source, clock = setup(monkeypatch)
    FakeGcs.state = None
    scaler = autoscaler(source, clock=clock, poll=1)
    assert await scaler.step(KEY) == 5


async def test_without_polling_every_round_is_full(monkeypatch: pytest.MonkeyPatch) -> None:
    _, source, clock = setup(monkeypatch)
    scaler = autoscaler(source, clock=clock, poll=0)
    assert await scaler.step(KEY) == 5
    clock.t += 1
    FakeGcs.calls.clear()
    FakeGcs.state = demand(1)
    await scaler.step(KEY)
    assert FakeGcs.calls == ["GetClusterResourceState", "ReportAutoscalingState"]


def test_what_the_fingerprint_sees() -> None:
    base = gcs_state(BUSY)
    idle = dataclasses.replace(BUSY, status=ray.NodeStatus.IDLE, available_resources={"CPU": 1.0})
    older = dataclasses.replace(idle, idle_duration_ms=60_000)
    assert poll.fingerprint(base) == poll.fingerprint(dataclasses.replace(base, version=7))
    assert poll.fingerprint(gcs_state(idle)) == poll.fingerprint(gcs_state(older))  # only time passed
    assert poll.fingerprint(base) != poll.fingerprint(gcs_state(idle))
    assert poll.fingerprint(base) != poll.fingerprint(demand(1))
    assert poll.fingerprint(demand(1)) != poll.fingerprint(demand(2))
    assert poll.fingerprint(base) != poll.fingerprint(dataclasses.replace(base, session_name="other"))
    assert poll.fingerprint(None) is None


def test_when_a_full_round_is_due_and_the_next_read() -> None:
    on, off = (
        AutoscalerConfig(interval=5, gcs_poll_interval=1),
        AutoscalerConfig(interval=5, gcs_poll_interval=0),
    )
    assert poll.due(None, 100, on)
    assert not poll.due(100, 104.9, on)
    assert poll.due(100, 105, on)
    assert poll.due(100, 101, off)
    assert (poll.delay(gcs_state(), on), poll.delay(None, on), poll.delay(gcs_state(), off)) == (1, 5, 5)


@pytest.mark.parametrize(
    ("clusters", "budget", "seconds"),
    [(1, 200, 1.0), (200, 200, 1.0), (400, 200, 2.0), (1000, 200, 5.0), (5000, 200, 5.0), (5000, 0, 1.0)],
)
def test_more_clusters_than_the_budget_are_read_less_often(
    clusters: int, budget: float, seconds: float
) -> None:
    """`gcs_poll_budget` reads a second over all clusters at most: each cluster's read comes every
    clusters/budget seconds, never less often than a full round (`interval`); 0 is no budget."""
    config = AutoscalerConfig(interval=5, gcs_poll_interval=1, gcs_poll_budget=budget)
    assert poll.delay(gcs_state(), config, clusters) == pytest.approx(seconds)


async def test_a_settled_cluster_waits_for_the_status_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every worker busy, no demand: only a change can change the decision, so the full round
    waits until its status is due for a refresh."""
    _, source, clock = setup(monkeypatch)
    scaler = autoscaler(source, clock=clock, poll=1)
    await scaler.step(KEY)
    refresh = AutoscalerConfig().status_refresh_seconds
    for _ in range(int(refresh) - 1):
        clock.t += 1
        await scaler.step(KEY)
    assert FakeGcs.calls.count("ReportAutoscalingState") == 1
    assert scaler.metrics.quiet_reads._value.get() == refresh - 1
    clock.t += 1
    await scaler.step(KEY)
    assert FakeGcs.calls[-1] == "ReportAutoscalingState"


def test_what_a_settled_snapshot_is() -> None:
    from rayscale.autoscaler.scheduling.model import Demand, Group, Node, NodeState, Snapshot

    groups = (Group("a", {"CPU": 1.0}),)
    busy = Node("w", "a", available={"CPU": 0.0})
    assert poll.settled(Snapshot(groups), held=False)
    assert poll.settled(Snapshot(groups, nodes=(busy,)), held=False)
    assert not poll.settled(Snapshot(groups, nodes=(busy,)), held=True)
    assert not poll.settled(Snapshot(groups, nodes=(dataclasses.replace(busy, idle_seconds=3),)), held=False)
    assert not poll.settled(
        Snapshot(groups, nodes=(dataclasses.replace(busy, state=NodeState.PENDING),)), held=False
    )
    assert not poll.settled(Snapshot(groups, demands=(Demand({"CPU": 1.0}),)), held=False)
    assert not poll.settled(Snapshot((dataclasses.replace(groups[0], backoff=True),)), held=False)
