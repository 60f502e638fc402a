"""Disruption notices in a RayCluster rayscale runs but does not autoscale (``enableInTreeAutoscaling:
false``), with a real Ray: `rayscale run --mode all` on the local control plane, the e2e Ray bridge
(a real Ray head, a real ``ray start`` worker for each Running worker pod) and a Ray task that
blocks until the test lets it end.

Each test makes two kwok Nodes of its own (labelled and tainted for its worker group alone) and a
RayCluster whose group ``cpu`` has ``replicas: 1`` (1 CPU) and no autoscaling: its one worker runs
on one of them, busy with the task. Then that Node announces its end:

1. **a cordon** (under ``--mode all``, and under ``--mode controller``): Ray's node is asked to
   drain (``DisruptionDrain``, ``PREEMPTION``), the ``Disruption`` condition names the pod; the pod
   stays while the task runs and nothing replaces it yet (the replicas are the user's: no second
   pod); once the task ended on the drained node (0 tasks failed, none run again) rayscale deletes
   the pod (``DisruptionDelete``), the controller creates the replacement, on the other Node, and
   the condition is gone;
2. **a hard notice** (a taint configured with ``--disruption-notice taint:KEY=20``): the same drain,
   and the pod is deleted at the deadline though the task still runs; the replacement starts once
   it is gone and Ray runs the task again there (0 tasks failed).

Nothing sleeps: every wait polls with a deadline, and what must not happen is watched for (`holds`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from e2e.harness import NAME, group, raycluster
from e2e.raybridge.bridge import RayBridge
from e2e.raybridge.driver import RayDriver
from hack.localk8s import testcluster

from tests.support.disruption_nodes import FOR, own_nodes, pin
from tests.support.kube import Kube, names
from tests.support.operators import AUTOSCALING_EXTRA, Operator, running
from tests.support.polling import eventually, holds
from tests.support.ray_tasks import Tasks, bridge_for, cluster_events, in_ray

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray 2.60 (the dev extra)"),
    pytest.mark.timeout(300),
]

RECLAIM = "rayscale.test/reclaim"  # the hard taint, configured with --disruption-notice
DEADLINE = 20  # its seconds
START = 120.0  # a worker pod Running with its Ray node, on a busy 2-core machine
SETTLE = 60.0  # rayscale's rounds and the controller's work after a change


@pytest.fixture
def ray_nodes(
    cluster: testcluster.ClusterHandle, namespace: str, tmp_path: Path
) -> Iterator[tuple[list[str], RayBridge]]:
    """Two kwok Nodes for this test's worker group alone (the local control plane only), and the
    Ray bridge: a real Ray head, a real Ray node for each Running worker pod. Each loop runs once:
    its generator's teardown runs when it ends."""
    for nodes in own_nodes(cluster, namespace, 2):
        for bridge in bridge_for(cluster.kubeconfig, namespace, NAME, tmp_path / "ray"):
            yield nodes, bridge


@pytest.fixture
def operator(
    cluster: testcluster.ClusterHandle, namespace: str, raycluster_crd: None, request: pytest.FixtureRequest
) -> Iterator[Operator]:
    """`rayscale run --mode all` (or the mode a test gives as its parameter), rounds every second,
    with the hard taint configured."""
    mode = getattr(request, "param", "all")
    extra = (*AUTOSCALING_EXTRA, "--disruption-notice", f"taint:{RECLAIM}={DEADLINE}")
    yield from running(Operator(cluster, namespace, mode=mode, extra=extra), request)


def fixed_cluster(gcs_address: str, namespace: str, *, in_tree: bool = False) -> dict[str, Any]:
    """The RayCluster without autoscaling: group ``cpu``, replicas 1, on the test's Nodes. With
    `in_tree`: in-tree autoscaling on, which under ``--mode controller`` is Ray's own autoscaler
    in the head (the bridge runs none: the replicas stay as written)."""
    body = raycluster(gcs_address, [dict(pin(group("cpu", replicas=1, num_cpus=1), namespace))])
    body["spec"]["enableInTreeAutoscaling"] = in_tree
    if not in_tree:
        body["spec"].pop("autoscalerOptions", None)
    return body


async def condition(kube: Kube) -> dict[str, Any] | None:
    auto = ((await kube.get(NAME)).get("status") or {}).get("autoscaler") or {}
    return next((c for c in auto.get("conditions") or [] if c.get("type") == "Disruption"), None)


@pytest.fixture
async def busy(
    kube: Kube,
    ray_nodes: tuple[list[str], RayBridge],
    operator: Operator,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[Tasks, Any]]:
    """(the task ``t``, running on the one worker; that worker's pod). Parameter: in-tree
    autoscaling on (default off)."""
    nodes, bridge = ray_nodes
    in_tree = getattr(request, "param", False)
    await kube.create(fixed_cluster(bridge.gcs_address, kube.ns, in_tree=in_tree))
    (pod,) = await eventually(
        lambda: in_ray(kube, bridge, NAME, 1), timeout=START, message="the worker in Ray"
    )
    assert pod.spec.node_name in nodes
    async with RayDriver.start(bridge.gcs_address, tmp_path / "driver.log") as ray:
        tasks = Tasks(ray, tmp_path)
        await tasks.start("t", timeout=START, num_cpus=1)
        yield tasks, pod
        tasks.release()  # a task still waiting ends, so that the driver exits cleanly


