"""KubeRay's autoscaler e2e scenarios (ray-operator/test/e2eautoscaler), with a real Ray.

Each test: a RayCluster on the local control plane autoscaled by `rayscale run`, a real Ray head and
a real Ray worker per Running worker pod (the bridge), and a Ray driver that creates the demand
(actors, tasks, placement groups, request_resources). Assertions are on the API objects and on
Ray's own view (the GCS). Idle timeouts are shorter than KubeRay's defaults to keep the suite short.
"""

from __future__ import annotations

import time

import pytest
from e2e.harness import Scenario, group

pytestmark = pytest.mark.timeout(600)

IDLE = 5  # seconds; KubeRay's tests use the 60 s default


@pytest.mark.e2e_smoke
async def test_cpu_actors_scale_up_and_back_to_zero(scenario: Scenario) -> None:
    """#1 TestRayClusterAutoscaler: actor -> 1 worker, second actor -> 2, kill both -> 0."""
    await scenario.create([group("small-group", max_replicas=3)], idle_timeout=IDLE)

    demand = time.monotonic()
    await scenario.ray_call("actor", name="actor1", num_cpus=1)
    [first] = await scenario.scale_up(demand, 1, "small-group")
    assert await scenario.actor_on("actor1") == first
    assert await scenario.desired() == 1

    demand = time.monotonic()
    await scenario.ray_call("actor", name="actor2", num_cpus=1)
    both = await scenario.scale_up(demand, 2, "small-group", before=[first])
    assert await scenario.actor_on("actor2") in both
    assert await scenario.replicas() == {"small-group": 2}

    await scenario.ray_call("kill", name="actor1")
    idle_from = time.monotonic()
    await scenario.scale_down(idle_from, IDLE, 1, "small-group", before=both)
    [left] = scenario.pods.live("small-group")
    assert left == await scenario.actor_on("actor2")  # the busy node stays

    await scenario.ray_call("kill", name="actor2")
    idle_from = time.monotonic()
    await scenario.scale_down(idle_from, IDLE, 0, "small-group", before=[left])
    assert await scenario.replicas() == {"small-group": 0}
    assert await scenario.desired() == 0
    state = await scenario.state()
    assert not [n for n in state.nodes if n.alive and n.instance_id], "Ray still has worker nodes"


async def _one_actor_up_and_down(scenario: Scenario, group_name: str, **actor: object) -> str:
    """Actor -> one pod of `group_name` runs it; kill -> back to 0 workers after the idle timeout."""
    demand = time.monotonic()
    await scenario.ray_call("actor", name="actor", **actor)
    [pod] = await scenario.scale_up(demand, 1, group_name)
    assert await scenario.actor_on("actor") == pod
    assert await scenario.desired() == 1
    await scenario.ray_call("kill", name="actor")
    await scenario.scale_down(time.monotonic(), IDLE, 0, before=[pod])
    assert await scenario.desired() == 0
    return pod


async def test_fake_gpu_group(scenario: Scenario) -> None:
    """#2 TestRayClusterAutoscalerWithFakeGPU: a GPU actor scales the GPU group only."""
    await scenario.create(
        [group("cpu-group", max_replicas=3), group("gpu-group", max_replicas=3, gpus=1)], idle_timeout=IDLE
    )
    pod = await _one_actor_up_and_down(scenario, "gpu-group", num_cpus=1, num_gpus=1)
    node = scenario.pods.pods[pod]
    assert node.group == "gpu-group"
    assert [p for p, t in scenario.pods.pods.items() if t.group == "cpu-group"] == []


async def test_custom_resource(scenario: Scenario) -> None:
    """#4 TestRayClusterAutoscalerWithCustomResource."""
    await scenario.create(
        [
            group("cpu-group", max_replicas=3),
            group("custom-resource-group", max_replicas=3, resources={"CustomResource": 1}),
        ],
        idle_timeout=IDLE,
    )
    pod = await _one_actor_up_and_down(
        scenario, "custom-resource-group", num_cpus=1, resources={"CustomResource": 1}
    )
    assert scenario.pods.pods[pod].group == "custom-resource-group"
    assert [p for p, t in scenario.pods.pods.items() if t.group == "cpu-group"] == []


async def test_gpu_nodes_take_cpu_work_when_no_other_group_exists(scenario: Scenario) -> None:
    """#9 TestRayClusterAutoscalerGPUNodesForCPUTasks."""
    await scenario.create([group("gpu-group", max_replicas=3, gpus=1)], idle_timeout=IDLE)
    pod = await _one_actor_up_and_down(scenario, "gpu-group", num_cpus=1)
    assert scenario.pods.pods[pod].group == "gpu-group"
