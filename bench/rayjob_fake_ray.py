"""Ray's job side for a fleet of RayJobs, faked in the benchmark's process: one schedule of job
statuses, served the two ways the operators read it.

- `Schedule`: each job submitted (by either operator, through the fake dashboard's submit endpoint)
  is PENDING for `pending` seconds, RUNNING for `running` seconds, then SUCCEEDED; its status is a
  function of the wall clock, so the moments it changes are known exactly (`changes`).
- The fake GCS (`serving_gcs`, one gRPC server for every cluster, on an address of its own for
  each; the submission ids tell the jobs apart): ``InternalKVGet`` of namespace ``job``, key
  ``_ray_internal_job_info_<id>`` answers the record Ray 2.60's job manager writes there
  (``JobInfo.to_json``, as tests/unit/data keeps them), NotFound for an unknown id; the
  autoscaler's methods answer a head-only Ray (bench/fake_gcs_fleet.py). What rayscale reads.
- The fake dashboard (`serving_dashboard`, HTTP, also an HTTP proxy: KubeRay's operator dials
  ``http://<head-svc>.<ns>.svc.cluster.local:8265``, which does not resolve here, and Go's net/http
  sends such requests to $HTTP_PROXY in absolute form): ``GET /api/jobs/<id>`` (Ray's JobDetails;
  404 for an unknown id), ``POST /api/jobs/`` (submit; 400 with Ray's message for a known id),
  ``POST /api/jobs/<id>/stop``, ``DELETE /api/jobs/<id>`` and ``GET /api/version``.

Every call is counted (`Schedule.calls`): ``dashboard_status``, ``dashboard_submit``,
``dashboard_other``, ``proxied`` (requests that came through as a proxy), ``gcs_kv_get`` and
``gcs_state`` (the autoscaler's reads); the GCS keeps which connections each kind came on
(`Schedule.peers`).
"""

from __future__ import annotations

import collections
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bench.fake_gcs_fleet import FakeRay, handlers

KV_NAMESPACE = b"job"
KV_PREFIX = b"_ray_internal_job_info_"
GCS_NOT_FOUND = 17  # Ray's StatusCode::NotFound
JOBS = "/api/jobs/"
MESSAGES = {
    "PENDING": "Job has not started yet. It may be waiting for the runtime environment to be set up.",
    "RUNNING": "Job is currently running.",
    "SUCCEEDED": "Job finished successfully.",
}


@dataclass
class Job:
    submission_id: str
    entrypoint: str
    submitted: float  # wall clock, seconds
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass
class Schedule:
    """Every job's status over time; `calls` counts what the operators asked."""

    pending: float
    running: float
    clock: Callable[[], float] = time.time
    jobs: dict[str, Job] = field(default_factory=dict)
    calls: collections.Counter[str] = field(default_factory=collections.Counter)
    # the connections (gRPC peers, "ipv4:127.0.0.1:PORT") the GCS's job-record reads ("kv") and
    # state reads ("state") came on
    peers: collections.defaultdict[str, set[str]] = field(
        default_factory=lambda: collections.defaultdict(set)
    )
    # (submission id, status) -> when the GCS first answered a read with that status (wall clock):
    # splits a status's lag into the wait for a read and what came after it
    first_read: dict[tuple[str, str], float] = field(default_factory=dict)

    def submit(self, submission_id: str, entrypoint: str, metadata: dict[str, str]) -> bool:
        """A new job (True), or False when the id is known already."""
        if submission_id in self.jobs:
            return False
        self.jobs[submission_id] = Job(submission_id, entrypoint, self.clock(), metadata)
        return True

    def changes(self, job: Job) -> dict[str, float]:
        """When the job's status became each of its statuses (wall clock)."""
        started = job.submitted + self.pending
        return {"PENDING": job.submitted, "RUNNING": started, "SUCCEEDED": started + self.running}

    def status(self, job: Job, now: float) -> str:
        return max((at, status) for status, at in self.changes(job).items() if at <= now)[1]

    def record(self, job: Job, now: float) -> dict[str, Any]:
        """The job's JobInfo as Ray 2.60's job manager stores it in the GCS (JobInfo.to_json)."""
        status = self.status(job, now)
        changes = self.changes(job)
        started = status != "PENDING"
        return {
            "status": status,
            "entrypoint": job.entrypoint,
            "message": MESSAGES[status],
            "error_type": None,
            "start_time": int(job.submitted * 1000),
            "end_time": int(changes["SUCCEEDED"] * 1000) if status == "SUCCEEDED" else None,
            "metadata": job.metadata or None,
            "entrypoint_num_cpus": 0,
            "entrypoint_num_gpus": 0,
            "entrypoint_memory": 0,
            "entrypoint_resources": None,
            "driver_agent_http_address": "http://10.0.0.1:52365" if started else None,
            "driver_node_id": "ab" * 28 if started else None,
            "driver_exit_code": 0 if status == "SUCCEEDED" else None,
        }

    def details(self, job: Job, now: float) -> dict[str, Any]:
        """The dashboard's answer to ``GET /api/jobs/<id>`` (Ray's JobDetails)."""
        record = self.record(job, now)
        record.pop("driver_agent_http_address")
        record.pop("driver_node_id")
        return record | {
            "type": "SUBMISSION",
            "job_id": "02000000" if record["status"] != "PENDING" else None,
            "submission_id": job.submission_id,
            "runtime_env": {},
            "driver_info": None,
        }


