"""The autoscaler loop with the API and the GCS faked: patch, re-plan on conflict, drain, backoff, status."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import yaml
from tests.support.builders import gpu_group, group, pod, rc, rrr
from tests.support.fakes import (
    HEAD_GCS,
    KEY,
    FakeGcs,
    SettledAutoscaler,
    autoscaler,
    gcs_state,
    token_cluster,
)
from tests.support.fakes import EventLog as Events
from tests.support.fakes import FakeApi as Api
from tests.support.fakes import FakeSource as Source
from tests.support.fakes import LoopClock as Clock

from rayscale.autoscaler import decide
from rayscale.autoscaler.loop import Autoscaler, AutoscalerConfig
from rayscale.autoscaler.scenario import parse_scenario
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.trust import SETTLE_SECONDS
from rayscale.common.retry import Failed
from rayscale.kube import ops
from rayscale.ray import model as ray

IDLE_HOUR = 3_600_000


def idle(pod_name: str) -> ray.RayNodeState:
    return ray.RayNodeState(
        f"id-{pod_name}", ray.NodeStatus.IDLE, instance_id=pod_name, idle_duration_ms=IDLE_HOUR
    )


async def test_request_scales_only_the_gpu_group_and_is_pending_while_it_launches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = Api(monkeypatch)
    events = Events()
    source = Source(rc(group("cpu", replicas=0), gpu_group()), requests=[rrr(3)])
    assert await autoscaler(source, events).step(KEY) == 5
    assert api.patches == [
        [
            {"op": "test", "path": "/metadata/generation", "value": 1},
            {"op": "replace", "path": "/spec/workerGroupSpecs/1/replicas", "value": 3},
        ]
    ]
    waiting = "scaling up: 3 bundle(s) wait for workers that launch or start"
    assert api.statuses == [
        ("reserve", {"phase": "Pending", "reason": None, "message": waiting, "observedGeneration": 1}),
    ]
    assert events.posted == [("Normal", "ScaledUp", "group gpu: 0 -> 3 replicas")]


async def test_past_max_is_unsatisfiable_and_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(monkeypatch)
    source = Source(rc(group("cpu", replicas=0), gpu_group(replicas=3)), requests=[rrr(10, generation=2)])
    await autoscaler(source).step(KEY)
    assert api.patches == []
    ((_, status),) = api.statuses
    assert (status["phase"], status["reason"], status["observedGeneration"]) == (
        "Unsatisfiable",
        "MAX_REPLICAS",
        2,
    )
    assert "10 x {GPU: 1} (MAX_REPLICAS)" in status["message"]


async def test_unchanged_status_is_not_written(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(monkeypatch)
    done = {"phase": "Satisfied", "reason": None, "message": "the cluster can hold every bundle",
            "observedGeneration": 1}  # fmt: skip
    running = [pod(f"rc-gpu-{n}", "gpu") for n in "abc"]
    source = Source(rc(gpu_group(replicas=3)), running, requests=[rrr(3, status=done)])
    await autoscaler(source).step(KEY)
    assert (api.patches, api.statuses) == ([], [])


async def test_missing_cluster_leaves_requests_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(monkeypatch)
    assert await autoscaler(Source(None, requests=[rrr(1)])).step(KEY) is None
    ((_, status),) = api.statuses
    assert status["phase"] == "Pending"
    assert status["message"] == "RayCluster rc does not exist in namespace ns"
    assert api.patches == []


async def test_conflict_replans_on_the_fresh_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = rc(group("cpu", replicas=0), gpu_group(replicas=1), rv="43")
    fresh["metadata"]["generation"] = 2  # somebody changed the spec
    api = Api(monkeypatch, conflicts=1, fresh=fresh)
    source = Source(rc(group("cpu", replicas=0), gpu_group()), requests=[rrr(3)])
    assert await autoscaler(source).step(KEY) == 5
    assert [p[0]["value"] for p in api.patches] == [1, 2]
    assert api.patches[1][1] == {"op": "replace", "path": "/spec/workerGroupSpecs/1/replicas", "value": 3}


def idle_setup(monkeypatch: pytest.MonkeyPatch) -> tuple[Api, Source]:
    api = Api(monkeypatch)
    body = rc(group("a", replicas=1))
    body["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": 60}
    FakeGcs.state = gcs_state(idle("w"))
    return api, Source(body, [pod("w", "a")])


async def test_idle_node_is_drained_then_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    api, source = idle_setup(monkeypatch)
    await autoscaler(source).step(KEY)
    assert FakeGcs.drained == ["id-w"]
    (patch,) = api.patches
    assert patch[1:] == [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 0},
        {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": ["w"]}},
    ]


async def test_node_refusing_the_drain_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    api, source = idle_setup(monkeypatch)
    FakeGcs.accept = False
    await autoscaler(source).step(KEY)
    assert FakeGcs.drained == ["id-w"]
    assert api.patches == []


async def test_gcs_unreachable_keeps_running_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    api, source = idle_setup(monkeypatch)
    FakeGcs.state = None
    await autoscaler(source).step(KEY)
    assert (FakeGcs.drained, api.patches) == ([], [])


async def test_after_a_gcs_outage_nothing_moves_until_its_view_settles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Right after an outage the GCS reports what it knew before it (placed actors as pending,
    busy nodes as free): a round on that view would launch or remove what it should not."""
    api, source = idle_setup(monkeypatch)
    clock = Clock()
    scaler = autoscaler(source, clock=clock)
    FakeGcs.state = gcs_state(ray.RayNodeState("id-w", ray.NodeStatus.RUNNING, instance_id="w"))
    await scaler.step(KEY)  # in contact, w busy
    FakeGcs.state = None
    clock.advance(20)
    await scaler.step(KEY)  # the outage
    FakeGcs.state = gcs_state(idle("w"))  # back: w reads idle for an hour
    clock.advance(1)
    await scaler.step(KEY)
    clock.advance(SETTLE_SECONDS - 1)
    await scaler.step(KEY)
    assert (FakeGcs.drained, api.patches) == ([], [])
    clock.advance(1)
    await scaler.step(KEY)  # settled: w really is idle
    assert FakeGcs.drained == ["id-w"]
    assert api.patches


