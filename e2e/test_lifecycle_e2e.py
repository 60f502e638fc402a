"""A cluster's life under the autoscaler: busy nodes are never lost, a worker group added to a live
cluster (KubeRay #12), a multi-host group scaled as whole replicas (KubeRay #3, 2 hosts)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from e2e.harness import Scenario, group
from tests.support.polling import eventually

pytestmark = pytest.mark.timeout(600)

IDLE = 5


@pytest.mark.e2e_smoke
async def test_a_node_running_a_task_is_never_drained(scenario: Scenario) -> None:
    """Two tasks on two workers; the one whose task ends goes after the idle timeout, the busy one
    stays (many idle timeouts long) until its task ends, and the task's result is read."""
    await scenario.create([group("cpu-group", max_replicas=2)], idle_timeout=IDLE)
    short, long = scenario.tmp / "short", scenario.tmp / "long"

    demand = time.monotonic()
    await scenario.ray_call("task", name="short", marker=str(short), num_cpus=1)
    await scenario.ray_call("task", name="long", marker=str(long), num_cpus=1)
    pods = await scenario.scale_up(demand, 2, "cpu-group")
    short_pod = await scenario.pod_of(await _started(scenario, short))
    long_pod = await scenario.pod_of(await _started(scenario, long))
    assert {short_pod, long_pod} == set(pods)

    short.touch()  # the short task ends; its node idles and goes, the busy one stays
    assert await _result(scenario, "short") == await _node_of(scenario, short_pod)
    await scenario.scale_down(time.monotonic(), IDLE, 1, "cpu-group", before=pods)
    assert scenario.pods.live("cpu-group") == [long_pod]

    async def busy_node_kept() -> bool:
        node = (await scenario.state()).node_by_instance(long_pod)
        return scenario.pods.live("cpu-group") == [long_pod] and node is not None and node.alive

    await scenario.holds(busy_node_kept, 4 * IDLE, "the node running a task was removed")
    assert not scenario.bridge.history("stopped", long_pod), "the busy node's Ray worker was stopped"

    long.touch()
    assert await _result(scenario, "long") == await _node_of(scenario, long_pod)
    await scenario.scale_down(time.monotonic(), IDLE, 0, "cpu-group", before=[long_pod])
    assert await scenario.replicas() == {"cpu-group": 0}


async def test_adding_a_worker_group_to_a_live_cluster(scenario: Scenario) -> None:
    """#12 TestRayClusterAutoscalerAddNewWorkerGroup."""
    await scenario.create([group("cpu-group", max_replicas=3)], idle_timeout=10)
    demand = time.monotonic()
    await scenario.ray_call("actor", name="cpu_actor", num_cpus=1)
    [cpu_pod] = await scenario.scale_up(demand, 1, "cpu-group")

    await scenario.add_group(group("gpu-group", max_replicas=3, num_cpus=0, gpus=1))
    demand = time.monotonic()
    await scenario.ray_call("actor", name="gpu_actor", num_cpus=0, num_gpus=1)
    [gpu_pod] = await scenario.scale_up(demand, 1, "gpu-group")
    assert await scenario.actor_on("gpu_actor") == gpu_pod

    demand = time.monotonic()
    await scenario.ray_call("actor", name="cpu_actor_2", num_cpus=1)
    cpu_pods = await scenario.scale_up(demand, 2, "cpu-group", before=[cpu_pod])
    assert await scenario.actor_on("cpu_actor_2") in cpu_pods

    await scenario.ray_call("kill", name="gpu_actor")
    await scenario.scale_down(time.monotonic(), 10, 0, "gpu-group", before=[gpu_pod])
    assert scenario.pods.live("cpu-group") == cpu_pods
    assert await scenario.replicas() == {"cpu-group": 2, "gpu-group": 0}


async def test_multi_host_group_scales_whole_replicas(scenario: Scenario) -> None:
    """#3 TestRayClusterAutoscalerWithFakeTPU (multi-host), 2 hosts: one replica = both hosts, up and down."""
    await scenario.create(
        [group("tpu-group", max_replicas=2, hosts=2, resources={"TPU": 4})], idle_timeout=IDLE
    )
    demand = time.monotonic()
    for i in range(2):
        await scenario.ray_call("actor", name=f"tpu{i}", num_cpus=1, resources={"TPU": 4})
    hosts = await scenario.scale_up(demand, 2, "tpu-group")
    assert await scenario.replicas() == {"tpu-group": 1}
    assert {await scenario.actor_on(f"tpu{i}") for i in range(2)} == set(hosts)
    pods = await scenario.kube.workers("ray-cluster", group="tpu-group", live=True)
    replica_names = {p.metadata.labels.get("ray.io/worker-group-replica-name") for p in pods}
    assert len(replica_names) == 1, replica_names
    assert None not in replica_names, "multi-host pods carry ray.io/worker-group-replica-name"

    await scenario.ray_call("kill", name="tpu0")  # one host idle is not a removable replica
    await scenario.holds(
        lambda: scenario.pods.live("tpu-group") == hosts, 3 * IDLE, "a host of a busy replica was removed"
    )
    await scenario.ray_call("kill", name="tpu1")
    await scenario.scale_down(time.monotonic(), IDLE, 0, "tpu-group", before=hosts)
    gone = [scenario.pods.pods[h].deleting for h in hosts]
    assert all(t is not None for t in gone)
    assert await scenario.replicas() == {"tpu-group": 0}


async def _started(scenario: Scenario, marker: Path) -> str:
    """The Ray node id the task holding `marker` runs on, once it runs."""
    return await scenario.started_on(marker)


async def _result(scenario: Scenario, task: str) -> str:
    value: str = await eventually(
        lambda: scenario.ray_call("task_result", name=task), timeout=60, message=f"task {task}'s result"
    )
    return value


async def _node_of(scenario: Scenario, pod: str) -> str:
    node = (await scenario.state()).node_by_instance(pod)
    assert node is not None
    return node.node_id
