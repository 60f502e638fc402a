"""The autoscaler loop with the API and the GCS faked: patch, re-plan on conflict, drain, backoff, status."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from raycluster_factory import cluster, container, group, pod

from rayscale.autoscaler import loop
from rayscale.autoscaler.loop import Autoscaler, AutoscalerConfig
from rayscale.kube import ops
from rayscale.ray import model as ray
from rayscale.ray.client import GcsUnavailable

KEY = ("ns", "rc")
IDLE_HOUR = 3_600_000


def gpu_group(replicas: int = 0) -> dict[str, Any]:
    g = group("gpu", replicas=replicas, max_replicas=4)
    g["template"]["spec"]["containers"] = [container("ray-worker", **{"nvidia.com/gpu": "1"})]
    return g


def rc(*groups: dict[str, Any], rv: str = "42") -> dict[str, Any]:
    body = cluster(*groups, autoscaling=True)
    body["metadata"]["resourceVersion"] = rv
    return body


def rrr(gpus: int, *, generation: int = 1, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "reserve", "namespace": "ns", "generation": generation},
        "spec": {"clusterName": "rc", "bundles": [{"resources": {"GPU": 1}, "count": gpus}]},
        "status": status or {},
    }


class Source:
    def __init__(
        self, body: dict[str, Any] | None, pods: Sequence[dict[str, Any]] = (), requests: Sequence[Any] = ()
    ):
        self.body, self._pods, self._requests = body, list(pods), list(requests)

    def cluster(self, key: tuple[str, str]) -> Mapping[str, Any] | None:
        return self.body

    def pods(self, key: tuple[str, str]) -> Sequence[Mapping[str, Any]]:
        return self._pods

    def requests(self, key: tuple[str, str]) -> Sequence[Mapping[str, Any]]:
        return self._requests


class Events:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str]] = []

    def post(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, action: str = "") -> None:
        self.posted.append((type_, reason, message))


class FakeGcs:
    state: ray.ClusterState | None = None  # None: unreachable
    accept: bool = True
    drained: list[str] = []

    def __init__(self, address: str, **_: Any) -> None:
        self.address = address

    async def get_cluster_resource_state(self) -> ray.ClusterState:
        if FakeGcs.state is None:
            raise GcsUnavailable(self.address, "GetClusterResourceState", "UNAVAILABLE", "down")
        return FakeGcs.state

    async def drain_node(self, node_id: str, **_: Any) -> ray.DrainResult:
        FakeGcs.drained.append(node_id)
        return ray.DrainResult(accepted=FakeGcs.accept, rejection_reason="" if FakeGcs.accept else "busy")

    async def close(self) -> None:
        pass


class Api:
    """What the loop sends through rayscale.kube.ops."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, conflicts: int = 0, fresh: dict[str, Any] | None = None
    ):
        self.patches: list[list[dict[str, Any]]] = []
        self.statuses: list[tuple[str, dict[str, Any]]] = []
        self.cluster_statuses: list[dict[str, Any]] = []  # status.autoscaler patches
        self.conflicts = conflicts
        self.fresh = fresh

        async def json_patch(api: Any, ns: str, name: str, patch: list[dict[str, Any]]) -> None:
            self.patches.append(patch)
            if self.conflicts:
                self.conflicts -= 1
                raise ops.KubeError("test failed", 422)

        async def get(api: Any, ns: str, name: str) -> dict[str, Any] | None:
            return self.fresh

        async def status(api: Any, ns: str, name: str, patch: dict[str, Any]) -> bool:
            self.statuses.append((name, patch["status"]))
            return True

        monkeypatch.setattr(ops, "json_patch_raycluster", json_patch)
        monkeypatch.setattr(ops, "get_raycluster", get)

        async def cluster_status(api: Any, ns: str, name: str, patch: dict[str, Any]) -> bool:
            self.cluster_statuses.append(patch["status"])
            return True

        monkeypatch.setattr(ops, "patch_rayresourcerequest_status", status)
        monkeypatch.setattr(ops, "patch_raycluster_status", cluster_status)
        monkeypatch.setattr(loop, "GcsClient", FakeGcs)
        FakeGcs.state, FakeGcs.accept, FakeGcs.drained = None, True, []


def autoscaler(source: Source, events: Events | None = None) -> Autoscaler:
    return Autoscaler(None, source, events or Events(), AutoscalerConfig(interval=5))  # type: ignore[arg-type]


async def test_request_scales_only_the_gpu_group_and_is_pending_while_it_launches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = Api(monkeypatch)
    events = Events()
    source = Source(rc(group("cpu", replicas=0), gpu_group()), requests=[rrr(3)])
    assert await autoscaler(source, events).step(KEY) == 5
    assert api.patches == [
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
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
    api = Api(monkeypatch, conflicts=1, fresh=fresh)
    source = Source(rc(group("cpu", replicas=0), gpu_group()), requests=[rrr(3)])
    assert await autoscaler(source).step(KEY) == 5
    assert [p[0]["value"] for p in api.patches] == ["42", "43"]
    assert api.patches[1][1] == {"op": "replace", "path": "/spec/workerGroupSpecs/1/replicas", "value": 3}


def idle_setup(monkeypatch: pytest.MonkeyPatch) -> tuple[Api, Source]:
    api = Api(monkeypatch)
    body = rc(group("a", replicas=1))
    body["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": 60}
    FakeGcs.state = ray.ClusterState(
        version=1,
        session_name="s",
        nodes=(ray.NodeState("id-w", ray.NodeStatus.IDLE, instance_id="w", idle_duration_ms=IDLE_HOUR),),
    )
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


async def test_launch_failure_backs_the_group_off(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(monkeypatch)
    events = Events()
    source = Source(rc(group("a", replicas=1)), [pod("w", "a", phase="Pending", ready=False)])
    scaler = autoscaler(source, events)
    await scaler.step(KEY)
    (patch,) = api.patches
    assert patch[-1]["value"] == {"workersToDelete": ["w"]}
    assert scaler._backoff[KEY].active() == {"a"}
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