async def test_a_gcs_never_reached_before_is_acted_on_at_its_first_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, source = idle_setup(monkeypatch)
    clock = Clock()
    scaler = autoscaler(source, clock=clock)
    FakeGcs.state = None
    await scaler.step(KEY)  # a new cluster: the head is still starting
    FakeGcs.state = gcs_state(idle("w"))
    clock.advance(1)
    await scaler.step(KEY)
    assert FakeGcs.drained == ["id-w"]


async def test_launch_failure_backs_the_group_off(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(monkeypatch)
    events = Events()
    source = Source(rc(group("a", replicas=1)), [pod("w", "a", phase="Pending", ready=False)])
    scaler = autoscaler(source, events)
    await scaler.step(KEY)
    (patch,) = api.patches
    assert patch[-1]["value"] == {"workersToDelete": ["w"]}
    assert scaler._memory[KEY].backoff.active() == {"a"}
    assert ("Warning", "BackingOff") in {(t, r) for t, r, _ in events.posted}


class RawResponse:
    def __init__(self, status: int, body: str) -> None:
        self.status, self.reason, self._body, self.released = status, "Unprocessable Entity", body, False

    async def text(self) -> str:
        return self._body

    async def json(self) -> Any:
        return {}

    def release(self) -> None:
        self.released = True


async def test_a_failed_resourceversion_test_is_an_error_not_silence(monkeypatch: pytest.MonkeyPatch) -> None:
    # kubernetes-asyncio does not raise for a raw (_preload_content=False) answer: ops must look.
    resp = RawResponse(422, '{"message": "the server rejected our request due to an error in our request"}')

    class Objects:
        async def patch_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> RawResponse:
            return resp

    monkeypatch.setattr(ops, "_objects", lambda api: Objects())
    with pytest.raises(ops.KubeError) as failed:
        await ops.json_patch_raycluster(None, "ns", "rc", [])  # type: ignore[arg-type]
    assert failed.value.status == 422
    assert "rejected our request" in str(failed.value)
    assert resp.released


def scaled_down(scaler: Autoscaler, group: str, cause: str) -> float | None:
    labels = {"namespace": "ns", "cluster": "rc", "group": group, "cause": cause}
    return scaler.metrics.registry.get_sample_value("rayscale_autoscaler_scaled_down_total", labels)


# ---- Ray cannot be trusted: the head's raylet is down, or the GCS session just changed ----


async def test_nothing_scales_while_the_head_raylet_is_not_running(monkeypatch: pytest.MonkeyPatch) -> None:
    api, source = idle_setup(monkeypatch)
    source._requests = [rrr(1)]  # demand for a group with room: a launch, were the head running
    source.body = rc(group("a", replicas=1), gpu_group())
    source.body["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": 60}
    FakeGcs.state = gcs_state(idle("w"), head=False)
    scaler = autoscaler(source)
    await scaler.step(KEY)
    assert (FakeGcs.drained, api.patches) == ([], [])
    FakeGcs.state = gcs_state(idle("w"))  # the head's raylet registered
    await scaler.step(KEY)
    assert FakeGcs.drained == ["id-w"]
    (patch,) = api.patches
    assert patch[1:] == [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 0},
        {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": ["w"]}},
        {"op": "replace", "path": "/spec/workerGroupSpecs/1/replicas", "value": 1},
    ]


async def test_after_a_head_restart_nothing_is_removed_for_the_grace_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api, source = idle_setup(monkeypatch)
    source._requests = [rrr(1)]
    source.body = rc(group("a", replicas=1), gpu_group())
    source.body["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": 60}
    busy = ray.RayNodeState("id-w", ray.NodeStatus.RUNNING, instance_id="w", available_resources={"CPU": 0.0})
    FakeGcs.state = gcs_state(busy, session="s1")
    clock = Clock()
    scaler = autoscaler(source, clock=clock)
    await scaler.step(KEY)
    api.patches.clear()
    # A new head without GCS fault tolerance: new session; the worker re-registered and looks idle.
    FakeGcs.state = gcs_state(idle("w"), session="s2")
    clock.advance(60)
    await scaler.step(KEY)
    assert FakeGcs.drained == []
    (patch,) = api.patches  # launches still go ahead
    assert patch[1:] == [{"op": "replace", "path": "/spec/workerGroupSpecs/1/replicas", "value": 1}]
    clock.advance(119)
    await scaler.step(KEY)
    assert FakeGcs.drained == []
    clock.advance(1)  # 120 s after the change
    await scaler.step(KEY)
    assert FakeGcs.drained == ["id-w"]
    assert api.patches[-1][2] == {
        "op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": ["w"]}
    }  # fmt: skip


