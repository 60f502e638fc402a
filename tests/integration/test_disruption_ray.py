"""Disruption notices on a Node, acted on with a real Ray: `rayscale run --mode all` on the local
control plane, the e2e Ray bridge (a real Ray head, a real ``ray start`` worker for each Running
worker pod) and a Ray driver whose task blocks on a marker file until the test lets it end.

Each test makes two kwok Nodes of its own (labelled and tainted for its worker group alone, so
that no other pod lands there and nothing else is disturbed) and a RayCluster whose group ``cpu``
(1 CPU per worker, ``minReplicas: 1``, ``maxReplicas: 2``) has its one worker there, busy with
the task. Then the worker's Node announces its end:

1. **a cordon** (``spec.unschedulable``, what ``kubectl cordon`` and ``kubectl drain`` do first):
   Ray's node is asked to drain (``DisruptionDrain``), the pod stays while the task runs, a
   replacement starts on the other Node (the leaving worker no longer counts towards the
   minimum), the task ends there on the drained node (0 tasks failed), and only then is the pod
   deleted (``DisruptionDelete``, idle after draining);
2. **a spot notice** (a taint configured with ``--disruption-notice taint:KEY=30``): the same drain
   and replacement, and the pod is deleted at the deadline though the task still runs; Ray runs
   the task again on the replacement, where it ends (0 tasks lost).

Nothing sleeps: every wait polls with a deadline, and what must not happen is watched for
(`holds`) while it could.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from e2e.harness import NAME, group, raycluster
from e2e.raybridge.bridge import RayBridge
from e2e.raybridge.driver import RayDriver
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from tests.support.kube import Kube, names
from tests.support.operators import AUTOSCALING_EXTRA, Operator, running
from tests.support.polling import eventually, holds
from tests.support.ray_tasks import bridge_for

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray 2.60 (the dev extra)"),
    pytest.mark.timeout(300),
]

GROUP = "cpu"
FOR = "rayscale.test/for"  # the test Nodes' label and taint: this test's namespace
RECLAIM = "rayscale.test/reclaim"  # the spot-like taint, configured with --disruption-notice
DEADLINE = 30  # its seconds
START = 120.0  # a worker pod Running with its Ray node, on a busy 2-core machine
SETTLE = 60.0  # rayscale's rounds and the controller's work after a change


@pytest.fixture
def nodes(cluster: testcluster.ClusterHandle, namespace: str) -> Iterator[list[str]]:
    """Two kwok Nodes for this test's worker group only: labelled and tainted with its namespace."""
    if not cluster.local:
        pytest.skip("makes kwok Nodes: the local control plane only")
    made = [f"disruption-{namespace}-{i}"[:63] for i in range(2)]
    for name in made:
        cluster.kubectl_run("create", "-f", "-", input=_node(name, namespace))
    try:
        yield made
    finally:
        for name in made:
            cluster.kubectl_run("delete", "node", name, "--wait=false", check=False)


def _node(name: str, namespace: str) -> str:
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return json.dumps({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                     "labels": {"kubernetes.io/hostname": name, "type": "kwok", FOR: namespace}},
        "spec": {"taints": [{"key": FOR, "value": namespace, "effect": "NoSchedule"}]},
        "status": {"capacity": capacity, "allocatable": capacity},
    })  # fmt: skip


@pytest.fixture
def operator(
    cluster: testcluster.ClusterHandle, namespace: str, raycluster_crd: None, request: pytest.FixtureRequest
) -> Iterator[Operator]:
    """`rayscale run --mode all`, rounds every second, with the spot-like taint configured."""
    extra = (*AUTOSCALING_EXTRA, "--disruption-notice", f"taint:{RECLAIM}={DEADLINE}")
    yield from running(Operator(cluster, namespace, mode="all", extra=extra), request)