# --------------------------------------------------------------------------- the GCS


def kv_handler(schedule: Schedule) -> Any:
    import grpc

    from rayscale.ray.wire import INTERNAL_KV
    from rayscale.ray.wire import gcs_service_pb2 as pb

    not_found = pb.InternalKVGetReply(status=pb.GcsStatus(code=GCS_NOT_FOUND, message="not found"))
    replies: dict[tuple[str, str], bytes] = {}  # (submission, status) -> the reply, serialized once

    async def get(request: Any, context: Any) -> bytes:
        schedule.calls["gcs_kv_get"] += 1
        schedule.peers["kv"].add(context.peer())
        key = bytes(request.key)
        job = None
        if request.namespace == KV_NAMESPACE and key.startswith(KV_PREFIX):
            job = schedule.jobs.get(key[len(KV_PREFIX) :].decode())
        if job is None:
            return bytes(not_found.SerializeToString())
        now = schedule.clock()
        at = (job.submission_id, schedule.status(job, now))
        if at not in replies:
            schedule.first_read[at] = now
            value = json.dumps(schedule.record(job, now)).encode()
            replies[at] = pb.InternalKVGetReply(status=pb.GcsStatus(code=0), value=value).SerializeToString()
        return replies[at]

    # The replies are serialized here, each once: Ray's GCS is C++ on each cluster's head, and a
    # fake that spends this machine's CPU on every read would slow the operator that reads more.
    method = grpc.unary_unary_rpc_method_handler(
        get, request_deserializer=pb.InternalKVGetRequest.FromString, response_serializer=bytes
    )
    return grpc.method_handlers_generic_handler(INTERNAL_KV.full_name, {"InternalKVGet": method})


def autoscaler_handler(schedule: Schedule) -> Any:
    """The autoscaler's methods, answered as a head-only Ray (bench/fake_gcs_fleet.py); the state
    reads counted, with the connection (peer) each came on."""
    import grpc

    from rayscale.ray.wire import SERVICE
    from rayscale.ray.wire import autoscaler_pb2 as pb

    ray = FakeRay(running=list)
    methods = handlers(ray).service  # fake_gcs_fleet's generic handler, for Report and Drain

    # A head-only Ray's state never changes, nor its version (Ray bumps it on a change): one reply,
    # serialized once (see kv_handler).
    reply = ray.state(pb).SerializeToString()

    async def state(request: Any, context: Any) -> bytes:
        schedule.calls["gcs_state"] += 1
        schedule.peers["state"].add(context.peer())
        return bytes(reply)

    replaced = grpc.unary_unary_rpc_method_handler(
        state, request_deserializer=pb.GetClusterResourceStateRequest.FromString, response_serializer=bytes
    )

    class Handler(grpc.GenericRpcHandler):  # type: ignore[misc]
        def service(self, details: Any) -> Any:
            if details.method == f"/{SERVICE.full_name}/GetClusterResourceState":
                return replaced
            return methods(details)

    return Handler()