def without_ray_node_setup(monkeypatch: pytest.MonkeyPatch) -> tuple[Api, Source, Events]:
    """A worker pod Running for days whose Ray node the GCS does not list; provisioning limit 5 s."""
    api = Api(monkeypatch)
    body = rc(group("a", replicas=1), group("b", replicas=0))
    body["metadata"]["annotations"] = {"rayscale.io/max-node-provision-seconds": "5"}
    FakeGcs.state = gcs_state()
    return api, Source(body, [pod("w", "a", created="2025-12-01T00:00:00Z")]), Events()


async def test_a_running_worker_without_a_ray_node_boots_for_an_hour_before_it_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api, source, events = without_ray_node_setup(monkeypatch)
    clock = Clock()
    scaler = autoscaler(source, events, clock)
    await scaler.step(KEY)
    clock.advance(3599)
    await scaler.step(KEY)
    assert api.patches == []
    assert scaler._memory[KEY].backoff.active() == frozenset()
    clock.advance(2)  # an hour since rayscale first saw it running without a Ray node
    await scaler.step(KEY)
    (patch,) = api.patches
    assert patch[-1]["value"] == {"workersToDelete": ["w"]}
    assert scaler._memory[KEY].backoff.active() == {"a"}
    assert ("Warning", "BackingOff") in {(t, r) for t, r, _ in events.posted}


async def test_a_session_change_restarts_the_boot_clocks(monkeypatch: pytest.MonkeyPatch) -> None:
    api, source, _ = without_ray_node_setup(monkeypatch)
    clock = Clock()
    scaler = autoscaler(source, clock=clock)
    await scaler.step(KEY)
    clock.advance(3000)
    FakeGcs.state = gcs_state(session="s2")  # the head restarted
    await scaler.step(KEY)
    clock.advance(1000)  # 4000 s missing in all, 1000 s in this session
    await scaler.step(KEY)
    assert api.patches == []
    assert scaler._memory[KEY].backoff.active() == frozenset()


