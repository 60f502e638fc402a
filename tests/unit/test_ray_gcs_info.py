"""The GCS info services (nodes, jobs, actors, placement groups) and the raylet's resize call.

The converters are checked on messages built with rayscale's generated bindings; the clients
against an in-process gRPC server that serves the same services (tests/support/fakes.py's
FakeGcsServer), so the method paths, request bytes, token and error handling are what goes over
the wire. tests/integration/test_ray_gcs.py checks the same calls against a real Ray head.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
from tests.support.fakes import FakeGcsServer
from tests.support.grpcserve import serving
from tests.support.rayids import NODE_A, NODE_B

from rayscale.ray import convert, encode
from rayscale.ray.client import GcsCallError, GcsClient, GcsUnavailable
from rayscale.ray.model import ActorInfo, JobInfo, NodeInfo, PlacementGroupInfo
from rayscale.ray.raylet import RayletClient
from rayscale.ray.wire import (
    ACTOR_INFO,
    JOB_INFO,
    NODE_INFO,
    NODE_MANAGER,
    PLACEMENT_GROUP_INFO,
    SERVICE,
    SERVICES,
    method_path,
)
from rayscale.ray.wire import common_pb2 as common_pb
from rayscale.ray.wire import gcs_pb2 as gcs_pb
from rayscale.ray.wire import gcs_service_pb2 as service_pb
from rayscale.ray.wire import node_manager_pb2 as raylet_pb

JOB = bytes.fromhex("02000000")
ACTOR = bytes(range(16))
PG = bytes(range(200, 218))


# ---- method paths ----


def test_method_paths_come_from_each_service() -> None:
    assert method_path("DrainNode") == "/ray.rpc.autoscaler.AutoscalerStateService/DrainNode"
    assert method_path("DrainNode", SERVICE) == method_path("DrainNode")
    assert method_path("GetAllNodeInfo", NODE_INFO) == "/ray.rpc.NodeInfoGcsService/GetAllNodeInfo"
    assert method_path("GetAllJobInfo", JOB_INFO) == "/ray.rpc.JobInfoGcsService/GetAllJobInfo"
    assert method_path("GetAllActorInfo", ACTOR_INFO) == "/ray.rpc.ActorInfoGcsService/GetAllActorInfo"
    assert (
        method_path("GetAllPlacementGroup", PLACEMENT_GROUP_INFO)
        == "/ray.rpc.PlacementGroupInfoGcsService/GetAllPlacementGroup"
    )
    assert (
        method_path("ResizeLocalResourceInstances", NODE_MANAGER)
        == "/ray.rpc.NodeManagerService/ResizeLocalResourceInstances"
    )
    with pytest.raises(KeyError):
        method_path("GetAllNodeInfo")  # not a method of the AutoscalerStateService
    assert len({s.full_name for s in SERVICES}) == len(SERVICES) == 7


# ---- proto -> model ----


def test_node_info() -> None:
    msg = gcs_pb.GcsNodeInfo(
        node_id=NODE_A,
        node_manager_address="10.0.0.7",
        node_manager_port=40123,
        state=gcs_pb.GcsNodeInfo.ALIVE,
        resources_total={"CPU": 4.0, "GPU": 1.0, "memory": 8.0 * 1024**3},
        instance_id="raycluster-gpu-worker-x7k2p",
        labels={"ray.io/node-group": "gpu"},
    )
    assert convert.node_info(msg) == NodeInfo(
        node_id=NODE_A.hex(),
        alive=True,
        address="10.0.0.7",
        raylet_port=40123,
        instance_id="raycluster-gpu-worker-x7k2p",
        total_resources={"CPU": 4.0, "GPU": 1.0, "memory": 8.0 * 1024**3},
        labels={"ray.io/node-group": "gpu"},
        is_head=False,
    )
    assert convert.node_info(msg).raylet_address == "10.0.0.7:40123"


def test_dead_head_without_instance_id() -> None:
    msg = gcs_pb.GcsNodeInfo(
        node_id=NODE_B, node_manager_address="fd00::7", state=gcs_pb.GcsNodeInfo.DEAD, is_head_node=True
    )
    node = convert.node_info(msg)
    assert (node.alive, node.is_head, node.instance_id) == (False, True, None)
    assert node.raylet_address == "[fd00::7]:0"


def test_job_info_of_a_submitted_job() -> None:
    msg = gcs_pb.JobTableData(
        job_id=JOB,
        is_dead=False,
        config=common_pb.JobConfig(metadata={convert.JOB_SUBMISSION_ID: "raysubmit_abc", "other": "x"}),
        entrypoint="python train.py --epochs 3",
        job_info=gcs_pb.JobsAPIInfo(status="RUNNING", entrypoint="python train.py", driver_node_id="ff"),
        driver_address=common_pb.Address(node_id=NODE_A),
    )
    assert convert.job_info(msg) == JobInfo(
        job_id="02000000",
        is_dead=False,
        submission_id="raysubmit_abc",
        driver_node_id=NODE_A.hex(),  # the driver's own address wins
        entrypoint="python train.py --epochs 3",
        status="RUNNING",
    )


def test_job_info_falls_back_to_the_submission_record() -> None:
    msg = gcs_pb.JobTableData(
        job_id=JOB,
        is_dead=True,
        job_info=gcs_pb.JobsAPIInfo(
            status="SUCCEEDED", entrypoint="python train.py", driver_node_id=NODE_B.hex().upper()
        ),
    )
    job = convert.job_info(msg)
    assert (job.driver_node_id, job.entrypoint, job.status) == (NODE_B.hex(), "python train.py", "SUCCEEDED")
    assert job.submission_id is None


def test_job_info_of_a_driver_started_by_hand() -> None:
    msg = gcs_pb.JobTableData(job_id=JOB, entrypoint="python -c ...")
    assert convert.job_info(msg) == JobInfo(
        job_id="02000000",
        is_dead=False,
        submission_id=None,
        driver_node_id=None,
        entrypoint="python -c ...",
        status=None,
    )
    # an empty submission record (present, no status) is no status
    msg.job_info.SetInParent()
    assert convert.job_info(msg).status is None


def test_actor_info() -> None:
    msg = gcs_pb.ActorTableData(
        actor_id=ACTOR,
        job_id=JOB,
        state=gcs_pb.ActorTableData.ALIVE,
        address=common_pb.Address(node_id=NODE_B),
        is_detached=True,
        name="keeper",
        class_name="Keeper",
        node_id=NODE_A,
    )
    assert convert.actor_info(msg) == ActorInfo(
        actor_id=ACTOR.hex(),
        state="ALIVE",
        node_id=NODE_A.hex(),  # the actor's node_id field wins over its worker's address
        job_id="02000000",
        name="keeper",
        class_name="Keeper",
        detached=True,
    )


@pytest.mark.parametrize(
    ("node_id", "address", "expected"),
    [
        (None, NODE_B, NODE_B.hex()),  # only the worker's address says
        (None, b"", None),  # not placed yet
        (b"", b"", None),
    ],
)
def test_actor_node(node_id: bytes | None, address: bytes, expected: str | None) -> None:
    msg = gcs_pb.ActorTableData(
        actor_id=ACTOR,
        state=gcs_pb.ActorTableData.PENDING_CREATION,
        address=common_pb.Address(node_id=address),
    )
    if node_id is not None:
        msg.node_id = node_id
    actor = convert.actor_info(msg)
    assert (actor.node_id, actor.state, actor.detached, actor.name) == (
        expected,
        "PENDING_CREATION",
        False,
        "",
    )


def test_actor_states_are_rays() -> None:
    assert convert.ACTOR_STATES == ("DEPENDENCIES_UNREADY", "PENDING_CREATION", "ALIVE", "RESTARTING", "DEAD")
    for number, name in enumerate(convert.ACTOR_STATES):
        state = gcs_pb.ActorTableData.ActorState.Value(name)
        assert state == number
        assert convert.actor_info(gcs_pb.ActorTableData(state=state)).state == name
    unknown = gcs_pb.ActorTableData()
    unknown.ParseFromString(b"\x30\x09")  # field 6 (state) = 9: a state a newer Ray might add
    assert convert.actor_info(unknown).state == "UNKNOWN_9"


def test_placement_group_info() -> None:
    msg = gcs_pb.PlacementGroupTableData(
        placement_group_id=PG,
        name="train",
        bundles=[
            common_pb.Bundle(node_id=NODE_A),
            common_pb.Bundle(node_id=NODE_B),
            common_pb.Bundle(node_id=NODE_A),
        ],
        state=gcs_pb.PlacementGroupTableData.CREATED,
        creator_job_id=JOB,
        is_detached=True,
    )
    assert convert.placement_group_info(msg) == PlacementGroupInfo(
        pg_id=PG.hex(),
        state="CREATED",
        node_ids=(NODE_A.hex(), NODE_B.hex(), NODE_A.hex()),
        job_id="02000000",
        detached=True,
        name="train",
    )


def test_pending_placement_group_has_no_nodes() -> None:
    msg = gcs_pb.PlacementGroupTableData(
        placement_group_id=PG, bundles=[common_pb.Bundle(), common_pb.Bundle()], creator_job_id=JOB
    )
    pg = convert.placement_group_info(msg)
    assert (pg.state, pg.node_ids, pg.detached, pg.name) == ("PENDING", (), False, "")


def test_placement_group_states_are_rays() -> None:
    names = gcs_pb.PlacementGroupTableData.PlacementGroupState.keys()
    assert names == ["PENDING", "PREPARED", "CREATED", "REMOVED", "RESCHEDULING"]
    for name in names:
        state = gcs_pb.PlacementGroupTableData.PlacementGroupState.Value(name)
        assert convert.placement_group_info(gcs_pb.PlacementGroupTableData(state=state)).state == name


# ---- model -> proto ----


def test_node_info_request() -> None:
    assert not encode.node_info_request(alive_only=False).HasField("state_filter")
    request = encode.node_info_request(alive_only=True)
    assert request.HasField("state_filter")
    assert request.state_filter == gcs_pb.GcsNodeInfo.ALIVE


def test_job_info_request_skips_only_the_running_tasks_check() -> None:
    request = encode.job_info_request()
    assert request.HasField("skip_submission_job_info_field")
    assert not request.skip_submission_job_info_field
    assert request.skip_is_running_tasks_field


def test_actor_info_request() -> None:
    assert not encode.actor_info_request(None).HasField("filters")
    request = encode.actor_info_request("ALIVE")
    assert request.filters.HasField("state")
    assert request.filters.state == gcs_pb.ActorTableData.ALIVE
    # DEPENDENCIES_UNREADY is 0, and still a filter: the field is sent
    assert encode.actor_info_request("DEPENDENCIES_UNREADY").filters.HasField("state")
    with pytest.raises(ValueError, match="not an actor state: 'alive'"):
        encode.actor_info_request("alive")


def test_resize_request() -> None:
    request = encode.resize_request({"rayscale.io/vc/team-a": 4, "CPU": 2.5, "rayscale.io/vc/old": 0})
    assert dict(request.resources) == {"rayscale.io/vc/team-a": 4.0, "CPU": 2.5, "rayscale.io/vc/old": 0.0}


@pytest.mark.parametrize(
    ("resources", "error"),
    [
        ({"rayscale.io/vc/a": -1.0}, "negative"),
        ({"rayscale.io/vc/a": math.nan}, "not finite"),
        ({"rayscale.io/vc/a": math.inf}, "not finite"),
        ({"": 1.0}, "empty resource name"),
    ],
)
def test_resize_request_refuses(resources: dict[str, float], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        encode.resize_request(resources)


# ---- the clients against a fake GCS and raylet ----


@pytest.fixture
async def server() -> AsyncIterator[FakeGcsServer]:
    fake = FakeGcsServer()
    async with serving(*fake.services()) as fake.address:
        yield fake


async def test_get_all_node_info(server: FakeGcsServer) -> None:
    server.replies["GetAllNodeInfo"] = service_pb.GetAllNodeInfoReply(
        node_info_list=[
            gcs_pb.GcsNodeInfo(node_id=NODE_A, node_manager_port=1, is_head_node=True),
            gcs_pb.GcsNodeInfo(node_id=NODE_B, state=gcs_pb.GcsNodeInfo.DEAD, instance_id="pod-b"),
        ]
    )
    async with GcsClient(server.address) as gcs:
        nodes = await gcs.get_all_node_info()
        await gcs.get_all_node_info(alive_only=True)
    assert [(n.node_id, n.alive, n.is_head, n.instance_id) for n in nodes] == [
        (NODE_A.hex(), True, True, None),
        (NODE_B.hex(), False, False, "pod-b"),
    ]
    assert [r.HasField("state_filter") for _, r, _ in server.calls] == [False, True]


async def test_get_all_job_actor_and_placement_group_info(server: FakeGcsServer) -> None:
    server.replies["GetAllJobInfo"] = service_pb.GetAllJobInfoReply(
        job_info_list=[gcs_pb.JobTableData(job_id=JOB, is_dead=True)]
    )
    server.replies["GetAllActorInfo"] = service_pb.GetAllActorInfoReply(
        actor_table_data=[gcs_pb.ActorTableData(actor_id=ACTOR, job_id=JOB, state=gcs_pb.ActorTableData.DEAD)]
    )
    server.replies["GetAllPlacementGroup"] = service_pb.GetAllPlacementGroupReply(
        placement_group_table_data=[gcs_pb.PlacementGroupTableData(placement_group_id=PG, creator_job_id=JOB)]
    )
    async with GcsClient(server.address) as gcs:
        [job] = await gcs.get_all_job_info()
        [actor] = await gcs.get_all_actor_info(state="DEAD")
        [pg] = await gcs.get_all_placement_groups()
    assert (job.job_id, job.is_dead) == ("02000000", True)
    assert (actor.actor_id, actor.state) == (ACTOR.hex(), "DEAD")
    assert (pg.pg_id, pg.state, pg.job_id) == (PG.hex(), "PENDING", "02000000")
    [(_, job_request, _), (_, actor_request, _), _] = server.calls
    assert job_request.skip_is_running_tasks_field
    assert actor_request.filters.state == gcs_pb.ActorTableData.DEAD


@pytest.mark.parametrize(
    ("call", "method"),
    [
        (lambda gcs: gcs.get_all_node_info(), "GetAllNodeInfo"),
        (lambda gcs: gcs.get_all_job_info(), "GetAllJobInfo"),
        (lambda gcs: gcs.get_all_actor_info(), "GetAllActorInfo"),
        (lambda gcs: gcs.get_all_placement_groups(), "GetAllPlacementGroup"),
    ],
)
async def test_an_error_in_the_reply_status_is_a_call_error(
    server: FakeGcsServer, call: Callable[[GcsClient], Any], method: str
) -> None:
    # the GCS answers gRPC OK and puts its own error (Ray's status code) in the reply
    reply_type = FakeGcsServer.METHODS[method].reply
    server.replies[method] = reply_type(status=service_pb.GcsStatus(code=17, message="not found"))
    async with GcsClient(server.address, retries=3) as gcs:
        with pytest.raises(GcsCallError) as raised:
            await call(gcs)
    assert (raised.value.code, raised.value.details, raised.value.method) == (
        "GCS_STATUS_17",
        "not found",
        method,
    )
    assert str(raised.value).startswith(f"GCS {server.address}: {method} failed")
    assert len(server.calls) == 1  # not retried


async def test_resize_local_resources(server: FakeGcsServer) -> None:
    server.replies["ResizeLocalResourceInstances"] = raylet_pb.ResizeLocalResourceInstancesReply(
        total_resources={"CPU": 4.0, "rayscale.io/vc/team-a": 2.0}
    )
    async with RayletClient(server.address, token="s3cret") as raylet:
        totals = await raylet.resize_local_resources({"rayscale.io/vc/team-a": 2})
    assert totals == {"CPU": 4.0, "rayscale.io/vc/team-a": 2.0}
    [(method, request, metadata)] = server.calls
    assert method == "ResizeLocalResourceInstances"
    assert dict(request.resources) == {"rayscale.io/vc/team-a": 2.0}
    assert metadata["authorization"] == "Bearer s3cret"


async def test_raylet_errors_and_retries(server: FakeGcsServer) -> None:
    server.failures["ResizeLocalResourceInstances"] = [grpc.StatusCode.UNAVAILABLE] * 2 + [
        grpc.StatusCode.ABORTED  # what a 2.60 raylet answers for GPU (a unit-instance resource)
    ]
    async with RayletClient(server.address, retries=1, backoff=0.01) as raylet:
        with pytest.raises(GcsUnavailable) as unavailable:
            await raylet.resize_local_resources({"GPU": 2})
        with pytest.raises(GcsCallError) as refused:
            await raylet.resize_local_resources({"GPU": 2})
        with pytest.raises(ValueError, match="negative"):
            await raylet.resize_local_resources({"GPU": -1})
    assert (unavailable.value.peer, unavailable.value.code) == ("raylet", "UNAVAILABLE")
    assert str(refused.value).startswith(
        f"raylet {server.address}: ResizeLocalResourceInstances failed: ABORTED"
    )
    assert len(server.calls) == 3
