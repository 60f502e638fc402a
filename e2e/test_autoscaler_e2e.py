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
from tests.support.polling import eventually

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
    await scenario.wait_desired(1)

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
    await scenario.wait_desired(0)
    state = await scenario.state()
    assert not [n for n in state.nodes if n.alive and n.instance_id], "Ray still has worker nodes"


async def _one_actor_up_and_down(scenario: Scenario, group_name: str, **actor: object) -> str:
    """Actor -> one pod of `group_name` runs it; kill -> back to 0 workers after the idle timeout."""
    demand = time.monotonic()
    await scenario.ray_call("actor", name="actor", **actor)
    [pod] = await scenario.scale_up(demand, 1, group_name)
    assert await scenario.actor_on("actor") == pod
    await scenario.wait_desired(1)
    await scenario.ray_call("kill", name="actor")
    await scenario.scale_down(time.monotonic(), IDLE, 0, before=[pod])
    await scenario.wait_desired(0)
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


async def test_raising_min_replicas(scenario: Scenario) -> None:
    """#6 TestRayClusterAutoscalerMinReplicasUpdate: min 0 -> 2 adds a worker; 3 actors -> 3."""
    # KubeRay's default idle timeout: the idle first worker must not go while the test runs.
    await scenario.create([group("test-group", replicas=1, max_replicas=3)], idle_timeout=60)
    [first] = scenario.pods.live("test-group")

    demand = time.monotonic()
    await scenario.set_group("test-group", "minReplicas", 2)
    two = await scenario.scale_up(demand, 2, "test-group", before=[first])
    await scenario.wait_desired(2)

    demand = time.monotonic()
    for i in range(3):
        await scenario.ray_call("actor", name=f"actor{i}", num_cpus=1)
    three = await scenario.scale_up(demand, 3, "test-group", before=two)
    assert sorted([await scenario.actor_on(f"actor{i}") for i in range(3)]) == three
    assert await scenario.replicas() == {"test-group": 3}
    await scenario.wait_desired(3)


@pytest.mark.parametrize("new_max", [3, 1])
async def test_changing_max_replicas(scenario: Scenario, new_max: int) -> None:
    """#7 TestRayClusterAutoscalerMaxReplicasUpdate: 2 -> 3 grows it; 2 -> 1 removes a busy worker."""
    await scenario.create([group("test-group", replicas=1, min_replicas=1, max_replicas=2)], idle_timeout=60)
    [first] = scenario.pods.live("test-group")
    actors = [f"actor{i}" for i in range(max(2, new_max))]
    demand = time.monotonic()
    for name in actors:
        await scenario.ray_call("actor", name=name, num_cpus=1)
    two = await scenario.scale_up(demand, 2, "test-group", before=[first])
    assert await scenario.replicas() == {"test-group": 2}

    demand = time.monotonic()
    await scenario.set_group("test-group", "maxReplicas", new_max)
    if new_max > 2:
        left = await scenario.scale_up(demand, new_max, "test-group", before=two)
        assert sorted([await scenario.actor_on(a) for a in actors]) == left
    else:
        [left_pod] = await scenario.wait_workers(new_max, "test-group")
        await eventually(
            lambda: _dead_or_gone(scenario, [p for p in two if p != left_pod]),
            timeout=60,
            message="the removed worker's Ray node gone",
        )
    assert await scenario.replicas() == {"test-group": new_max}
    await scenario.wait_desired(new_max)


async def _dead_or_gone(scenario: Scenario, pods: list[str]) -> bool:
    state = await scenario.state()
    return all((node := state.node_by_instance(p)) is None or not node.alive for p in pods)


async def test_group_idle_timeouts(scenario: Scenario) -> None:
    """#8 TestRayClusterAutoscalerV2IdleTimeout: a 10 s group goes before a 30 s group idle as long.

    Each actor needs a custom resource only its group's nodes have: by CPUs alone, the 1-CPU actor
    may land on the 2-CPU node when that node joins Ray first, leaving the 2-CPU actor nowhere.
    """
    await scenario.create(
        [
            group("short-idle-timeout-group", max_replicas=1, idle_timeout=10, resources={"short": 1}),
            group(
                "long-idle-timeout-group", max_replicas=1, num_cpus=2, idle_timeout=30, resources={"long": 1}
            ),
        ],
        idle_timeout=60,
    )
    demand = time.monotonic()
    await scenario.ray_call("actor", name="short", num_cpus=1, resources={"short": 1})
    await scenario.ray_call("actor", name="long", num_cpus=2, resources={"long": 1})
    pods = await scenario.scale_up(demand, 2)
    short, long = (scenario.pods.live(g)[0] for g in ("short-idle-timeout-group", "long-idle-timeout-group"))
    assert {await scenario.actor_on("short"), await scenario.actor_on("long")} == {short, long} == set(pods)

    await scenario.ray_call("kill", name="short")
    await scenario.ray_call("kill", name="long")
    idle_from = time.monotonic()
    await scenario.scale_down(idle_from, 10, 0, "short-idle-timeout-group", before=[short])
    assert scenario.pods.live("long-idle-timeout-group") == [long], "the 30 s group went with the 10 s one"
    await scenario.scale_down(idle_from, 30, 0, "long-idle-timeout-group", before=[long])
    short_gone = scenario.pods.pods[short].deleting
    long_gone = scenario.pods.pods[long].deleting
    assert short_gone is not None
    assert long_gone is not None
    # Idle timeouts are lower bounds: neither pod went before its group's timeout.
    assert short_gone - idle_from >= 10
    assert long_gone - idle_from >= 30