@pytest.fixture
def bridge(cluster: testcluster.ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[RayBridge]:
    yield from bridge_for(cluster.kubeconfig, namespace, NAME, tmp_path / "ray")


class Busy:
    """The RayCluster with its one worker on one of `nodes`, running a task that ends on cue."""

    def __init__(self, kube: Kube, core: Any, ray: RayDriver, bridge: RayBridge, marker: Path) -> None:
        self.kube, self.core, self.ray, self.bridge, self.marker = kube, core, ray, bridge, marker

    async def workers(self) -> list[Any]:
        return await self.kube.workers(NAME, live=True)

    async def outcome(self) -> dict[str, Any]:
        found: dict[str, Any] = await self.ray.call("task_outcome", name="t")
        return found

    async def events(self, reason: str) -> list[Any]:
        return [e for e in await self.kube.events(reason) if e.involved_object.name == NAME]

    async def condition(self) -> dict[str, Any] | None:
        auto = ((await self.kube.get(NAME)).get("status") or {}).get("autoscaler") or {}
        return next((c for c in auto.get("conditions") or [] if c.get("type") == "Disruption"), None)

    async def replacement(self, leaving: str) -> str | None:
        """A Running worker other than `leaving`, once its Ray node runs (the bridge started it)."""
        pods = [p for p in await self.workers() if p.metadata.name != leaving and p.status.phase == "Running"]
        return pods[0].metadata.name if pods and pods[0].metadata.name in self.bridge.workers() else None

    async def finished(self) -> bool:
        return bool((await self.outcome())["state"] == "done")


@pytest.fixture
async def busy(
    api: client.ApiClient,
    namespace: str,
    nodes: list[str],
    bridge: RayBridge,
    operator: Operator,
    tmp_path: Path,
) -> AsyncIterator[tuple[Busy, str, str]]:
    """(the scene, the busy worker's pod, its Node) once the task runs on that worker."""
    kube = Kube(api, namespace)
    spec = group(
        GROUP,
        replicas=1,
        min_replicas=1,
        max_replicas=2,
        num_cpus=1,
        node_selector={FOR: namespace},
    )
    spec["template"]["spec"]["tolerations"] = [{"key": FOR, "operator": "Exists"}]
    await kube.create(raycluster(bridge.gcs_address, [spec], idle_timeout=600))

    async def worker_in_ray() -> Any:
        pods = [p for p in await kube.workers(NAME, live=True) if p.status.phase == "Running"]
        return pods[0] if len(pods) == 1 and pods[0].metadata.name in bridge.workers() else None

    pod = await eventually(worker_in_ray, timeout=START, message="the worker Running in Ray")
    assert pod.spec.node_name in nodes
    marker = tmp_path / "release"
    async with RayDriver.start(bridge.gcs_address, tmp_path / "driver.log") as ray:
        scene = Busy(kube, client.CoreV1Api(api), ray, bridge, marker)
        await ray.call("task", name="t", marker=str(marker), num_cpus=1)
        started = Path(str(marker) + ".started")
        await eventually(started.exists, timeout=START, message="the task started on the worker")
        yield scene, pod.metadata.name, pod.spec.node_name
        marker.touch()  # let a task still waiting end, so that the driver exits cleanly


async def test_a_cordoned_nodes_busy_worker_drains_and_goes_once_its_task_ends(
    busy: tuple[Busy, str, str],
) -> None:
    scene, worker, node = busy
    await scene.core.patch_node(node, {"spec": {"unschedulable": True}})  # kubectl cordon

    (drained,) = await eventually(
        lambda: scene.events("DisruptionDrain"), timeout=SETTLE, message="the drain"
    )
    assert worker in drained.message
    assert f"no deadline: Node {node} is cordoned" in drained.message
    said = await eventually(scene.condition, timeout=SETTLE, message="the Disruption condition")
    assert said["reason"] == "Draining"
    assert f"{worker} (cordon, no deadline)" in said["message"]

    # The leaving worker no longer counts towards minReplicas: its replacement starts elsewhere.
    other = await eventually(lambda: scene.replacement(worker), timeout=START, message="a replacement in Ray")
    assert other != worker

    async def kept_while_busy() -> bool:
        assert (await scene.outcome())["state"] == "running"
        assert worker in names(await scene.workers()), f"{worker} deleted while its task runs"
        return True

    await holds(kept_while_busy, seconds=5, message=f"{worker} kept while the task runs")
    assert await scene.events("DisruptionDelete") == []

    scene.marker.touch()  # the task ends, on the drained node: 0 tasks failed
    await eventually(scene.finished, timeout=SETTLE, message="the task done")

    async def gone() -> bool:
        return worker not in names(await scene.workers())

    await eventually(gone, timeout=SETTLE, message=f"{worker} deleted once idle")
    (deleted,) = await eventually(
        lambda: scene.events("DisruptionDelete"), timeout=SETTLE, message="the Event"
    )
    # Idle after the drain, or gone from Ray already: a drained raylet exits once it is idle.
    assert "its Ray node is idle after draining" in deleted.message or "no live node" in deleted.message
    assert names(await scene.workers()) == {other}  # the replacement stays: the group's minimum


async def test_a_spot_notice_deletes_the_busy_worker_at_its_deadline_and_its_task_runs_again(
    busy: tuple[Busy, str, str],
) -> None:
    scene, worker, node = busy
    tainted = datetime.now(UTC)
    taint = {"key": RECLAIM, "value": "spot", "effect": "NoSchedule"}
    await scene.core.patch_node(node, {"spec": {"taints": [
        {"key": FOR, "value": scene.kube.ns, "effect": "NoSchedule"}, taint]}})  # fmt: skip

    (drained,) = await eventually(
        lambda: scene.events("DisruptionDrain"), timeout=SETTLE, message="the drain"
    )
    assert worker in drained.message
    assert f"taint {RECLAIM}, configured as a disruption notice" in drained.message
    other = await eventually(lambda: scene.replacement(worker), timeout=START, message="a replacement in Ray")

    async def gone() -> bool:
        return worker not in names(await scene.kube.workers(NAME, live=True))

    await eventually(gone, timeout=DEADLINE + SETTLE, message=f"{worker} deleted at the deadline")
    (deleted,) = await eventually(
        lambda: scene.events("DisruptionDelete"), timeout=SETTLE, message="the Event"
    )
    assert "the notice's deadline passed" in deleted.message
    at = deleted.first_timestamp or deleted.event_time
    assert at >= tainted + timedelta(seconds=DEADLINE - 1), (at, tainted)  # not before the deadline

    # Ray runs the task again on the replacement: it ends there once let go (0 tasks lost).
    scene.marker.touch()
    await eventually(scene.finished, timeout=START, message="the task done after the reclaim")
    assert names(await scene.workers()) == {other}
