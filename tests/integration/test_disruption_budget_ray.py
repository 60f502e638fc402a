"""`kubectl drain` of a busy Ray worker's Node, its RayCluster opted into PodDisruptionBudgets
(``rayscale.io/disruption-budget: "true"``), with a real Ray: `rayscale run --mode all` on the
local control plane, the e2e Ray bridge (a real Ray head, a real ``ray start`` worker for each
Running worker pod) and a Ray task that blocks until the test lets it end.

The worker group ``cpu`` (1 CPU a worker, ``minReplicas: 1``, ``maxReplicas: 2``) has its one
worker on one of two kwok Nodes of the test's own, running the task. The Eviction API refuses the
worker (429, "Cannot evict pod as it would violate the pod's disruption budget"), then a real
``kubectl drain`` of that Node cordons it and evicts the worker, retrying while it is refused:

- every eviction is refused while the task runs, and the pod stays;
- rayscale reads the cordon as a notice: Ray's node is asked to drain (``DisruptionDrain``), a
  replacement starts on the other Node at once (the leaving worker no longer counts towards the
  minimum);
- once the task has ended, on the drained node (0 tasks failed, none run again), **rayscale
  deletes the pod itself** (``DisruptionDelete``). That is the design (controller/budgets.py): the
  budget never lets an eviction of a Ready worker through, and a deletion is not an eviction;
  ``kubectl drain``'s next try finds the pod terminating or gone (an eviction of a terminating
  pod is not checked against budgets) and the drain completes, exit 0.

What the API server answers: the budget (an integer ``minAvailable``, which the disruption
controller computes without the pods' owner) allows no disruption, and each eviction is refused
with 429, "Cannot evict pod as it would violate the pod's disruption budget"; kubectl prints it and
tries again every 5 s. The test prints the answer and the budget's status.

Nothing sleeps: every wait polls with a deadline, and what must not happen is watched for (`holds`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.harness import NAME, group, raycluster
from e2e.raybridge.bridge import RayBridge
from e2e.raybridge.driver import RayDriver
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from rayscale.api.disruption_annotations import DISRUPTION_BUDGET_ANNOTATION
from tests.support.disruption_nodes import drain, evict, own_nodes, pin
from tests.support.kube import Kube, names
from tests.support.operators import Operator
from tests.support.polling import eventually, holds
from tests.support.ray_tasks import Tasks, bridge_for, cluster_events, in_ray

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray 2.60 (the dev extra)"),
    pytest.mark.timeout(480),
]

START = 120.0  # a worker pod Running with its Ray node, on a busy 2-core machine
SETTLE = 60.0  # rayscale's rounds and the controller's work after a change
DRAIN_RETRY = 5.0  # kubectl drain's wait between two evictions a budget refused
RETRY_AFTER = 10.0  # an eviction's 429 may say Retry-After 10 s, which kubectl's client waits by itself


@pytest.fixture
def nodes(cluster: testcluster.ClusterHandle, namespace: str) -> Iterator[list[str]]:
    yield from own_nodes(cluster, namespace, 2)


@pytest.fixture
def bridge(cluster: testcluster.ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[RayBridge]:
    yield from bridge_for(cluster.kubeconfig, namespace, NAME, tmp_path / "ray")


async def budgets_in_place(kube: Kube) -> dict[str, Any] | None:
    found = await kube.condition(NAME, "DisruptionBudgets")
    return found if found is not None and found["reason"] == "BudgetsInPlace" else None


def ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


async def test_kubectl_drain_is_refused_by_the_budget_until_rayscale_deletes_the_drained_idle_worker(
    api: client.ApiClient,
    cluster: testcluster.ClusterHandle,
    namespace: str,
    nodes: list[str],
    bridge: RayBridge,
    autoscaling_operator: Operator,
    tmp_path: Path,
) -> None:
    kube = Kube(api, namespace)
    spec = pin(group("cpu", replicas=1, min_replicas=1, max_replicas=2, num_cpus=1), namespace)
    budget = {DISRUPTION_BUDGET_ANNOTATION: "true"}
    await kube.create(raycluster(bridge.gcs_address, [spec], idle_timeout=600, annotations=budget))
    (pod,) = await eventually(
        lambda: in_ray(kube, bridge, NAME, 1), timeout=START, message="the worker in Ray"
    )
    worker, node = pod.metadata.name, pod.spec.node_name
    assert node in nodes

    async def is_ready() -> bool:
        return ready(await kube.core.read_namespaced_pod(worker, namespace))

    await eventually(is_ready, timeout=SETTLE, message="the worker Ready (a budget protects Ready pods only)")
    said = await eventually(lambda: budgets_in_place(kube), timeout=SETTLE, message="the budgets in place")
    assert "worker group cpu" in said["message"]

    async with RayDriver.start(bridge.gcs_address, tmp_path / "driver.log") as ray:
        tasks = Tasks(ray, tmp_path)
        first = await tasks.start("t", timeout=START, num_cpus=1)

        status, text = await evict(
            kube.core, namespace, worker
        )  # the Eviction API, as kubectl drain calls it
        pdb = await client.PolicyV1Api(api).read_namespaced_pod_disruption_budget(
            f"{NAME}-pdb-worker-cpu", namespace
        )
        print(f"eviction: {status} {text}\nbudget status: {pdb.status}")  # for the report
        assert status == 429, (text, pdb.status)
        assert "Cannot evict pod as it would violate the pod's disruption budget" in text

        async with drain(cluster, node, tmp_path / "kubectl-drain.log") as kubectl:
            # kubectl drain: the cordon, then evictions refused by the budget while the task runs
            await eventually(
                lambda: f"evicting pod {namespace}/{worker}" in kubectl.output(),
                timeout=SETTLE,
                message="evicting",
            )

            (drained,) = await eventually(
                lambda: cluster_events(kube, NAME, "DisruptionDrain"), timeout=SETTLE, message="the drain"
            )
            assert worker in drained.message
            assert f"Node {node} is cordoned" in drained.message
            (other,) = await eventually(
                lambda: in_ray(kube, bridge, NAME, 1, exclude=[worker]),
                timeout=START,
                message="a replacement",
            )
            assert other.spec.node_name != node

            async def refused_while_busy() -> bool:
                assert await tasks.running("t")
                assert worker in names(await kube.workers(NAME, live=True)), (
                    f"{worker} went while its task runs"
                )
                assert kubectl.exit_code() is None, kubectl.output()
                return True

            await holds(refused_while_busy, seconds=2 * DRAIN_RETRY + 1, message="the worker kept while busy")
            status, text = await evict(kube.core, namespace, worker)
            assert status == 429, text  # still refused while the task runs
            assert await cluster_events(kube, NAME, "DisruptionDelete") == []

            tasks.release()  # the task ends on the drained node
            outcomes = await eventually(tasks.ended, timeout=SETTLE, message="the task done")
            assert tasks.tally(outcomes) == {"tasks": 1, "kept": 1, "run_again": 0, "failed": 0}, outcomes
            assert outcomes["t"]["value"] == first

            await eventually(
                lambda: kubectl.exit_code() is not None,
                timeout=SETTLE + RETRY_AFTER,
                message="the drain done",
            )
            assert kubectl.exit_code() == 0, kubectl.output()

    (deleted,) = await eventually(
        lambda: cluster_events(kube, NAME, "DisruptionDelete"), timeout=SETTLE, message="rayscale's deletion"
    )
    assert worker in deleted.message
    # Idle after the drain, or gone from Ray already: a drained raylet exits once it is idle.
    assert "its Ray node is idle after draining" in deleted.message or "no live node" in deleted.message
    assert names(await kube.workers(NAME, live=True)) == {other.metadata.name}  # the group's minimum
