"""Job submissions as Ray's job manager keeps them in the GCS's internal key-value store.

The parser is checked on records Ray 2.60 wrote for real submissions (tests/unit/data/
ray_job_submissions_2.60.json: how they were made is in the file); GcsClient's reads against an
in-process gRPC server that serves ``InternalKVGcsService`` as the GCS does (a missing key of
InternalKVGet is the reply status NotFound, 17; InternalKVKeys returns whole keys; InternalKVMultiGet
leaves missing keys out). tests/integration/test_ray_jobs.py reads a real GCS.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from tests.support.grpcserve import serving

from rayscale.ray import convert
from rayscale.ray.client import GCS_NOT_FOUND, GcsCallError, GcsClient
from rayscale.ray.model import SubmissionInfo
from rayscale.ray.wire import INTERNAL_KV, method_path
from rayscale.ray.wire import gcs_service_pb2 as service_pb

DATA = json.loads((Path(__file__).parent / "data" / "ray_job_submissions_2.60.json").read_text())
RECORDS: dict[str, str] = DATA["records"]
NS = b"job"


def record(name: str) -> str:
    return RECORDS[name]


# ---- the layout ----


def test_layout_is_ray_2_60s() -> None:
    assert convert.SUBMISSION_NAMESPACE == DATA["namespace"].encode() == NS
    assert DATA["key_prefix"].encode() == convert.SUBMISSION_KEY_PREFIX
    assert convert.submission_key("rayjob-x7k2p") == b"_ray_internal_job_info_rayjob-x7k2p"
    assert convert.submission_id_of(b"_ray_internal_job_info_rayjob-x7k2p") == "rayjob-x7k2p"
    assert convert.submission_id_of(b"head_node_id") is None  # Ray keeps it in the namespace too


# ---- Ray's JSON -> SubmissionInfo ----


def test_every_recorded_status_parses() -> None:
    for name, value in RECORDS.items():
        info = convert.submission_info(value)
        assert info.status == name.rpartition(":")[2], name
        assert info.start_time_ms > 1_700_000_000_000  # Unix ms
        assert info.terminal == (info.status in ("STOPPED", "SUCCEEDED", "FAILED"))
        assert (info.end_time_ms >= info.start_time_ms) if info.terminal else info.end_time_ms == 0


def test_pending_and_running() -> None:
    pending = convert.submission_info(record("rec-pending:PENDING"))
    assert pending == SubmissionInfo(
        status="PENDING",
        entrypoint="echo hi",
        message="Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, "
        "custom resources) to become available.",
        start_time_ms=1795906535253,
    )
    assert not pending.terminal
    running = convert.submission_info(record("rec-succeeded:RUNNING"))
    assert running == SubmissionInfo(
        status="RUNNING",
        entrypoint="python -c \"import time; time.sleep(4); print('done')\"",
        message="Job is currently running.",
        start_time_ms=1795906516481,
        metadata={"owner": "rayscale"},
    )


def test_succeeded_stopped_and_failed() -> None:
    succeeded = convert.submission_info(record("rec-succeeded:SUCCEEDED"))
    assert (succeeded.message, succeeded.error_type, succeeded.driver_exit_code) == (
        "Job finished successfully.",
        "",
        0,
    )
    assert succeeded.end_time_ms == 1795906523307
    stopped = convert.submission_info(record("rec-stopped:STOPPED"))
    assert (stopped.message, stopped.driver_exit_code, stopped.metadata) == (
        "Job was intentionally stopped.",
        None,
        {},
    )
    failed = convert.submission_info(record("rec-failed:FAILED"))
    assert failed.error_type == "JOB_ENTRYPOINT_COMMAND_ERROR"
    assert failed.driver_exit_code == 3
    assert failed.message.startswith("Job entrypoint command failed with exit code 3")
    assert failed.message.endswith("boom\n")  # the driver's last log lines
    assert failed.terminal


def test_failures_before_the_driver_ran() -> None:
    refused = convert.submission_info(record("rec-badenv4:FAILED"))
    assert refused.error_type == "JOB_SUPERVISOR_ACTOR_START_FAILURE"
    assert "runtime_env['env_vars'] must be of type Dict[str, str]" in refused.message
    assert refused.driver_exit_code is None
    setup = convert.submission_info(record("rec-envsetup:FAILED"))
    assert setup.error_type == "RUNTIME_ENV_SETUP_FAILURE"
    assert setup.message.startswith("runtime_env setup failed")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("not json", "Expecting value"),
        (b"\xff", "utf-8"),
        ("[1, 2]", "a JSON object expected, not list"),
        ('{"entrypoint": "x"}', "without a status"),
        ('{"status": 3}', "status is 3, not a string"),
        ('{"status": "RUNNING", "start_time": "soon"}', "start_time is 'soon', not a number"),
        ('{"status": "RUNNING", "start_time": true}', "not a number"),
        ('{"status": "RUNNING", "metadata": [1]}', r"metadata is \[1\], not an object"),
        ('{"status": "FAILED", "driver_exit_code": 1.5}', "driver_exit_code is 1.5, not an integer"),
    ],
)
def test_what_is_not_a_record(value: str | bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        convert.submission_info(value)


def test_minimal_and_newer_records() -> None:
    # what Ray always writes is a status; fields a newer Ray adds are ignored
    assert convert.submission_info(b'{"status": "PENDING", "new_field": {"x": 1}}') == SubmissionInfo(
        status="PENDING", entrypoint=""
    )
    float_times = convert.submission_info('{"status": "RUNNING", "start_time": 1.7e12, "metadata": null}')
    assert (float_times.start_time_ms, float_times.metadata) == (1_700_000_000_000, {})


# ---- GcsClient against a stand-in InternalKVGcsService ----


class FakeKV:
    """The GCS's internal KV: values by (namespace, key); every call recorded."""

    def __init__(self) -> None:
        self.store: dict[tuple[bytes, bytes], bytes] = {}
        self.calls: list[tuple[str, Message]] = []
        self.vanish_before_multiget: set[bytes] = set()  # deleted between Keys and MultiGet
        self.status = service_pb.GcsStatus()  # the reply status of every call

    def put(self, submission_id: str, value: str | bytes, namespace: bytes = NS) -> None:
        raw = value.encode() if isinstance(value, str) else value
        self.store[(namespace, convert.submission_key(submission_id))] = raw

    def get(self, request: service_pb.InternalKVGetRequest) -> service_pb.InternalKVGetReply:
        value = self.store.get((request.namespace, request.key))
        if value is None:
            missing = service_pb.GcsStatus(code=GCS_NOT_FOUND, message="Failed to find the key")
            return service_pb.InternalKVGetReply(status=missing)
        return service_pb.InternalKVGetReply(status=self.status, value=value)

    def keys(self, request: service_pb.InternalKVKeysRequest) -> service_pb.InternalKVKeysReply:
        found = [k for ns, k in self.store if ns == request.namespace and k.startswith(request.prefix)]
        return service_pb.InternalKVKeysReply(status=self.status, results=found)

    def multi_get(self, request: service_pb.InternalKVMultiGetRequest) -> service_pb.InternalKVMultiGetReply:
        for key in self.vanish_before_multiget:
            self.store.pop((request.namespace, key), None)
        entries = [
            service_pb.MapFieldEntry(key=k, value=self.store[(request.namespace, k)])
            for k in request.keys
            if (request.namespace, k) in self.store
        ]
        return service_pb.InternalKVMultiGetReply(status=self.status, results=entries)

    def service(self) -> grpc.GenericRpcHandler:
        methods = {
            "InternalKVGet": (self.get, service_pb.InternalKVGetRequest),
            "InternalKVKeys": (self.keys, service_pb.InternalKVKeysRequest),
            "InternalKVMultiGet": (self.multi_get, service_pb.InternalKVMultiGetRequest),
        }

        def handler(name: str, serve: Any, request_type: type[Message]) -> grpc.RpcMethodHandler[Any, Any]:
            async def call(request: Message, context: grpc.aio.ServicerContext[Any, Any]) -> Message:
                self.calls.append((name, request))
                reply: Message = serve(request)
                return reply

            return grpc.unary_unary_rpc_method_handler(
                call,
                request_deserializer=request_type.FromString,
                response_serializer=lambda reply: reply.SerializeToString(),
            )

        handlers = {name: handler(name, serve, kind) for name, (serve, kind) in methods.items()}
        return grpc.method_handlers_generic_handler(INTERNAL_KV.full_name, handlers)


