"""GcsClient against an in-process gRPC server that implements AutoscalerStateService.

The fake server (tests/support/fakes.py's FakeGcsServer) decodes requests with the same generated
messages, so these tests check what goes over the wire (method paths, request bytes, auth metadata),
the retry policy and the errors; tests/integration/test_ray_gcs.py checks the same client against a
real Ray head.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from tests.support.fakes import FakeGcsServer
from tests.support.grpcserve import serving
from tests.support.operators import free_port
from tests.support.rayids import NODE_A as NODE

from rayscale.fence import Fenced, WriteFence
from rayscale.ray import client as client_module
from rayscale.ray import debug
from rayscale.ray.client import GcsCallError, GcsClient, GcsUnavailable
from rayscale.ray.model import (
    AutoscalingState,
    DrainReason,
    DrainResult,
    NodeStatus,
    PendingInstanceRequest,
    ResourceDemand,
    ResourceRequest,
)
from rayscale.ray.wire import autoscaler_pb2 as pb
from rayscale.ray.wire import method_path


@pytest.fixture
async def gcs() -> AsyncIterator[FakeGcsServer]:
    fake = FakeGcsServer()
    async with serving(*fake.services()) as fake.address:
        yield fake


def _client(gcs: FakeGcsServer, **kwargs: Any) -> GcsClient:
    kwargs.setdefault("backoff", 0.01)
    kwargs.setdefault("timeout", 5.0)
    return GcsClient(gcs.address, **kwargs)


def test_method_paths() -> None:
    assert method_path("DrainNode") == "/ray.rpc.autoscaler.AutoscalerStateService/DrainNode"
    assert (
        method_path("GetClusterResourceState")
        == "/ray.rpc.autoscaler.AutoscalerStateService/GetClusterResourceState"
    )
    assert (
        method_path("ReportAutoscalingState")
        == "/ray.rpc.autoscaler.AutoscalerStateService/ReportAutoscalingState"
    )
    with pytest.raises(KeyError):
        method_path("GetClusterStatus")  # Ray has it; rayscale does not declare it


async def test_get_cluster_resource_state(gcs: FakeGcsServer) -> None:
    served = pb.ClusterResourceState(
        cluster_resource_state_version=3,
        node_states=[pb.NodeState(node_id=NODE, instance_id="pod-a", status=pb.IDLE, idle_duration_ms=900)],
        pending_resource_requests=[
            pb.ResourceRequestByCount(request=pb.ResourceRequest(resources_bundle={"GPU": 1.0}), count=2)
        ],
    )
    gcs.replies["GetClusterResourceState"] = pb.GetClusterResourceStateReply(cluster_resource_state=served)
    async with _client(gcs) as client:
        state = await client.get_cluster_resource_state()
    assert state.version == 3
    node = state.node_by_instance("pod-a")
    assert node is not None
    assert (node.node_id, node.status, node.idle_duration_ms) == (NODE.hex(), NodeStatus.IDLE, 900)
    assert state.pending_requests == (ResourceDemand(ResourceRequest({"GPU": 1.0}), 2),)
    assert "authorization" not in gcs.calls[0][2]


async def test_drain_node_sends_the_request(gcs: FakeGcsServer) -> None:
    gcs.replies["DrainNode"] = pb.DrainNodeReply(is_accepted=False, rejection_reason_message="no longer idle")
    async with _client(gcs) as client:
        result = await client.drain_node(NODE.hex(), message="idle 61s", deadline_ms=123)
    assert result == DrainResult(accepted=False, rejection_reason="no longer idle")
    (_, request, _) = gcs.calls[0]
    assert request.node_id == NODE
    assert request.reason == pb.DRAIN_NODE_REASON_IDLE_TERMINATION
    assert request.reason_message == "idle 61s"
    assert request.deadline_timestamp_ms == 123


async def test_drain_node_preemption(gcs: FakeGcsServer) -> None:
    async with _client(gcs) as client:
        assert await client.drain_node(NODE.hex(), DrainReason.PREEMPTION) == DrainResult(accepted=True)
    assert gcs.calls[0][1].reason == pb.DRAIN_NODE_REASON_PREEMPTION


async def test_bad_node_id_fails_before_any_call(gcs: FakeGcsServer) -> None:
    async with _client(gcs) as client:
        with pytest.raises(ValueError, match="not a Ray node id"):
            await client.drain_node("pod-a")
    assert gcs.calls == []


async def test_report_autoscaling_state(gcs: FakeGcsServer) -> None:
    state = AutoscalingState(
        last_seen_cluster_resource_state_version=5,
        autoscaler_state_version=9,
        pending_instance_requests=(PendingInstanceRequest("gpu-group", 1, 1_700_000_000),),
        infeasible_resource_requests=(ResourceRequest({"GPU": 1.0}),),
    )
    async with _client(gcs) as client:
        await client.report_autoscaling_state(state)
    [(method, request, _)] = gcs.calls
    assert method == "ReportAutoscalingState"
    sent = request.autoscaling_state
    assert (sent.last_seen_cluster_resource_state_version, sent.autoscaler_state_version) == (5, 9)
    assert [r.ray_node_type_name for r in sent.pending_instance_requests] == ["gpu-group"]
    assert [dict(r.resources_bundle) for r in sent.infeasible_resource_requests] == [{"GPU": 1.0}]


async def test_a_method_ray_does_not_have_is_a_call_error(gcs: FakeGcsServer) -> None:
    gcs.failures["ReportAutoscalingState"] = [grpc.StatusCode.UNIMPLEMENTED]
    async with _client(gcs) as client:
        with pytest.raises(GcsCallError) as caught:
            await client.report_autoscaling_state(AutoscalingState(0, 1))
    assert caught.value.code == "UNIMPLEMENTED"
    assert gcs.count("ReportAutoscalingState") == 1


async def test_request_cluster_resource_constraint(gcs: FakeGcsServer) -> None:
    async with _client(gcs) as client:
        await client.request_cluster_resource_constraint([ResourceDemand(ResourceRequest({"GPU": 1}), 3)])
    request = gcs.calls[0][1]
    [by_count] = request.cluster_resource_constraint.resource_requests
    assert (dict(by_count.request.resources_bundle), by_count.count) == ({"GPU": 1.0}, 3)


async def test_token_is_sent_as_a_bearer_authorization(gcs: FakeGcsServer) -> None:
    async with _client(gcs, token=" s3cret\n") as client:
        await client.get_cluster_resource_state()
        await client.drain_node(NODE.hex())
    assert [metadata.get("authorization") for _, _, metadata in gcs.calls] == ["Bearer s3cret"] * 2


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED])
async def test_transient_errors_are_retried(gcs: FakeGcsServer, code: grpc.StatusCode) -> None:
    gcs.failures["GetClusterResourceState"] = [code, code]
    async with _client(gcs, retries=2) as client:
        state = await client.get_cluster_resource_state()
    assert state.version == 0
    assert gcs.count("GetClusterResourceState") == 3


async def test_retries_run_out(gcs: FakeGcsServer) -> None:
    gcs.failures["DrainNode"] = [grpc.StatusCode.UNAVAILABLE] * 5
    async with _client(gcs, retries=1) as client:
        with pytest.raises(GcsUnavailable) as raised:
            await client.drain_node(NODE.hex())
    assert gcs.count("DrainNode") == 2
    assert raised.value.code == "UNAVAILABLE"
    assert raised.value.method == "DrainNode"
    assert raised.value.address == gcs.address


async def test_other_errors_are_not_retried(gcs: FakeGcsServer) -> None:
    gcs.failures["GetClusterResourceState"] = [grpc.StatusCode.UNAUTHENTICATED]
    async with _client(gcs, retries=3) as client:
        with pytest.raises(GcsCallError) as raised:
            await client.get_cluster_resource_state()
    assert raised.value.code == "UNAUTHENTICATED"
    assert "injected by the test" in raised.value.details
    assert gcs.count("GetClusterResourceState") == 1


async def test_client_timeout_is_unavailable(gcs: FakeGcsServer) -> None:
    gcs.hang = True  # the server answers DEADLINE_EXCEEDED, as when our own deadline passes
    async with _client(gcs, retries=1, timeout=0.5) as client:
        with pytest.raises(GcsUnavailable, match="DEADLINE_EXCEEDED"):
            await client.get_cluster_resource_state()
    assert gcs.count("GetClusterResourceState") == 2


async def test_nothing_listening_is_unavailable() -> None:
    port = free_port()  # nothing listens there
    async with GcsClient(f"127.0.0.1:{port}", retries=1, backoff=0.01, timeout=5) as client:
        with pytest.raises(GcsUnavailable) as raised:
            await client.get_cluster_resource_state()
    assert raised.value.code == "UNAVAILABLE"


async def test_client_recovers_after_failures_and_can_be_closed_twice(gcs: FakeGcsServer) -> None:
    client = _client(gcs, retries=0)
    gcs.failures["GetClusterResourceState"] = [grpc.StatusCode.UNAVAILABLE]
    with pytest.raises(GcsUnavailable):
        await client.get_cluster_resource_state()
    assert (await client.get_cluster_resource_state()).version == 0
    await client.close()
    await client.close()
    # a closed client opens a new channel when used again
    assert (await client.get_cluster_resource_state()).version == 0
    await client.close()


@pytest.mark.parametrize("kwargs", [{"timeout": 0}, {"retries": -1}, {"backoff": -0.1}, {"max_backoff": -1}])
def test_bad_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="timeout"):
        GcsClient("127.0.0.1:1", **kwargs)  # type: ignore[arg-type]


async def test_debug_command_prints_the_state(gcs: FakeGcsServer, capsys: pytest.CaptureFixture[str]) -> None:
    served = pb.ClusterResourceState(node_states=[pb.NodeState(node_id=NODE, instance_id="pod-a")])
    gcs.replies["GetClusterResourceState"] = pb.GetClusterResourceStateReply(cluster_resource_state=served)
    assert await asyncio.to_thread(debug.main, [gcs.address]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["nodes"][0]["instance_id"] == "pod-a"
    assert printed["nodes"][0]["node_id"] == NODE.hex()


async def test_debug_command_reports_errors(gcs: FakeGcsServer, capsys: pytest.CaptureFixture[str]) -> None:
    gcs.failures["GetClusterResourceState"] = [grpc.StatusCode.UNAUTHENTICATED]
    assert await asyncio.to_thread(debug.main, [gcs.address]) == 1
    assert "GcsCallError" in capsys.readouterr().err


async def test_a_closed_write_fence_stops_every_call_that_changes_ray(
    gcs: FakeGcsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fence = WriteFence()
    fence.close()
    monkeypatch.setattr(client_module, "WRITE_FENCE", fence)
    async with _client(gcs) as client:
        with pytest.raises(Fenced, match="DrainNode"):
            await client.drain_node(NODE.hex())
        with pytest.raises(Fenced, match="ReportAutoscalingState"):
            await client.report_autoscaling_state(AutoscalingState(1, 1))
        with pytest.raises(Fenced, match="RequestClusterResourceConstraint"):
            await client.request_cluster_resource_constraint([])
        await client.get_cluster_resource_state()  # reads still go
    assert [name for name, _, _ in gcs.calls] == ["GetClusterResourceState"]
