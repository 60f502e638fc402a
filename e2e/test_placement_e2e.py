"""Placement groups and pods deleted by hand (KubeRay #13 TestRayClusterAutoscalerPlacementGroup).

A placement group of two 1-CPU bundles scales `cpu-group` to as many workers as its strategy
needs: packed onto one 2-CPU worker, or spread over two. Then the test deletes those pods by hand:
the operator replaces them (replicas are unchanged), the new Ray nodes join, and Ray places the
group again on the new nodes.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from e2e.harness import Scenario, group
from tests.integration.polling import eventually

pytestmark = pytest.mark.timeout(600)

IDLE = 10  # KubeRay's value for this test


@pytest.mark.parametrize(
    ("strategy", "num_cpus", "pods"),
    [
        pytest.param("STRICT_PACK", 2, 1, id="STRICT_PACK"),
        pytest.param("PACK", 2, 1, id="PACK"),
        pytest.param("STRICT_SPREAD", 2, 2, id="STRICT_SPREAD", marks=pytest.mark.e2e_smoke),
        pytest.param("SPREAD", 1, 2, id="SPREAD"),
    ],
)
async def test_placement_group(scenario: Scenario, strategy: str, num_cpus: int, pods: int) -> None:
    await scenario.create([group("cpu-group", max_replicas=3, num_cpus=num_cpus)], idle_timeout=IDLE)

    demand = time.monotonic()
    await scenario.ray_call("pg", name="detached_pg", bundles=[{"CPU": 1}, {"CPU": 1}], strategy=strategy)
    first = await scenario.scale_up(demand, pods, "cpu-group")
    placed = await scenario.pg_nodes("detached_pg")
    assert sorted(set(placed.values())) == first, f"{strategy}: bundles on {placed}, workers {first}"
    assert await scenario.replicas() == {"cpu-group": pods}

    # Pods deleted by hand are replaced; Ray places the group again on the new nodes.
    deleted = time.monotonic()
    await asyncio.gather(*(scenario.kube.delete_pod(p) for p in first))
    second = await scenario.wait_workers(pods, "cpu-group")
    assert not set(second) & set(first), "the deleted pods are still there"
    await scenario.nodes_alive(second)
    scenario.record("pods deleted by hand -> new Ray nodes alive", time.monotonic() - deleted, pods)

    async def placed_on_new_nodes() -> dict[str, str] | None:
        again = await scenario.pg_nodes("detached_pg")
        return again if set(again.values()) == set(second) else None

    await eventually(placed_on_new_nodes, timeout=120, message=f"{strategy} group placed on {second}")
    assert await scenario.replicas() == {"cpu-group": pods}