async def test_a_dead_ray_node_is_removed_without_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(monkeypatch)
    events = Events()
    FakeGcs.state = gcs_state(ray.RayNodeState("id-w", ray.NodeStatus.DEAD, instance_id="w"))
    source = Source(rc(group("a", replicas=1, min_replicas=1)), [pod("w", "a")])
    scaler = autoscaler(source, events)
    await scaler.step(KEY)
    (patch,) = api.patches
    assert patch[1:] == [
        {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": ["w"]}}
    ]  # replicas stay 1: the controller replaces the pod
    assert scaler._memory[KEY].backoff.active() == frozenset()
    reasons = [(t, r) for t, r, _ in events.posted]
    assert ("Warning", "BackingOff") not in reasons
    (died,) = [m for t, r, m in events.posted if (t, r) == ("Normal", "RayNodeDied")]
    assert "pod w" in died
    assert scaled_down(scaler, "a", "NODE_DEAD") == 1  # a pod removed, even though replaced


# ---- drain only what the patch writes; a drained node never stays in replicas ----


async def test_a_group_waiting_for_its_last_removals_drains_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(monkeypatch)
    body = rc(group("a", replicas=2, scaleStrategy={"workersToDelete": ["w-old"]}))
    body["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": 60}
    FakeGcs.state = gcs_state(idle("w"))
    pods = [pod("w", "a"), pod("w-old", "a", deleting="2026-01-01T00:59:00Z")]
    await autoscaler(Source(body, pods)).step(KEY)
    assert (FakeGcs.drained, api.patches) == ([], [])


async def test_an_accepted_drain_is_removed_after_conflicts_and_never_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api, source = idle_setup(monkeypatch)
    assert source.body is not None
    api.conflicts = decide.CONFLICT_ATTEMPTS  # every patch of this round is refused
    api.fresh = source.body
    events = Events()
    scaler = autoscaler(source, events)
    refused = await scaler.step(KEY)  # a failed round: the queue backs the cluster off
    assert isinstance(refused, Failed)
    assert "refused 3 times" in refused.reason
    assert FakeGcs.drained == ["id-w"]  # the re-plans remove it as DRAINED, without asking again
    assert all(p[-1]["value"] == {"workersToDelete": ["w"]} for p in api.patches)
    FakeGcs.accept = False  # it would refuse now; it already accepted and must go
    await scaler.step(KEY)
    assert FakeGcs.drained == ["id-w"]
    assert api.patches[-1][1:] == [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 0},
        {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": ["w"]}},
    ]
    assert ("Normal", "ScaledDown", "group a: 1 -> 0 replicas (DRAINED)") in events.posted
    assert scaled_down(scaler, "a", "DRAINED") == 1
    assert scaler._memory[KEY].draining == {"w"}
    source.body["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": ["w"]}
    await scaler.step(KEY)
    assert scaler._memory[KEY].draining == frozenset()  # listed: forgotten


async def test_a_patch_the_api_server_fails_is_a_failed_round_with_its_retry_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, source = idle_setup(monkeypatch)

    async def overloaded(api: Any, ns: str, name: str, patch: list[dict[str, Any]]) -> None:
        raise ops.KubeError("patch rayclusters/rc: 429 Too many requests", 429, retry_after=7.0)

    monkeypatch.setattr(ops, "json_patch_raycluster", overloaded)
    events = Events()
    failed = await autoscaler(source, events).step(KEY)
    assert failed == Failed("patch rayclusters/rc: 429 Too many requests", 7.0)  # the queue backs off
    assert not [e for e in events.posted if e[1] == "ScaledDown"]  # nothing was written


def tpu_setup(monkeypatch: pytest.MonkeyPatch) -> tuple[Api, Source]:
    api = Api(monkeypatch)
    body = rc(group("tpu", replicas=1, hosts=3))
    body["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": 60}
    FakeGcs.state = gcs_state(*(idle(f"t-{h}") for h in range(3)))
    pods = [pod(f"t-{h}", "tpu", replica="r1", host=h) for h in range(3)]
    return api, Source(body, pods)


async def test_a_multi_host_replica_drains_host_by_host_and_goes_only_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api, source = tpu_setup(monkeypatch)
    FakeGcs.refuse = frozenset({"id-t-1"})
    scaler = autoscaler(source)
    await scaler.step(KEY)
    assert FakeGcs.drained == ["id-t-0", "id-t-1"]  # in order; t-2 is not asked after the refusal
    assert api.patches == []
    # t-0 accepted: the replica must go now (DRAINED); later rounds ask only the hosts left
    await scaler.step(KEY)
    assert FakeGcs.drained[2:] == ["id-t-1"]
    assert api.patches == []
    FakeGcs.refuse = frozenset()
    await scaler.step(KEY)
    assert FakeGcs.drained[3:] == ["id-t-1", "id-t-2"]
    (patch,) = api.patches
    assert patch[1:] == [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 0},
        {
            "op": "add",
            "path": "/spec/workerGroupSpecs/0/scaleStrategy",
            "value": {"workersToDelete": ["t-0", "t-1", "t-2"]},
        },
    ]


async def test_without_the_gcs_a_half_drained_replica_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    api, source = tpu_setup(monkeypatch)
    FakeGcs.refuse = frozenset({"id-t-1"})
    scaler = autoscaler(source)
    await scaler.step(KEY)
    FakeGcs.state = None  # its other hosts cannot be asked: nothing of it is deleted
    await scaler.step(KEY)
    assert (FakeGcs.drained, api.patches) == (["id-t-0", "id-t-1"], [])


# ---- what Ray is told (ReportAutoscalingState), and whether rayscale can serve this Ray ----


