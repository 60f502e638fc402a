"""Placement groups: pods deleted by hand (KubeRay #13 TestRayClusterAutoscalerPlacementGroup), and
an idle worker a pending placement group needs is kept (#10).

A placement group of two 1-CPU bundles scales `cpu-group` to as many workers as its strategy
needs: packed onto one 2-CPU worker, or spread over two. Then the test deletes those pods by hand:
the operator replaces them (replicas are unchanged), the new Ray nodes join, and Ray places the
group again on the new nodes.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from e2e.harness import RAY_JOIN, SCALE_UP, Scenario, group
from tests.support.polling import eventually

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


async def test_idle_worker_needed_by_a_pending_placement_group_is_kept(scenario: Scenario) -> None:
    """#10 TestRayClusterAutoscalerDoNotRemoveIdlesForPlacementGroup (do_not_remove_idles_for_pg.py).

    Workers take 15 s to join (an init container sleeps), the idle timeout is 6 s. PG1 (one
    bundle, STRICT_SPREAD) brings up a worker; PG1 is removed and PG2 (two bundles, STRICT_SPREAD)
    asked at once. The first worker is idle for the whole 15 s the second takes to join, well past
    its idle timeout, yet PG2 needs it: it must stay, and PG2 lands on both.
    """
    slow = group("short-idle-group", max_replicas=2, init_sleep=15)
    await scenario.create([slow], idle_timeout=6)

    demand = time.monotonic()
    await scenario.ray_call("pg", name="pg1", bundles=[{"CPU": 1}], strategy="STRICT_SPREAD")
    slow_join = "with a 15s init-sleep"
    [first] = await scenario.scale_up(demand, 1, "short-idle-group", detail=slow_join)
    assert set((await scenario.pg_nodes("pg1")).values()) == {first}
    before = {n.node_id for n in (await scenario.state()).nodes if n.alive}
    assert len(before) == 2  # the head and the worker

    await scenario.ray_call("remove_pg", name="pg1")
    demand = time.monotonic()
    await scenario.ray_call("pg", name="pg2", bundles=[{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")

    async def pg2_placed() -> dict[str, str] | None:
        if scenario.pods.pods[first].deleting is not None:
            raise RuntimeError(f"the idle worker {first} that the pending PG2 needs was removed")
        nodes: dict[str, str] | None = await scenario.ray_call("pg_nodes", name="pg2")
        return nodes

    await eventually(pg2_placed, timeout=SCALE_UP + RAY_JOIN, interval=0.5, message="PG2 ready")
    pods = await scenario.scale_up(demand, 2, "short-idle-group", before=[first], detail=slow_join)
    assert first in pods
    assert set((await scenario.pg_nodes("pg2")).values()) == set(pods)
    after = {n.node_id for n in (await scenario.state()).nodes if n.alive}
    assert before <= after
    assert len(after) == 3
    assert first not in {e.pod for e in scenario.bridge.history("stopped")}