@pytest.fixture
def kv() -> FakeKV:
    return FakeKV()


@pytest.fixture
async def gcs(kv: FakeKV) -> AsyncIterator[GcsClient]:
    async with serving(kv.service()) as address, GcsClient(address, retries=0) as client:
        yield client


def test_the_service_is_rays() -> None:
    assert method_path("InternalKVGet", INTERNAL_KV) == "/ray.rpc.InternalKVGcsService/InternalKVGet"
    assert (
        method_path("InternalKVMultiGet", INTERNAL_KV) == "/ray.rpc.InternalKVGcsService/InternalKVMultiGet"
    )
    assert method_path("InternalKVKeys", INTERNAL_KV) == "/ray.rpc.InternalKVGcsService/InternalKVKeys"


async def test_get_submission(kv: FakeKV, gcs: GcsClient) -> None:
    kv.put("rec-failed", record("rec-failed:FAILED"))
    info = await gcs.get_submission("rec-failed")
    assert info == convert.submission_info(record("rec-failed:FAILED"))
    [(method, request)] = kv.calls
    assert method == "InternalKVGet"
    assert request == service_pb.InternalKVGetRequest(key=b"_ray_internal_job_info_rec-failed", namespace=NS)


async def test_an_unknown_submission_is_none(kv: FakeKV, gcs: GcsClient) -> None:
    kv.put("elsewhere", record("rec-failed:FAILED"), namespace=b"other")
    assert await gcs.get_submission("rec-failed") is None
    assert await gcs.get_submission("elsewhere") is None  # only the "job" namespace counts


