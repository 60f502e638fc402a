"""GcsClient against a real Ray 2.60 head and workers on this machine (no Kubernetes).

One head (1 CPU) and one worker for the module, a second worker and a token-auth head only for
the tests that need them. Drivers run as subprocesses (``ray.init(address=...)``) that keep their
work alive until their stdin closes. Nothing sleeps to synchronise: every wait polls the GCS (or
a driver's output) with a deadline.

``ray`` must not be imported here: its generated protobuf modules declare the same message names
as rayscale's bindings, and protobuf refuses the second set in one process. Availability is
checked with ``importlib.util.find_spec`` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import itertools
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from e2e.raybridge import rayproc

from rayscale.ray.client import GcsCallError, GcsClient, GcsUnavailable
from rayscale.ray.model import (
    ClusterState,
    NodeState,
    NodeStatus,
    ResourceDemand,
    ResourceRequest,
)
from tests.integration.polling import eventually

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None,
        reason="needs Ray: pip install 'ray==2.60.0' (the dev extra should carry it)",
    ),
    pytest.mark.timeout(900),
]

RAY_WAIT = 90.0  # generous: `ray start` and drivers are slow on a busy 2-core machine
WORKER_A = "raycluster-a-worker-x1"
WORKER_B = "raycluster-b-worker-y2"

DRIVER = """
import os, sys, time
import ray
ray.init(address=sys.argv[1], _node_ip_address=sys.argv[2], log_to_driver=False)
{body}
print("ready", flush=True)
{tail}
"""
HOLD = "sys.stdin.read()  # keep the job (and its demand) alive until the test closes stdin"
_driver_ids = itertools.count()


class Driver:
    """A ``python -c`` Ray driver; `line` reads what it prints after "ready", `preamble` is before."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path) -> None:
        self.process = process
        self.log = log
        self.preamble: list[str] = []

    async def line(self, timeout: float = RAY_WAIT) -> str:  # noqa: ASYNC109
        assert self.process.stdout is not None
        try:
            raw = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        except TimeoutError:
            raise AssertionError(f"driver printed nothing in {timeout:.0f}s; log:\n{self._tail()}") from None
        if not raw:
            await self.process.wait()
            raise AssertionError(f"driver exited ({self.process.returncode}); log:\n{self._tail()}")
        return raw.decode().strip()

    async def finish(self) -> None:
        """Close stdin (ends a holding driver), wait for the exit, kill after a deadline."""
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 60)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()

    def _tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return ""


@contextlib.asynccontextmanager
async def driver(
    head: rayproc.RayNode, body: str, *args: str, tmp_path: Path, tail: str = HOLD
) -> AsyncIterator[Driver]:
    """Run `body`, print "ready", run `tail` (default: hold until stdin closes)."""
    log = tmp_path / f"driver-{next(_driver_ids)}.log"
    script = DRIVER.format(body=body, tail=tail)
    with log.open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            script,
            head.address,
            rayproc.NODE_IP,
            *args,
            env=rayproc.driver_env(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            cwd=tmp_path,
        )
    d = Driver(process, log)
    try:
        while (line := await d.line()) != "ready":
            d.preamble.append(line)
        yield d
    finally:
        await d.finish()


# ---- fixtures ----


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rayproc.RayNode]:
    logs = tmp_path_factory.mktemp("ray-logs")
    head = rayproc.start_head(num_cpus=1, log_dir=logs)
    try:
        rayproc.wait_for_port(rayproc.NODE_IP, head.port, timeout=RAY_WAIT, node=head)
        yield head
    finally:
        rayproc.stop(head)


@pytest.fixture(scope="module")
async def gcs(ray_head: rayproc.RayNode) -> AsyncIterator[GcsClient]:
    async with GcsClient(ray_head.address, timeout=10) as client:
        yield client


async def _alive_node(gcs: GcsClient, instance_id: str, worker: rayproc.RayNode) -> NodeState:
    async def check() -> NodeState | None:
        assert worker.running(), f"ray worker exited:\n{worker.log_tail()}"
        node = (await gcs.get_cluster_resource_state()).node_by_instance(instance_id)
        return node if node is not None and node.alive else None

    return await eventually(check, timeout=RAY_WAIT, message=f"node {instance_id} alive in the GCS")


