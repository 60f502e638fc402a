"""Demand that is not a task or an actor: `request_resources()` from inside Ray, a
RayResourceRequest from outside it, and Conservative upscaling (KubeRay #11, #15)."""

from __future__ import annotations

import time

import pytest
from e2e.harness import Scenario, group
from tests.integration.polling import eventually

pytestmark = pytest.mark.timeout(600)

IDLE = 5


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
