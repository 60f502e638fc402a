"""What the autoscaler loop reports (API and GCS faked): status.autoscaler, Events, metrics."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support.builders import gpu_group, group, pod, rc, rrr
from tests.support.fakes import KEY, FakeGcs, autoscaler
from tests.support.fakes import EventLog as Events
from tests.support.fakes import FakeApi as Api
from tests.support.fakes import FakeSource as Source

from rayscale.autoscaler.loop import Autoscaler
from rayscale.common import labels as L
from rayscale.controller.status import status_patch
from rayscale.ray import model as ray

LABELS = {"namespace": "ns", "cluster": "rc"}


def sample(scaler: Autoscaler, name: str, **labels: str) -> float | None:
    return scaler.metrics.registry.get_sample_value(name, {**LABELS, **labels})


def reasons(events: Events, reason: str) -> list[str]:
    return [message for _, r, message in events.posted if r == reason]


def written(api: Api, source: Source) -> dict[str, Any]:
    """The latest status.autoscaler patch, also applied to the source (as the watch would)."""
    status = api.cluster_statuses[-1]["autoscaler"]
    source.body = copy.deepcopy(source.body)
    assert source.body is not None
    source.body.setdefault("status", {})["autoscaler"] = status
    return dict(status)


async def test_status_is_written_when_it_changes_and_unmet_demand_is_posted_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = Api(monkeypatch)
    events = Events()
    source = Source(rc(group("cpu", replicas=0), gpu_group(replicas=4)), requests=[rrr(10)])
    scaler = autoscaler(source, events)
    await scaler.step(KEY)
    status = written(api, source)
    assert status["groups"] == [
        {"name": "cpu", "current": 0, "desired": 0, "pending": 0, "idle": 0},
        {"name": "gpu", "current": 4, "desired": 4, "pending": 4, "idle": 0},
    ]
    (unmet,) = status["unmetDemand"]
    assert (unmet["resources"], unmet["count"], unmet["reason"]) == ({"GPU": 1}, 10, "MAX_REPLICAS")
    assert status["gcs"]["reachable"] is False
    assert "UNAVAILABLE" in status["gcs"]["lastError"]
    for _ in range(3):
        await scaler.step(KEY)
    assert len(api.cluster_statuses) == 1  # unchanged: no write
    (message,) = reasons(events, "UnmetDemand")
    assert "10 x {GPU: 1}" in message
    assert "maxReplicas" in message
    assert sample(scaler, "rayscale_autoscaler_unmet_demand", reason="MAX_REPLICAS") == 10
    assert sample(scaler, "rayscale_autoscaler_pending_demand") == 10

    source._requests = [rrr(4, generation=2)]
    await scaler.step(KEY)
    status = written(api, source)
    assert status["unmetDemand"] == []
    assert len(reasons(events, "UnmetDemand")) == 1
    assert sample(scaler, "rayscale_autoscaler_unmet_demand", reason="MAX_REPLICAS") is None


async def test_a_restarted_autoscaler_does_not_post_the_same_unmet_demand_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = Api(monkeypatch)
    source = Source(rc(gpu_group(replicas=4)), requests=[rrr(10)])
    await autoscaler(source).step(KEY)
    written(api, source)
    events = Events()
    await autoscaler(source, events).step(KEY)
    assert reasons(events, "UnmetDemand") == []


async def test_scaling_up_counts_nodes_and_status_shows_desired(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(monkeypatch)
    source = Source(rc(group("cpu", replicas=0), gpu_group()), requests=[rrr(3)])
    scaler = autoscaler(source)
    await scaler.step(KEY)
    assert sample(scaler, "rayscale_autoscaler_scaled_up_total", group="gpu") == 3
    gpu = written(api, source)["groups"][1]
    assert (gpu["current"], gpu["desired"]) == (0, 3)
    assert (
        scaler.metrics.registry.get_sample_value("rayscale_autoscaler_decision_duration_seconds_count") == 1
    )


async def test_gcs_events_on_transitions_once_the_head_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(monkeypatch)
    events = Events()
    body = rc(group("a", replicas=1))
    source = Source(body, [pod("w", "a")])
    scaler = autoscaler(source, events)
    await scaler.step(KEY)
    assert reasons(events, "GcsUnreachable") == []  # no head running yet: the GCS may be starting
    source._pods = [pod("h", L.HEAD_GROUP), pod("w", "a")]
    await scaler.step(KEY)
    await scaler.step(KEY)
    (message,) = reasons(events, "GcsUnreachable")
    assert "cannot be reached" in message
    assert sample(scaler, "rayscale_autoscaler_gcs_errors_total") == 3
    assert sample(scaler, "rayscale_autoscaler_gcs_reachable") == 0
    down = written(api, source)

    FakeGcs.state = ray.ClusterState(version=1, session_name="s", nodes=())
    await scaler.step(KEY)
    assert len(reasons(events, "GcsReachable")) == 1
    patch = api.cluster_statuses[-1]["autoscaler"]
    assert patch["gcs"]["reachable"] is True
    assert patch["gcs"]["lastError"] is None  # removed by the merge patch
    contact = datetime.strptime(patch["gcs"]["lastContactTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - contact).total_seconds()) < 600
    assert down["gcs"]["reachable"] is False
    assert sample(scaler, "rayscale_autoscaler_gcs_reachable") == 1


async def test_forget_removes_the_series_and_turning_autoscaling_off_clears_the_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = Api(monkeypatch)
    source = Source(rc(gpu_group(replicas=4)), requests=[rrr(10)])
    scaler = autoscaler(source)
    await scaler.step(KEY)
    written(api, source)
    assert sample(scaler, "rayscale_autoscaler_gcs_reachable") == 0
    assert source.body is not None
    source.body["spec"]["enableInTreeAutoscaling"] = False
    await scaler.step(KEY)
    assert api.cluster_statuses[-1] == {"autoscaler": None}
    for name in ("rayscale_autoscaler_gcs_reachable", "rayscale_autoscaler_pending_demand"):
        assert sample(scaler, name) is None, name
    assert sample(scaler, "rayscale_autoscaler_unmet_demand", reason="MAX_REPLICAS") is None

    writes = len(api.cluster_statuses)
    source.body = None  # deleted: nothing left to clear
    await scaler.step(KEY)
    assert len(api.cluster_statuses) == writes


def test_the_controller_never_writes_status_autoscaler() -> None:
    now = datetime(2026, 5, 1, tzinfo=UTC)
    stale = {"state": "ready", "autoscaler": {"unmetDemand": []}}
    new = {"state": "ready", "readyWorkerReplicas": 1, "autoscaler": {"unmetDemand": []}}
    assert "autoscaler" not in status_patch(stale, new, now=now)["status"]
    assert "autoscaler" not in status_patch(stale, {"state": "ready"}, now=now)["status"]  # not nulled