async def test_other_gcs_errors_raise(kv: FakeKV, gcs: GcsClient) -> None:
    kv.put("a", record("rec-failed:FAILED"))
    kv.status = service_pb.GcsStatus(code=12, message="timed out")
    with pytest.raises(GcsCallError, match="GCS_STATUS_12"):
        await gcs.get_submission("a")
    with pytest.raises(GcsCallError, match="InternalKVKeys failed: GCS_STATUS_12: timed out"):
        await gcs.list_submissions()


async def test_a_record_that_is_not_rays_raises(kv: FakeKV, gcs: GcsClient) -> None:
    kv.put("broken", "{")
    with pytest.raises(ValueError, match="Expecting"):
        await gcs.get_submission("broken")


async def test_list_submissions(kv: FakeKV, gcs: GcsClient, caplog: pytest.LogCaptureFixture) -> None:
    assert await gcs.list_submissions() == {}
    assert [m for m, _ in kv.calls] == ["InternalKVKeys"]  # no keys: no multi-get

    for name, value in RECORDS.items():
        kv.put(name.partition(":")[0], value)  # the last record of each submission
    kv.put("broken", "[]")
    kv.put("gone", record("rec-pending:PENDING"))
    kv.vanish_before_multiget = {convert.submission_key("gone")}
    kv.store[(NS, b"head_node_id")] = b"53fd5c21"
    kv.calls.clear()
    with caplog.at_level(logging.WARNING, logger="rayscale.ray.client"):
        listed = await gcs.list_submissions()

    expected = {name.partition(":")[0]: convert.submission_info(value) for name, value in RECORDS.items()}
    assert listed == expected
    assert listed["rec-stopped"].status == "STOPPED"
    assert "job submission 'broken'" in caplog.text
    [(keys_method, keys), (get_method, multi)] = kv.calls
    assert (keys_method, get_method) == ("InternalKVKeys", "InternalKVMultiGet")
    assert keys == service_pb.InternalKVKeysRequest(prefix=b"_ray_internal_job_info_", namespace=NS)
    assert isinstance(multi, service_pb.InternalKVMultiGetRequest)
    assert multi.namespace == NS
    assert set(multi.keys) == {convert.submission_key(s) for s in [*expected, "broken", "gone"]}
