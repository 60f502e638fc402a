"""The drain-on-stop preStop hook's script (rayscale.controller.prestop), run as the kubelet runs it
(``/bin/sh -c``, the Ray container's environment: ``RAY_ADDRESS``, ``RAY_CLOUD_INSTANCE_ID``) against
a real Ray 2.60 head and worker on this machine.

Not through a pod: the local control plane's nodes are kwok's, whose kubelet runs no hooks, so the
script is run here directly, with the Ray worker standing for the pod. What is checked is what the
hook does to Ray: the worker's node, found by its instance id among several on one address, is
drained (its running task goes on to its end), the hook waits while the node is alive and returns
once Ray has stopped the idle node, well before its deadline; a pod with no Ray node ends the hook at
once and drains nothing. Nothing sleeps: every wait polls the GCS or the hook's process.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from e2e.raybridge import rayproc

from rayscale.controller import prestop
from rayscale.ray.client import GcsClient
from rayscale.ray.model import NodeStatus
from tests.integration.test_ray_gcs import BUSY as GCS_BUSY
from tests.integration.test_ray_gcs import _alive_node, gcs, ray_head  # noqa: F401
from tests.support.polling import eventually
from tests.support.raydriver import RAY_WAIT, driver

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray 2.60 (the dev extra)"),
    pytest.mark.timeout(900),
]

WORKER = "raycluster-s-worker-h1"
OTHER = "raycluster-s-worker-h2"
GRACE = 600  # the hook waits at most 595 s: returning well before means the node was gone
GONE = 180.0  # how long Ray may take to stop a drained, idle node on a busy 2-core machine
BUSY = GCS_BUSY.replace("pin_a", "pin_h")


async def run_hook(head: rayproc.RayNode, instance_id: str, log: Path) -> asyncio.subprocess.Process:
    """The hook's command, as the kubelet runs it in a worker's Ray container."""
    env = rayproc.driver_env({
        "RAY_ADDRESS": head.address,
        "RAY_CLOUD_INSTANCE_ID": instance_id,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    })  # fmt: skip
    command = prestop.hook(GRACE)["exec"]["command"]
    with log.open("wb") as out:
        return await asyncio.create_subprocess_exec(*command, env=env, stdout=out, stderr=out)


def in_status(gcs: GcsClient, instance_id: str, status: NodeStatus) -> Callable[[], Awaitable[str | None]]:  # noqa: F811
    """A check for `eventually`: the node id of the pod's Ray node once it is in `status`."""

    async def check() -> str | None:
        node = (await gcs.get_cluster_resource_state()).node_by_instance(instance_id)
        return node.node_id if node is not None and node.status is status else None

    return check


async def ended(process: asyncio.subprocess.Process) -> tuple[int] | None:
    """``(returncode,)`` once the process has exited (a tuple: 0 is an answer too)."""
    return None if process.returncode is None else (process.returncode,)


async def test_the_hook_drains_its_own_node_and_returns_once_ray_stopped_it(
    gcs: GcsClient,  # noqa: F811
    ray_head: rayproc.RayNode,  # noqa: F811
    tmp_path: Path,
) -> None:
    # one node after the other, each registered first (what a 2-core machine can take)
    worker = rayproc.start_worker(
        ray_head.address, instance_id=WORKER, resources={"pin_h": 1}, log_dir=tmp_path
    )
    other: rayproc.RayNode | None = None
    hook: asyncio.subprocess.Process | None = None
    try:
        await _alive_node(gcs, WORKER, worker)
        other = rayproc.start_worker(ray_head.address, instance_id=OTHER, log_dir=tmp_path)
        await _alive_node(gcs, OTHER, other)
        marker = tmp_path / "release"
        tail = "print(ray.get(ref, timeout=600), flush=True)"
        async with driver(ray_head, BUSY, str(marker), tmp_path=tmp_path, tail=tail) as d:
            running = in_status(gcs, WORKER, NodeStatus.RUNNING)
            node_id = await eventually(running, timeout=RAY_WAIT, message=f"{WORKER} RUNNING the pinned task")
            hook = await run_hook(ray_head, WORKER, tmp_path / "hook.log")
            draining = in_status(gcs, WORKER, NodeStatus.DRAINING)
            await eventually(draining, timeout=RAY_WAIT, message=f"{WORKER} DRAINING")
            assert hook.returncode is None, rayproc.file_tail(tmp_path / "hook.log")  # it waits
            # the other node (same address, no instance id of this pod) is left alone
            (alive,) = [n for n in (await gcs.get_cluster_resource_state()).nodes if n.instance_id == OTHER]
            assert alive.status is not NodeStatus.DRAINING
            assert alive.alive

            marker.touch()
            assert await d.line() == "finished"  # the task ran to its end on the drained node

        (code,) = await eventually(
            lambda: ended(hook), timeout=GONE, message="the hook returned (Ray stopped the idle node)"
        )
        assert code == 0, rayproc.file_tail(tmp_path / "hook.log")
        assert "(True, " in (tmp_path / "hook.log").read_text()  # Ray accepted the drain
        node = (await gcs.get_cluster_resource_state()).node(node_id)
        assert node is None or not node.alive
        assert (await gcs.get_cluster_resource_state()).node_by_instance(OTHER).alive  # type: ignore[union-attr]
    finally:
        if hook is not None and hook.returncode is None:  # the test failed while it waited
            hook.kill()
            await hook.wait()
        rayproc.stop(worker)
        if other is not None:
            rayproc.stop(other)


async def test_a_pod_without_a_ray_node_ends_the_hook_at_once_and_drains_nothing(
    gcs: GcsClient,  # noqa: F811
    ray_head: rayproc.RayNode,  # noqa: F811
    tmp_path: Path,
) -> None:
    before = {n.node_id: n.status for n in (await gcs.get_cluster_resource_state()).nodes if n.alive}
    hook = await run_hook(ray_head, "raycluster-s-worker-none", tmp_path / "hook.log")
    (code,) = await eventually(lambda: ended(hook), timeout=RAY_WAIT, message="the hook returned")
    assert code == 0, rayproc.file_tail(tmp_path / "hook.log")
    after = {n.node_id: n.status for n in (await gcs.get_cluster_resource_state()).nodes if n.alive}
    assert set(after) == set(before)
    assert NodeStatus.DRAINING not in after.values()
