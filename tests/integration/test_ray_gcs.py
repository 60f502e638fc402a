"""GcsClient and RayletClient against a real Ray 2.60 head and workers on this machine (no
Kubernetes).

One head (1 CPU) and one worker for the module, a second worker and a token-auth head only for
the tests that need them. Drivers run as subprocesses (``ray.init(address=...)``) that keep their
work alive until their stdin closes. Nothing sleeps to synchronise: every wait polls the GCS (or
a driver's output) with a deadline.

``ray`` must not be imported here: its generated protobuf modules declare the same message names
as rayscale's bindings, and protobuf refuses the second set in one process. Availability is
checked with ``importlib.util.find_spec`` instead.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from e2e.raybridge import rayproc

from rayscale.ray.client import GcsCallError, GcsClient, GcsUnavailable
from rayscale.ray.model import (
    ActorInfo,
    ClusterState,
    GangRequest,
    JobInfo,
    NodeInfo,
    NodeStatus,
    PlacementGroupInfo,
    RayNodeState,
    ResourceDemand,
    ResourceRequest,
)
from rayscale.ray.raylet import RayletClient
from tests.support.polling import eventually
from tests.support.raydriver import HOLD, RAY_WAIT, driver

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None,
        reason="needs Ray: pip install 'ray==2.60.0' (the dev extra should carry it)",
    ),
    pytest.mark.timeout(900),
]

WORKER_A = "raycluster-a-worker-x1"
WORKER_B = "raycluster-b-worker-y2"
VC_RESOURCE = "rayscale.io/vc/t"  # a virtual cluster's resource, added to a node by its raylet
SUBMISSION_ID = "raysubmit_rayscale_test"

# ---- fixtures ----


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rayproc.RayNode]:
    with rayproc.running_head(
        num_cpus=1, log_dir=tmp_path_factory.mktemp("ray-logs"), timeout=RAY_WAIT
    ) as head:
        yield head


@pytest.fixture(scope="module")
async def gcs(ray_head: rayproc.RayNode) -> AsyncIterator[GcsClient]:
    async with GcsClient(ray_head.address, timeout=10) as client:
        yield client


async def _alive_node(gcs: GcsClient, instance_id: str, worker: rayproc.RayNode) -> RayNodeState:
    async def check() -> RayNodeState | None:
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


async def _node(gcs: GcsClient, instance_id: str) -> RayNodeState:
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

        async def gang() -> GangRequest | None:
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

        async def running() -> RayNodeState | None:
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
            [node] = await client.get_all_node_info()
            assert node.is_head
            async with RayletClient(node.raylet_address, retries=0) as anonymous_raylet:
                with pytest.raises(GcsCallError) as refused:
                    await anonymous_raylet.resize_local_resources({VC_RESOURCE: 2})
                assert (refused.value.code, refused.value.peer) == ("UNAUTHENTICATED", "raylet")
            async with RayletClient(node.raylet_address, token=token) as raylet:
                assert (await raylet.resize_local_resources({VC_RESOURCE: 2}))[VC_RESOURCE] == 2
            rayproc.stop(head)
            # the cluster's state is now unknown: the autoscaler must see an error, never "no nodes"
            with pytest.raises(GcsUnavailable):
                await client.get_cluster_resource_state()
    finally:
        rayproc.stop(head)


# ---- the GCS info services and the raylet ----


def _start_arg(node: rayproc.RayNode, name: str) -> str:
    """The value of ``--<name>=...`` the node was started with."""
    prefix = f"--{name}="
    args = node.process.args
    assert isinstance(args, list), args
    return next(str(a)[len(prefix) :] for a in args if str(a).startswith(prefix))


async def _head_info(gcs: GcsClient) -> NodeInfo:
    heads = [n for n in await gcs.get_all_node_info() if n.is_head]
    assert len(heads) == 1, heads
    return heads[0]


async def test_node_info(gcs: GcsClient, ray_head: rayproc.RayNode, worker_a: rayproc.RayNode) -> None:
    nodes = await gcs.get_all_node_info()
    head = await _head_info(gcs)
    assert head.alive
    assert head.address == rayproc.NODE_IP
    assert head.raylet_port == int(_start_arg(ray_head, "node-manager-port"))
    assert head.raylet_address == f"{rayproc.NODE_IP}:{head.raylet_port}"
    assert head.instance_id is None  # started without RAY_CLOUD_INSTANCE_ID
    assert head.total_resources["CPU"] == 1
    assert head.total_resources["node:__internal_head__"] == 1
    assert head.total_resources["memory"] > 0  # bytes
    assert head.labels["ray.io/node-id"] == head.node_id

    [worker] = [n for n in nodes if n.instance_id == WORKER_A]  # the pod name, on Kubernetes
    assert worker.alive
    assert not worker.is_head
    assert worker.total_resources["pin_a"] == 1
    assert worker.raylet_port == int(_start_arg(worker_a, "node-manager-port"))

    # the same nodes, and ids, as GetClusterResourceState's
    state = await _state(gcs)
    assert {n.node_id for n in nodes if n.alive} == {n.node_id for n in state.nodes if n.alive}
    assert state.node(head.node_id) is not None
    assert {n.node_id for n in await gcs.get_all_node_info(alive_only=True)} == {
        n.node_id for n in nodes if n.alive
    }


OWNER = """
import asyncio, json
from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group
from ray.dashboard.modules.job.common import JobInfo, JobInfoStorageClient, JobStatus
from ray._private.worker import global_worker