async def test_rounds_report_to_ray_what_it_does_not_hold_with_increasing_versions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Api(monkeypatch)
    FakeGcs.state = gcs_state()
    source = Source(rc(group("cpu", replicas=0), gpu_group()), requests=[rrr(2)])
    clock = Clock()
    scaler = autoscaler(source, clock=clock)
    for _ in range(3):
        await scaler.step(KEY)
    (first,) = FakeGcs.reports  # the same report is not sent again
    assert [r.ray_node_type_name for r in first.pending_instance_requests] == ["gpu", "gpu"]
    FakeGcs.state = dataclasses.replace(gcs_state(), version=2)  # only the GCS's version moved
    await scaler.step(KEY)
    assert len(FakeGcs.reports) == 1
    FakeGcs.state = gcs_state(session="s2")  # a restarted GCS holds nothing
    await scaler.step(KEY)
    assert len(FakeGcs.reports) == 2
    clock.advance(AutoscalerConfig().status_refresh_seconds)  # sent again at least this often
    await scaler.step(KEY)
    assert len(FakeGcs.reports) == 3
    versions = [r.autoscaler_state_version for r in FakeGcs.reports]
    assert versions == sorted(set(versions)), versions  # strictly increasing
    assert versions[0] >= int(Clock().now().timestamp() * 1000)  # never below the wall clock (restarts)
    assert [r.last_seen_cluster_resource_state_version for r in FakeGcs.reports] == [1, 1, 1]
    FakeGcs.state = None  # unreachable: nothing to report to
    clock.advance(AutoscalerConfig().status_refresh_seconds)
    await scaler.step(KEY)
    assert len(FakeGcs.reports) == 3