def loopback(index: int) -> str:
    """The `index`-th address of 127.1.0.0/16 (the loopback network) the fake GCS listens on."""
    return f"127.1.{index // 250}.{index % 250 + 1}"


@contextlib.asynccontextmanager
async def serving_gcs(schedule: Schedule, hosts: int = 1) -> AsyncIterator[list[str]]:
    """One fake GCS for every cluster, on one port of `hosts` loopback addresses (`loopback`);
    yields them. A cluster of its own address each, as in a real fleet: gRPC shares one connection
    between the channels of one target, so clusters on one address would share a connection."""
    import grpc

    server = grpc.aio.server()
    server.add_generic_rpc_handlers((autoscaler_handler(schedule), kv_handler(schedule)))
    port = server.add_insecure_port(f"{loopback(0)}:0")
    for index in range(1, hosts):
        server.add_insecure_port(f"{loopback(index)}:{port}")
    await server.start()
    try:
        yield [f"{loopback(index)}:{port}" for index in range(hosts)]
    finally:
        await server.stop(grace=None)


# --------------------------------------------------------------------------- the dashboard


def answer(schedule: Schedule, method: str, path: str, body: Any) -> tuple[int, Any]:
    """The dashboard's answer (status, JSON or text) to one call; counts it."""
    now = schedule.clock()
    if path.startswith(JOBS) and path.count("/") == 3 and path != JOBS and method == "GET":
        schedule.calls["dashboard_status"] += 1
        job = schedule.jobs.get(path[len(JOBS) :])
        if job is None:
            return 404, f"Job {path[len(JOBS) :]} does not exist"
        schedule.first_read.setdefault((job.submission_id, schedule.status(job, now)), now)
        return 200, schedule.details(job, now)
    if path == JOBS and method == "POST":
        schedule.calls["dashboard_submit"] += 1
        sid = str((body or {}).get("submission_id") or f"raysubmit_{len(schedule.jobs)}")
        metadata = {str(k): str(v) for k, v in ((body or {}).get("metadata") or {}).items()}
        if not schedule.submit(sid, str((body or {}).get("entrypoint") or ""), metadata):
            return 400, f"Job with submission_id {sid} already exists. Please use a different submission_id."
        return 200, {"job_id": sid, "submission_id": sid}
    schedule.calls["dashboard_other"] += 1
    if path == "/api/version":
        return 200, {"version": "4", "ray_version": "2.60.0", "ray_commit": "bench"}
    if path.startswith(JOBS) and path.endswith("/stop") and method == "POST":
        return 200, {"stopped": False}
    if path.startswith(JOBS) and method == "DELETE":
        return 200, {"deleted": schedule.jobs.pop(path[len(JOBS) :], None) is not None}
    return 404, "not found"


@contextlib.asynccontextmanager
async def serving_dashboard(schedule: Schedule) -> AsyncIterator[str]:
    """The fake dashboard (and HTTP proxy) on a port of 127.0.0.1; yields ``http://127.0.0.1:PORT``."""
    from aiohttp import web

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        if request.raw_path.startswith("http://"):
            schedule.calls["proxied"] += 1
        body = None
        if request.can_read_body:
            with contextlib.suppress(ValueError):
                body = json.loads(await request.read() or b"null")
        status, out = answer(schedule, request.method, request.path, body)
        if isinstance(out, str):
            return web.Response(status=status, text=out)
        return web.json_response(out, status=status)

    async with serving_http(handle) as url:
        yield url


@contextlib.asynccontextmanager
async def serving_http(handle: Callable[[Any], Awaitable[Any]]) -> AsyncIterator[str]:
    """`handle` (an aiohttp low-level handler) serving on a port of 127.0.0.1; yields its URL."""
    from aiohttp import web

    runner = web.ServerRunner(web.Server(handle), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