# What the job submission API records of a job it runs (the GCS adds it to GetAllJobInfo).
record = JobInfo(status=JobStatus.RUNNING, entrypoint="python train.py")
asyncio.run(JobInfoStorageClient(global_worker.gcs_client).put_info(sys.argv[3], record))

@ray.remote(num_cpus=0)
class Keeper:
    def node(self):
        return ray.get_runtime_context().get_node_id()

keeper = Keeper.options(name="rayscale-keeper", namespace="rayscale-test", lifetime="detached").remote()
pg = placement_group([{"CPU": 0.1}], name="rayscale-pg", lifetime="detached")
ray.get(pg.ready(), timeout=120)
context = ray.get_runtime_context()
print(json.dumps({
    "actor": keeper._actor_id.hex(),
    "actor_node": ray.get(keeper.node.remote(), timeout=120),
    "pg": pg.id.hex(),
    "pg_node": placement_group_table(pg)["bundles_to_node_id"][0],
    "job": context.get_job_id(),
    "driver_node": context.get_node_id(),
}), flush=True)
"""
RELEASE = f"{HOLD}\nray.kill(keeper)\nremove_placement_group(pg)"


async def test_jobs_actors_and_placement_groups(
    gcs: GcsClient, ray_head: rayproc.RayNode, tmp_path: Path
) -> None:
    job_config = {"metadata": {"job_submission_id": SUBMISSION_ID}}  # as the job submission API sets it
    async with driver(
        ray_head,
        OWNER,
        SUBMISSION_ID,
        tmp_path=tmp_path,
        tail=RELEASE,
        env={"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps(job_config)},
    ) as d:
        [line] = d.preamble
        ids = json.loads(line)
        alive = {n.node_id for n in await gcs.get_all_node_info(alive_only=True)}
        assert {ids["actor_node"], ids["pg_node"], ids["driver_node"]} <= alive

        [actor] = [a for a in await gcs.get_all_actor_info() if a.actor_id == ids["actor"]]
        assert actor == ActorInfo(
            actor_id=ids["actor"],
            state="ALIVE",
            node_id=ids["actor_node"],
            job_id=ids["job"],
            name="rayscale-keeper",
            class_name="Keeper",
            detached=True,
        )
        assert actor in await gcs.get_all_actor_info(state="ALIVE")
        assert actor.actor_id not in {a.actor_id for a in await gcs.get_all_actor_info(state="DEAD")}

        [pg] = [p for p in await gcs.get_all_placement_groups() if p.pg_id == ids["pg"]]
        assert pg == PlacementGroupInfo(
            pg_id=ids["pg"],
            state="CREATED",
            node_ids=(ids["pg_node"],),
            job_id=ids["job"],
            detached=True,
            name="rayscale-pg",
        )

        [job] = [j for j in await gcs.get_all_job_info() if j.job_id == ids["job"]]
        assert job == JobInfo(
            job_id=ids["job"],
            is_dead=False,
            submission_id=SUBMISSION_ID,
            driver_node_id=ids["driver_node"],
            entrypoint=job.entrypoint,
            status="RUNNING",
            start_time_ms=job.start_time_ms,
        )
        assert job.entrypoint  # the driver's command line
        assert job.start_time_ms > 0  # started
        assert job.end_time_ms == 0  # not ended

    # the driver killed the actor, removed the group and exited
    async def released() -> bool:
        actors = {a.actor_id: a.state for a in await gcs.get_all_actor_info()}
        groups = {p.pg_id: p.state for p in await gcs.get_all_placement_groups()}
        jobs = {j.job_id: j.is_dead for j in await gcs.get_all_job_info()}
        return (
            actors.get(ids["actor"], "DEAD") == "DEAD"
            and groups.get(ids["pg"], "REMOVED") == "REMOVED"
            and jobs[ids["job"]]
        )

    await eventually(released, timeout=RAY_WAIT, message="actor dead, group removed, job dead")
    assert ids["actor"] not in {a.actor_id for a in await gcs.get_all_actor_info(state="ALIVE")}


async def test_resize_local_resources(gcs: GcsClient, ray_head: rayproc.RayNode) -> None:
    head = await _head_info(gcs)

    async def live_total() -> float | None:
        node = (await _state(gcs)).node(head.node_id)
        assert node is not None
        return node.total_resources.get(VC_RESOURCE)

    async with RayletClient(head.raylet_address, timeout=10) as raylet:
        totals = await raylet.resize_local_resources({VC_RESOURCE: 1000})
        assert totals[VC_RESOURCE] == 1000
        assert totals["CPU"] == head.total_resources["CPU"]  # the others stay

        async def added() -> bool:
            return await live_total() == 1000

        await eventually(added, timeout=RAY_WAIT, message=f"{VC_RESOURCE} = 1000 in GetClusterResourceState")
        # GetAllNodeInfo keeps the totals the node registered with: Ray 2.60 never updates them
        assert VC_RESOURCE not in (await _head_info(gcs)).total_resources

        totals = await raylet.resize_local_resources({VC_RESOURCE: 0})
        assert VC_RESOURCE not in totals  # a total of 0 removes the resource

        async def removed() -> bool:
            return await live_total() is None

        await eventually(
            removed, timeout=RAY_WAIT, message=f"{VC_RESOURCE} gone from GetClusterResourceState"
        )
