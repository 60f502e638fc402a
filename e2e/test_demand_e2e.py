"""Demand beyond one actor: many tasks at once, `request_resources()` from inside Ray, a
RayResourceRequest from outside it, and Conservative upscaling (KubeRay #5, #11, #15)."""

from __future__ import annotations

import time

import pytest
from e2e.harness import Scenario, group
from tests.support.polling import eventually

pytestmark = pytest.mark.timeout(600)

IDLE = 5


async def test_many_tasks_scale_to_max_and_stay(scenario: Scenario) -> None:
    """#5 TestRayClusterAutoscalerWithDesiredState: more tasks than workers -> exactly max workers.

    KubeRay runs 30 tasks of 5-10 s on a group of at most 3 with a 1 h idle timeout; 15 tasks of
    3 s keep every worker busy here too. Once they are done, exactly 3 worker pods exist: the
    group went to its max and no further, and nothing was removed or replaced along the way.
    """
    custom = group("custom-resource-group", max_replicas=3, resources={"CustomResource": 1})
    await scenario.create([custom], idle_timeout=3600)

    demand = time.monotonic()
    await scenario.ray_call("burst", name="burst", count=15, seconds=3, num_cpus=1)
    pods = await scenario.scale_up(demand, 3, "custom-resource-group")

    ran_on: list[str] = await eventually(
        lambda: scenario.ray_call("burst_done", name="burst"),
        timeout=180,
        interval=0.5,
        message="15 tasks done",
    )
    assert len(ran_on) == 15
    assert {await scenario.pod_of(node) for node in set(ran_on)} == set(pods)
    assert scenario.pods.live("custom-resource-group") == pods
    assert sorted(scenario.pods.pods) == pods, "a worker pod was removed or replaced"
    assert await scenario.replicas() == {"custom-resource-group": 3}
    await scenario.wait_desired(3)


async def test_request_resources_from_inside_ray(scenario: Scenario) -> None:
    """#11 TestRayClusterAutoscalerSDKRequestResources, then the request withdrawn -> back to 0."""
    await scenario.create([group("request-group", max_replicas=2)], idle_timeout=IDLE)

    demand = time.monotonic()
    await scenario.ray_call("request_resources", num_cpus=1)
    [pod] = await scenario.scale_up(demand, 1, "request-group")
    await scenario.wait_desired(1)

    # A constraint is a floor, not work: an idle node it covers stays past the idle timeout.
    # Twice the timeout, and rayscale rounds every second.
    await scenario.holds(
        lambda: scenario.pods.live("request-group") == [pod], 2 * IDLE + 2, "the requested worker was removed"
    )

    # Idle for longer than the timeout already: it goes as soon as the request is withdrawn.
    withdrawn = time.monotonic()
    await scenario.ray_call("request_resources", num_cpus=0)
    await scenario.scale_down(
        withdrawn, 0, 0, "request-group", before=[pod], step="request withdrawn -> pod deleted"
    )
    await scenario.wait_desired(0)


@pytest.mark.e2e_smoke
async def test_ray_resource_request(scenario: Scenario) -> None:
    """A RayResourceRequest reserves capacity from outside Ray: 2 x {CPU: 1} -> 2 workers in Ray."""
    await scenario.create([group("cpu-group", max_replicas=3)], idle_timeout=IDLE)

    demand = time.monotonic()
    await scenario.request("reserve", [({"CPU": 1}, 2)])
    pods = await scenario.scale_up(demand, 2, "cpu-group")
    state = await scenario.state()
    for pod in pods:
        node = state.node_by_instance(pod)
        assert node is not None
        assert node.total_resources.get("CPU") == 1

    async def satisfied() -> bool:
        return (await scenario.request_status("reserve")).get("phase") == "Satisfied"

    await eventually(satisfied, timeout=30, message="the RayResourceRequest Satisfied")

    await scenario.delete_request("reserve")
    await scenario.scale_down(time.monotonic(), IDLE, 0, "cpu-group", before=pods)
    assert await scenario.replicas() == {"cpu-group": 0}


async def test_conservative_upscaling(scenario: Scenario) -> None:
    """#15 TestRayClusterAutoscalerUpscalingModeConservative: 10 actors, the first step is at most 5."""
    await scenario.create(
        [group("test-group", max_replicas=10)], idle_timeout=60, upscaling_mode="Conservative"
    )
    demand = time.monotonic()
    for i in range(10):
        await scenario.ray_call("actor", name=f"actor{i}", num_cpus=1)

    async def first_step() -> int:
        return sum((await scenario.replicas()).values())

    # KubeRay polls every 50 ms for the first non-zero replica sum.
    first = await eventually(first_step, timeout=120, interval=0.05, message="a first scale-up")
    assert 0 < first <= 5, f"Conservative mode's first step launched {first} workers"

    pods = await scenario.scale_up(demand, 10, "test-group")
    assert len(pods) == 10
    await scenario.wait_desired(10)
    on = {await scenario.actor_on(f"actor{i}") for i in range(10)}
    assert on == set(pods)