async def test_a_failed_launch_is_reported_to_ray_until_it_is_old(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(monkeypatch)
    FakeGcs.state = gcs_state()
    source = Source(rc(group("a", replicas=1)), [pod("w", "a", phase="Pending", ready=False)])
    clock = Clock()
    scaler = autoscaler(source, clock=clock)
    await scaler.step(KEY)
    assert api.patches[-1][-1]["value"] == {"workersToDelete": ["w"]}
    (failed,) = FakeGcs.reports[-1].failed_instance_requests
    assert (failed.ray_node_type_name, failed.count) == ("a", 1)
    assert failed.reason == "pod not scheduled within 900s"
    source.body, source._pods = rc(group("a", replicas=0)), []  # the patch landed
    clock.advance(599)
    await scaler.step(KEY)
    assert len(FakeGcs.reports[-1].failed_instance_requests) == 1
    clock.advance(2)
    await scaler.step(KEY)
    assert len(FakeGcs.reports[-1].failed_instance_requests) == 0


def compat(api: Api) -> dict[str, Any]:
    """The RayCompatible condition of the latest status.autoscaler written."""
    (condition,) = api.cluster_statuses[-1]["autoscaler"]["conditions"]
    assert condition["type"] == "RayCompatible"
    return dict(condition)


def warnings(events: Events) -> list[tuple[str, str]]:
    return [(r, m) for t, r, m in events.posted if t == "Warning"]


async def test_a_ray_without_report_and_drain_is_incompatible_with_one_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api, source = idle_setup(monkeypatch)
    FakeGcs.unimplemented = frozenset({"ReportAutoscalingState", "DrainNode"})
    events = Events()
    clock = Clock()
    scaler = autoscaler(source, events, clock)
    for _ in range(3):
        await scaler.step(KEY)
        clock.advance(5)
    assert api.patches == []  # the idle node cannot be drained, so it stays
    condition = compat(api)
    assert (condition["status"], condition["reason"]) == ("False", "DrainUnsupported")
    assert "no DrainNode" in condition["message"]
    assert "no ReportAutoscalingState" in condition["message"]
    assert warnings(events) == [("DrainUnsupported", condition["message"])]
    assert FakeGcs.calls.count("ReportAutoscalingState") == 1  # not asked again this session
    assert FakeGcs.reports == []

    # A restarted operator reads the condition back: no new Event, and still no report.
    assert source.body is not None
    source.body["status"] = {"autoscaler": api.cluster_statuses[-1]["autoscaler"]}
    restarted_events = Events()
    restarted = autoscaler(source, restarted_events, clock)
    await restarted.step(KEY)
    assert restarted_events.posted == []
    assert FakeGcs.calls.count("ReportAutoscalingState") == 1

    # A new Ray (a new GCS session) that has both: compatible again, a Normal Event.
    FakeGcs.unimplemented = frozenset()
    FakeGcs.state = gcs_state(idle("w"), session="s2")
    await restarted.step(KEY)
    condition = compat(api)
    assert (condition["status"], condition["reason"]) == ("True", "Compatible")
    assert [(t, r) for t, r, _ in restarted_events.posted] == [("Normal", "RayCompatible")]
    assert len(FakeGcs.reports) == 1


@pytest.mark.parametrize(
    ("unimplemented", "options", "reason"),
    [
        ({"ReportAutoscalingState"}, {}, "ReportUnsupported"),
        ({"GetClusterResourceState", "ReportAutoscalingState"}, {}, "RayTooOld"),
        (set(), {"version": "v1"}, "AutoscalerV1"),
    ],
)
async def test_what_makes_a_cluster_incompatible_is_warned_once(
    monkeypatch: pytest.MonkeyPatch, unimplemented: set[str], options: dict[str, str], reason: str
) -> None:
    api = Api(monkeypatch)
    FakeGcs.state = gcs_state()
    FakeGcs.unimplemented = frozenset(unimplemented)
    body = rc(group("a", replicas=0))
    body["spec"]["autoscalerOptions"] = options
    events = Events()
    scaler = autoscaler(Source(body), events)
    await scaler.step(KEY)
    await scaler.step(KEY)
    condition = compat(api)
    assert (condition["status"], condition["reason"]) == ("False", reason)
    assert [r for r, _ in warnings(events)] == [reason]


async def test_a_compatible_ray_gets_a_true_condition_and_no_event(monkeypatch: pytest.MonkeyPatch) -> None:
    api, source = idle_setup(monkeypatch)
    events = Events()
    await autoscaler(source, events).step(KEY)
    assert FakeGcs.drained == ["id-w"]
    condition = compat(api)
    assert (condition["status"], condition["reason"]) == ("True", "Compatible")
    assert [r for _, r, _ in events.posted if r in ("RayCompatible", "DrainUnsupported")] == []


def _beside_kuberay(source: Source, events: Events) -> Autoscaler:
    config = AutoscalerConfig(interval=5, beside_kuberay=True, status_pace_seconds=0)
    clock = Clock()
    return SettledAutoscaler(None, source, events, config, clock=clock.mono, wall_clock=clock.now)  # type: ignore[arg-type]


async def test_beside_kuberay_only_opted_in_clusters_without_ray_autoscaler_are_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = Api(monkeypatch)
    events = Events()
    # In-tree autoscaling on: KubeRay runs Ray's autoscaler there; rayscale keeps off, silently.
    body = rc(group("cpu", replicas=0), gpu_group())
    assert await _beside_kuberay(Source(body, requests=[rrr(3)]), events).step(KEY) is None
    assert (api.patches, events.posted) == ([], [])
    # ... and says why once when the cluster asks for rayscale anyway.
    body["metadata"]["annotations"] = {"rayscale.io/autoscaler": "true"}
    scaler = _beside_kuberay(Source(body, requests=[rrr(3)]), events)
    await scaler.step(KEY)
    await scaler.step(KEY)
    assert api.patches == []
    ((kind, reason, message),) = events.posted
    assert (kind, reason) == ("Warning", "AutoscalingRefused")
    assert "enableInTreeAutoscaling is true" in message
    # Opted in with in-tree autoscaling off: rayscale autoscales it.
    body["spec"]["enableInTreeAutoscaling"] = False
    assert await _beside_kuberay(Source(body, requests=[rrr(3)]), Events()).step(KEY) == 5
    assert api.patches[-1][-1] == {"op": "replace", "path": "/spec/workerGroupSpecs/1/replicas", "value": 3}


async def test_a_head_still_running_rays_autoscaler_is_not_autoscaled_beside_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = Api(monkeypatch)
    events = Events()
    head = pod("rc-head", "headgroup")
    head.setdefault("spec", {})["containers"] = [{"name": "ray-head"}, {"name": "autoscaler"}]
    source = Source(rc(group("cpu", replicas=0), gpu_group()), [head], requests=[rrr(3)])
    scaler = autoscaler(source, events)
    assert await scaler.step(KEY) is None
    await scaler.step(KEY)
    assert api.patches == []
    ((kind, reason, message),) = events.posted
    assert (kind, reason) == ("Warning", "AutoscalingRefused")
    assert "runs Ray's own autoscaler" in message
    head["spec"]["containers"] = [{"name": "ray-head"}]  # recreated without the sidecar
    assert await scaler.step(KEY) == 5
    assert api.patches


# ---- rayscale.io/gcs-address: the token goes only to the head Service unless overrides are allowed


def override(api: Api) -> dict[str, Any] | None:
    """The GcsAddressOverride condition of the latest status.autoscaler written, if any."""
    conditions = api.cluster_statuses[-1]["autoscaler"]["conditions"]
    assert conditions[0]["type"] == "RayCompatible"
    found = [c for c in conditions if c["type"] == "GcsAddressOverride"]
    return dict(found[0]) if found else None


async def test_without_the_flag_the_annotation_is_ignored_and_the_token_goes_to_the_head_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api, source = token_cluster(monkeypatch, "10.9.8.7:6379")
    events, clock = Events(), Clock()
    scaler = autoscaler(source, events, clock)
    for _ in range(3):
        await scaler.step(KEY)
        clock.advance(5)
    assert FakeGcs.dialed == [(HEAD_GCS, "s3cret")]  # never the annotation's address
    assert api.cluster_statuses[-1]["autoscaler"]["gcs"]["address"] == HEAD_GCS
    condition = override(api)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "OverrideNotAllowed")
    for part in ("rayscale.io/gcs-address", "'10.9.8.7:6379'", "--allow-gcs-address-override",
                 "autoscaler.allowGcsAddressOverride", HEAD_GCS):  # fmt: skip
        assert part in condition["message"]
    assert warnings(events) == [("GcsAddressIgnored", condition["message"])]  # once, not every round

    # A restarted operator reads the condition back: no second Event.
    assert source.body is not None
    source.body["status"] = {"autoscaler": api.cluster_statuses[-1]["autoscaler"]}
    restarted_events = Events()
    await autoscaler(source, restarted_events, clock).step(KEY)
    assert restarted_events.posted == []

    # The annotation gone: no condition, no Event.
    source.body["metadata"]["annotations"] = {}
    await scaler.step(KEY)
    assert override(api) is None
    assert len(warnings(events)) == 1