@pytest.fixture(scope="module")
async def worker_a(
    ray_head: rayproc.RayNode, gcs: GcsClient, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[rayproc.RayNode]:
    worker = rayproc.start_worker(
        ray_head.address,
        instance_id=WORKER_A,
        node_type="group-a",
        num_cpus=1,
        resources={"pin_a": 1},
        log_dir=tmp_path_factory.mktemp("ray-worker-a"),
    )
    try:
        await _alive_node(gcs, WORKER_A, worker)
        yield worker
    finally:
        rayproc.stop(worker)


async def _state(gcs: GcsClient) -> ClusterState:
    return await gcs.get_cluster_resource_state()


async def _node(gcs: GcsClient, instance_id: str) -> NodeState:
    node = (await _state(gcs)).node_by_instance(instance_id)
    assert node is not None, f"no node {instance_id}"
    return node


async def _no_demand(gcs: GcsClient) -> None:
    async def check() -> bool:
        state = await _state(gcs)
        return not state.pending_requests and not state.pending_gangs

    await eventually(check, timeout=RAY_WAIT, message="pending demand gone after the driver exited")


# ---- tests ----


async def test_worker_identity_and_resources(gcs: GcsClient, worker_a: rayproc.RayNode) -> None:
    state = await _state(gcs)
    node = state.node_by_instance(WORKER_A)
    assert node is not None
    assert node.ray_node_type_name == "group-a"
    assert node.total_resources["pin_a"] == 1
    assert node.total_resources["CPU"] == 1
    assert node.total_resources["memory"] > 0  # bytes
    assert node.labels["ray.io/node-id"] == node.node_id
    assert node.labels.get("ray.io/node-group") == "group-a"
    assert node.node_ip_address == rayproc.NODE_IP
    assert len(bytes.fromhex(node.node_id)) == 28
    heads = [n for n in state.nodes if "node:__internal_head__" in n.total_resources]
    assert len(heads) == 1
    assert heads[0].instance_id == ""
    assert state.session_name.startswith("session_")


async def test_idle_duration_grows(gcs: GcsClient, worker_a: rayproc.RayNode) -> None:
    async def idle() -> int:
        node = await _node(gcs, WORKER_A)
        return node.idle_duration_ms if node.status is NodeStatus.IDLE else 0

    first = await eventually(idle, timeout=RAY_WAIT, message=f"{WORKER_A} IDLE with an idle time")

    async def longer() -> bool:
        return await idle() > first

    await eventually(longer, timeout=RAY_WAIT, message=f"idle_duration_ms of {WORKER_A} beyond {first}")


async def test_pending_gpu_task(gcs: GcsClient, ray_head: rayproc.RayNode, tmp_path: Path) -> None:
    body = "@ray.remote(num_gpus=1)\ndef needs_gpu():\n    return 1\nref = needs_gpu.remote()"
    async with driver(ray_head, body, tmp_path=tmp_path):

        async def gpu_demand() -> ResourceDemand | None:
            wanted = ResourceRequest({"CPU": 1.0, "GPU": 1.0})
            return next((d for d in (await _state(gcs)).pending_requests if d.request == wanted), None)

        demand = await eventually(gpu_demand, timeout=RAY_WAIT, message="a pending {CPU: 1, GPU: 1} task")
        assert demand.count == 1
    await _no_demand(gcs)


async def test_pending_placement_group(gcs: GcsClient, ray_head: rayproc.RayNode, tmp_path: Path) -> None:
    body = (
        "from ray.util.placement_group import placement_group\n"
        "pg = placement_group([{'GPU': 1}, {'GPU': 1}], strategy='STRICT_SPREAD')\n"
        "print(pg.id.hex(), flush=True)"
    )
    async with driver(ray_head, body, tmp_path=tmp_path) as d:
        [pg_id] = d.preamble

        async def gang() -> object:
            return next((g for g in (await _state(gcs)).pending_gangs if g.placement_group_id == pg_id), None)

        found = await eventually(gang, timeout=RAY_WAIT, message=f"placement group {pg_id} pending")
        assert found.strategy == "STRICT_SPREAD"
        assert found.state == "PENDING"
        assert [b.resources for b in found.bundles] == [{"GPU": 1.0}, {"GPU": 1.0}]
        for bundle in found.bundles:
            assert [(c.kind, c.label_name) for c in bundle.placement_constraints] == [
                ("anti_affinity", f"_PG_{pg_id}")
            ]
    await _no_demand(gcs)


async def test_request_resources(gcs: GcsClient, ray_head: rayproc.RayNode, tmp_path: Path) -> None:
    body = (
        "from ray.autoscaler.sdk import request_resources\n"
        "request_resources(bundles=[{'GPU': 1}] * 3 + [{'CPU': 2}])"
    )
    async with driver(ray_head, body, tmp_path=tmp_path, tail=""):
        pass  # the constraint outlives the driver: Ray keeps the latest one until replaced

    async def constraint() -> set[tuple[tuple[tuple[str, float], ...], int]]:
        found = (await _state(gcs)).constraints
        return {(tuple(sorted(d.request.resources.items())), d.count) for c in found for d in c}

    expected = {((("GPU", 1.0),), 3), ((("CPU", 2.0),), 1)}
    got = await eventually(constraint, timeout=RAY_WAIT, message="the request_resources constraint")
    assert got == expected

    # the client can replace it (what RayResourceRequest tests and tools do), and clear it
    await gcs.request_cluster_resource_constraint([ResourceDemand(ResourceRequest({"TPU": 4}), 2)])
    assert (await _state(gcs)).constraints == ((ResourceDemand(ResourceRequest({"TPU": 4.0}), 2),),)
    await gcs.request_cluster_resource_constraint([])
    assert (await _state(gcs)).constraints == ()


BUSY = """
@ray.remote(num_cpus=0, resources={"pin_a": 1})
def busy(marker):
    deadline = time.monotonic() + 300
    while not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return "finished" if os.path.exists(marker) else "gave up"
ref = busy.remote(sys.argv[3])
"""


async def test_drain_refused_while_the_node_runs_a_task(
    gcs: GcsClient, ray_head: rayproc.RayNode, worker_a: rayproc.RayNode, tmp_path: Path
) -> None:
    marker = tmp_path / "release"
    async with driver(
        ray_head,
        BUSY,
        str(marker),
        tmp_path=tmp_path,
        tail="print(ray.get(ref, timeout=600), flush=True)",
    ) as d:

        async def running() -> NodeState | None:
            node = await _node(gcs, WORKER_A)
            return node if node.status is NodeStatus.RUNNING else None

        node = await eventually(running, timeout=RAY_WAIT, message=f"{WORKER_A} RUNNING the pinned task")
        result = await gcs.drain_node(node.node_id, message="rayscale test: idle")
        assert not result.accepted
        assert "idle" in result.rejection_reason
        assert (await _node(gcs, WORKER_A)).status is NodeStatus.RUNNING

        marker.touch()
        assert await d.line() == "finished"  # the task was not disturbed by the refused drain

    async def idle_again() -> bool:
        return (await _node(gcs, WORKER_A)).status is NodeStatus.IDLE

    await eventually(idle_again, timeout=RAY_WAIT, message=f"{WORKER_A} IDLE after the task")


async def test_drain_accepted_for_an_idle_worker(
    gcs: GcsClient, ray_head: rayproc.RayNode, tmp_path: Path
) -> None:
    worker = rayproc.start_worker(
        ray_head.address, instance_id=WORKER_B, node_type="group-b", num_cpus=1, log_dir=tmp_path
    )
    try:
        node = await _alive_node(gcs, WORKER_B, worker)
        assert node.ray_node_type_name == "group-b"

        async def idle() -> bool:
            return (await _node(gcs, WORKER_B)).status is NodeStatus.IDLE

        await eventually(idle, timeout=RAY_WAIT, message=f"{WORKER_B} IDLE")
        result = await gcs.drain_node(node.node_id, message="rayscale test: idle")
        assert result.accepted, result.rejection_reason

        async def gone() -> bool:
            return (await _node(gcs, WORKER_B)).status in (NodeStatus.DRAINING, NodeStatus.DEAD)

        await eventually(gone, timeout=RAY_WAIT, message=f"{WORKER_B} DRAINING or DEAD after the drain")
        # draining a dead (or unknown) node is accepted too: safe to repeat
        assert (await gcs.drain_node(node.node_id)).accepted
    finally:
        rayproc.stop(worker)


async def test_token_auth_and_unreachable_gcs(tmp_path: Path) -> None:
    token = "rayscale-test-token-0123456789abcdef0123456789"
    head = rayproc.start_head(
        num_cpus=0, env={"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}, log_dir=tmp_path
    )
    try:
        rayproc.wait_for_port(rayproc.NODE_IP, head.port, timeout=RAY_WAIT, node=head)
        async with GcsClient(head.address, retries=0) as anonymous:
            with pytest.raises(GcsCallError) as raised:
                await anonymous.get_cluster_resource_state()
            assert raised.value.code == "UNAUTHENTICATED"
        async with GcsClient(head.address, token="wrong-" + token, retries=0) as wrong:
            with pytest.raises(GcsCallError, match="UNAUTHENTICATED"):
                await wrong.get_cluster_resource_state()
        async with GcsClient(head.address, token=token, retries=1, backoff=0.05, timeout=5) as client:

            async def registered() -> bool:
                return len((await client.get_cluster_resource_state()).nodes) == 1

            await eventually(registered, timeout=RAY_WAIT, message="the head node registered")
            rayproc.stop(head)
            # the cluster's state is now unknown: the autoscaler must see an error, never "no nodes"
            with pytest.raises(GcsUnavailable):
                await client.get_cluster_resource_state()
    finally:
        rayproc.stop(head)