async def replaced(kube: Kube, bridge: RayBridge, old: str, nodes: list[str], gone_from: str) -> Any:
    """The replacement worker, in Ray, on the Node that has no notice."""
    (new,) = await eventually(
        lambda: in_ray(kube, bridge, NAME, 1, exclude=[old]), timeout=START, message="the replacement in Ray"
    )
    assert new.spec.node_name in set(nodes) - {gone_from}
    return new


@pytest.mark.parametrize(
    ("operator", "busy"),
    [("all", False), ("controller", False), ("controller", True)],  # True: Ray's own autoscaler's
    indirect=True,
)
async def test_a_cordoned_nodes_busy_worker_drains_goes_once_idle_and_is_replaced_then(
    kube: Kube, ray_nodes: tuple[list[str], RayBridge], busy: tuple[Tasks, Any]
) -> None:
    (nodes, bridge), (tasks, pod) = ray_nodes, busy
    worker, node = pod.metadata.name, pod.spec.node_name
    await kube.core.patch_node(node, {"spec": {"unschedulable": True}})  # kubectl cordon

    (drained,) = await eventually(
        lambda: cluster_events(kube, NAME, "DisruptionDrain"), timeout=SETTLE, message="the drain"
    )
    assert f"pod {worker} of worker group cpu, no deadline: Node {node} is cordoned" in drained.message
    said = await eventually(lambda: condition(kube), timeout=SETTLE, message="the Disruption condition")
    assert said["reason"] == "Draining"
    assert f"{worker} (cordon, no deadline)" in said["message"]

    async def kept_alone_while_busy() -> bool:
        assert await tasks.running("t")
        assert names(await kube.workers(NAME, live=True)) == {worker}, "deleted or replaced while busy"
        return True

    await holds(kept_alone_while_busy, seconds=5, message=f"{worker} kept, not replaced, while the task runs")
    assert await cluster_events(kube, NAME, "DisruptionDelete") == []

    tasks.release()  # the task ends on the drained node
    outcomes = await eventually(tasks.ended, timeout=SETTLE, message="the task done")
    assert tasks.tally(outcomes) == {"tasks": 1, "kept": 1, "run_again": 0, "failed": 0}, outcomes

    (deleted,) = await eventually(
        lambda: cluster_events(kube, NAME, "DisruptionDelete"), timeout=SETTLE, message="the deletion"
    )
    # Idle after the drain, or gone from Ray already: a drained raylet exits once it is idle.
    assert "its Ray node is idle after draining" in deleted.message or "no live node" in deleted.message
    await replaced(kube, bridge, worker, nodes, node)

    async def cleared() -> bool:
        return await condition(kube) is None

    await eventually(cleared, timeout=SETTLE, message="the Disruption condition gone")
    assert len(await cluster_events(kube, NAME, "DisruptionDelete")) == 1


async def test_a_hard_notice_deletes_the_busy_worker_at_its_deadline_and_its_task_runs_again(
    kube: Kube, ray_nodes: tuple[list[str], RayBridge], busy: tuple[Tasks, Any]
) -> None:
    (nodes, bridge), (tasks, pod) = ray_nodes, busy
    worker, node = pod.metadata.name, pod.spec.node_name
    tainted = datetime.now(UTC)
    taint = {"key": RECLAIM, "value": "reclaim", "effect": "NoSchedule"}
    await kube.core.patch_node(node, {"spec": {"taints": [
        {"key": FOR, "value": kube.ns, "effect": "NoSchedule"}, taint]}})  # fmt: skip

    (drained,) = await eventually(
        lambda: cluster_events(kube, NAME, "DisruptionDrain"), timeout=SETTLE, message="the drain"
    )
    assert f"pod {worker} of worker group cpu, deadline " in drained.message
    assert f"taint {RECLAIM}, configured as a disruption notice" in drained.message
    said = await eventually(lambda: condition(kube), timeout=SETTLE, message="the Disruption condition")
    assert f"{worker} (taint:{RECLAIM}, deadline " in said["message"]

    async def gone() -> bool:
        return worker not in names(await kube.workers(NAME, live=True))

    await eventually(gone, timeout=DEADLINE + SETTLE, message=f"{worker} deleted at the deadline")
    (deleted,) = await eventually(
        lambda: cluster_events(kube, NAME, "DisruptionDelete"), timeout=SETTLE, message="the Event"
    )
    assert "the notice's deadline passed" in deleted.message
    at = deleted.first_timestamp or deleted.event_time
    assert at >= tainted + timedelta(seconds=DEADLINE - 1), (at, tainted)  # not before the deadline
    await replaced(kube, bridge, worker, nodes, node)

    # Ray runs the task again on the replacement: it ends there once let go (0 tasks failed).
    tasks.release()
    outcomes = await eventually(tasks.ended, timeout=START, message="the task done after the reclaim")
    assert tasks.tally(outcomes) == {"tasks": 1, "kept": 0, "run_again": 1, "failed": 0}, outcomes