async def test_with_the_flag_the_annotation_is_followed_with_the_token_and_said_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api, source = token_cluster(monkeypatch, "10.9.8.7:6379")
    events = Events()
    scaler = autoscaler(source, events, allow_override=True)
    await scaler.step(KEY)
    await scaler.step(KEY)
    assert FakeGcs.dialed == [("10.9.8.7:6379", "s3cret")]
    condition = override(api)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("True", "OverrideAllowed")
    assert [(t, r) for t, r, _ in events.posted] == [("Normal", "GcsAddressOverridden")]


async def test_an_annotation_naming_the_head_service_is_no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    api, source = token_cluster(monkeypatch, HEAD_GCS)
    events = Events()
    await autoscaler(source, events).step(KEY)
    assert FakeGcs.dialed == [(HEAD_GCS, "s3cret")]
    assert override(api) is None
    assert events.posted == []


# ---- what the operator serves: view(), fleet(), history_scenario(); replica Events and status summary


async def test_the_view_shows_the_replicas_and_the_decisions_after_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = Api(monkeypatch)
    FakeGcs.state = gcs_state(ray.RayNodeState("id-w", ray.NodeStatus.RUNNING, instance_id="w"))
    source = Source(rc(group("cpu", replicas=1), gpu_group()), [pod("w", "cpu")], requests=[rrr(2)])
    clock = Clock()
    scaler = autoscaler(source, clock=clock)
    assert (scaler.view(KEY), scaler.fleet()) == (None, [])
    scaler.mark(KEY, "RayResourceRequest")
    scaler.mark(KEY, "pod")
    await scaler.step(KEY)
    assert api.patches
    view = scaler.view(KEY)
    assert view is not None
    assert json.loads(json.dumps(view)) == view
    assert [(r["replica"], r["state"], r["rayNodes"]) for r in view["replicas"]] == [("w", "ready", ["id-w"])]
    (first,) = view["decisions"]
    assert (first["trigger"], first["written"], first["time"]) == (
        "RayResourceRequest, pod",
        True,
        "2026-01-01T01:00:00Z",
    )
    assert first["launched"] == [
        {
            "group": "gpu",
            "replicas": 2,
            "why": ["2 x {GPU: 1} (bundle(s) of request_resources or RayResourceRequests)"],
        }
    ]
    assert view["demand"]["pending"] == [
        {"kind": "request", "resources": {"GPU": 1}, "unit": "ns/reserve", "count": 2}
    ]

    assert source.body is not None
    source.body["spec"]["workerGroupSpecs"][1]["replicas"] = 2  # the patch landed; no pod yet
    for _ in range(3):  # periodic rounds that decide nothing new
        clock.advance(5)
        await scaler.step(KEY)
    view = scaler.view(KEY)
    assert view is not None
    latest, _ = view["decisions"]
    assert (latest["trigger"], latest["written"], latest["launched"], latest["repeats"]) == (
        "periodic",
        False,
        [],
        2,
    )
    assert (latest["time"], latest["lastSeen"]) == ("2026-01-01T01:00:05Z", "2026-01-01T01:00:15Z")
    replicas = {r["replica"]: r for r in view["replicas"]}
    assert {name: r["state"] for name, r in replicas.items()} == {
        "w": "ready",
        "unborn:gpu:0": "requested",
        "unborn:gpu:1": "requested",
    }
    assert replicas["w"]["since"] == "2026-01-01T01:00:00Z"  # carried from the first round
    gpu = next(g for g in view["groups"] if g["name"] == "gpu")
    assert (gpu["desired"], gpu["current"], gpu["states"]) == (2, 0, {"requested": 2})
    (entry,) = scaler.fleet()
    assert (entry["name"], entry["gcsReachable"], entry["unmet"]) == ("rc", True, {})

    doc = scaler.history_scenario(KEY)
    assert doc is not None
    assert schedule(parse_scenario(yaml.safe_load(yaml.safe_dump(doc)))).groups["gpu"].launch == 0
    first_doc = scaler.history_scenario(KEY, 1)
    assert first_doc is not None
    assert schedule(parse_scenario(first_doc)).groups["gpu"].launch == 2  # what the first round decided
    assert scaler.history_scenario(KEY, 2) is None


async def test_a_replica_slow_to_start_then_failed_gets_one_event_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = Api(monkeypatch)
    FakeGcs.state = gcs_state()
    events = Events()
    unscheduled = pod("w", "a", phase="Pending", ready=False, created="2026-01-01T00:50:00Z")  # 600 s ago
    source = Source(rc(group("a", replicas=1)), [unscheduled])
    clock = Clock()
    scaler = autoscaler(source, events, clock)
    for _ in range(3):
        await scaler.step(KEY)
        clock.advance(5)
    assert warnings(events) == [
        (
            "ReplicaSlowToStart",
            "group a: replica w has been starting for 600s (scheduling since 2026-01-01T00:50:00Z)",
        )
    ]
    clock.advance(300)  # 900 s: not provisioned in time
    await scaler.step(KEY)
    assert api.patches[-1][-1]["value"] == {"workersToDelete": ["w"]}
    await scaler.step(KEY)
    failed = [m for r, m in warnings(events) if r == "ReplicaFailed"]
    assert failed == [
        "group a: replica w failed (LAUNCH_FAILED): pod not scheduled within 900s: removed, group a backs off"
    ]
    assert "BackingOff" in {r for r, _ in warnings(events)}
    summary = api.cluster_statuses[-1]["autoscaler"]["replicas"]
    assert summary["failed"] == [
        {
            "group": "a",
            "replica": "w",
            "state": "failed",
            "since": "2026-01-01T01:05:15Z",
            "cause": "LAUNCH_FAILED",
            "message": failed[0].split(": ", 2)[2],
        }
    ]


async def test_the_replica_summary_is_in_the_status_and_an_unchanged_one_is_not_written_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = Api(monkeypatch)
    FakeGcs.state = gcs_state(ray.RayNodeState("id-w", ray.NodeStatus.RUNNING, instance_id="w"))
    source = Source(rc(group("a", replicas=1)), [pod("w", "a")])
    clock = Clock()
    scaler = autoscaler(source, clock=clock)
    await scaler.step(KEY)
    (written,) = api.cluster_statuses
    assert written["autoscaler"]["replicas"] == {"counts": {"a": {"ready": 1}}}
    assert source.body is not None
    source.body["status"] = written  # what the API server now holds
    for _ in range(3):
        clock.advance(5)
        await scaler.step(KEY)
    assert len(api.cluster_statuses) == 1


async def test_the_view_holds_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    _, source = token_cluster(monkeypatch, None)
    assert source.body is not None
    source.body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "RAY_AUTH_TOKEN", "value": "s3cret"}
    ]
    scaler = autoscaler(source)
    await scaler.step(KEY)
    assert FakeGcs.dialed == [(HEAD_GCS, "s3cret")]  # the token was read and used
    served = json.dumps([scaler.view(KEY), scaler.fleet(), scaler.history_scenario(KEY)])
    assert HEAD_GCS in served
    assert "s3cret" not in served


async def test_a_cluster_no_longer_autoscaled_leaves_the_view(monkeypatch: pytest.MonkeyPatch) -> None:
    Api(monkeypatch)
    FakeGcs.state = gcs_state()
    source = Source(rc(group("a", replicas=0)))
    scaler = autoscaler(source)
    await scaler.step(KEY)
    assert scaler.view(KEY) is not None
    assert source.body is not None
    source.body["spec"]["enableInTreeAutoscaling"] = False
    scaler.mark(KEY, "RayCluster")
    await scaler.step(KEY)
    assert (scaler.view(KEY), scaler.fleet(), scaler.history_scenario(KEY)) == (None, [], None)
    assert scaler._memory[KEY].served is None


async def test_a_cluster_left_alone_keeps_one_forgotten_memory_until_a_round_uses_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every pod event steps a cluster that is not autoscaled: its memory is forgotten once, then
    kept as it is; once a round has used it, turning autoscaling off forgets it again."""
    _, source = idle_setup(monkeypatch)
    scaler = autoscaler(source)
    await scaler.step(KEY)
    assert scaler._memory[KEY].gcs is not None  # the round dialed the GCS
    assert source.body is not None
    source.body["spec"]["enableInTreeAutoscaling"] = False
    await scaler.step(KEY)
    forgotten = scaler._memory[KEY]
    assert forgotten.gcs is None
    assert forgotten.dormant
    await scaler.step(KEY)
    assert scaler._memory[KEY] is forgotten
    source.body["spec"]["enableInTreeAutoscaling"] = True
    await scaler.step(KEY)
    assert scaler._memory[KEY] is forgotten
    assert not forgotten.dormant
    assert forgotten.gcs is not None
    source.body["spec"]["enableInTreeAutoscaling"] = False
    await scaler.step(KEY)
    again = scaler._memory[KEY]
    assert again is not forgotten
    assert again.gcs is None
    assert again.dormant
