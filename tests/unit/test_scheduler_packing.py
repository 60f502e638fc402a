"""New hosts packed tighter than Ray's greedy, under Ray's rules (scheduling/packing.py)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.scenarios import decide, demand, launches, node, unmet

from rayscale.autoscaler.scenario import parse_scenario
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling import packing

GI = 1024**3
CPU8 = {"name": "cpu8", "resources": {"CPU": 8, "memory": 32 * GI}}
CPU32 = {"name": "cpu32", "resources": {"CPU": 32, "memory": 128 * GI}}
GPU = {"name": "gpu", "resources": {"CPU": 8, "GPU": 1, "memory": 32 * GI}}


def _placed(decision: dict[str, Any]) -> dict[tuple[tuple[str, float], ...], dict[tuple[str, str], int]]:
    out: dict[tuple[tuple[str, float], ...], dict[tuple[str, str], int]] = {}
    for p in decision["placements"]:
        targets = out.setdefault(tuple(sorted(p["resources"].items())), {})
        for t in p["targets"]:
            targets[(t.get("group", ""), t["on"])] = t["count"]
    return out


def test_cpu_work_fills_the_room_gpu_work_leaves_on_new_gpu_hosts() -> None:
    # Ray's order puts the 4-CPU tasks first: a new GPU host would take two of them and no GPU
    # task, so it scores last until the CPU tasks are placed: 2 CPU hosts and 8 GPU hosts, each
    # with 7 CPUs unused. rayscale puts a CPU task beside each GPU task: 1 CPU host, 8 GPU hosts.
    work = [demand(16, CPU=4, memory=16 * GI), demand(8, CPU=1, GPU=1)]
    decision = decide({"groups": [CPU32, GPU], "demands": work})
    assert launches(decision) == {"cpu32": 1, "gpu": 8}
    assert unmet(decision) == []
    assert _placed(decision)[(("CPU", 4), ("memory", 16 * GI))] == {("gpu", "new"): 8, ("cpu32", "new"): 8}
    # No GPU host is launched for CPU work alone, wherever the GPU group is listed.
    assert launches(decide({"groups": [GPU, CPU32], "demands": [demand(20, CPU=4, memory=16 * GI)]})) == {
        "cpu32": 3
    }


def test_free_gpus_of_running_hosts_take_gpu_work_before_new_gpu_hosts() -> None:
    # Ray's order puts the memory-heavy CPU tasks first: they fill the four running GPU hosts, so
    # the GPU tasks need four new GPU hosts (and the big-memory task a 32-CPU host). rayscale
    # gives each running GPU host a GPU task and one CPU task; the four CPU tasks that no longer
    # fit there share the 32-CPU host: one new host instead of five.
    scenario = {
        "groups": [CPU32, GPU],
        "nodes": [node(f"gpu-{i}", "gpu") for i in range(4)],
        "demands": [
            demand(8, CPU=4, memory=16 * GI),
            demand(4, CPU=1, GPU=1),
            demand(1, CPU=1, memory=64 * GI),
        ],
        "options": {"idleTimeoutSeconds": None},
    }
    decision = decide(scenario)
    assert launches(decision) == {"cpu32": 1}
    assert unmet(decision) == []
    placed = _placed(decision)
    assert placed[(("CPU", 1), ("GPU", 1))] == {("gpu", "running"): 4}
    assert placed[(("CPU", 4), ("memory", 16 * GI))] == {("gpu", "running"): 4, ("cpu32", "new"): 4}


def test_the_greedy_stays_where_packing_is_no_better(monkeypatch: pytest.MonkeyPatch) -> None:
    # One GPU task per 1-GPU host is what both do; the packing is not taken (Ray's choice kept).
    calls: list[bool] = []
    better = packing._better

    def spy(*args: Any) -> bool:
        calls.append(better(*args))
        return calls[-1]

    monkeypatch.setattr(packing, "_better", spy)
    decision = decide({"groups": [CPU8, GPU], "demands": [demand(3, CPU=1, GPU=1)]})
    assert launches(decision) == {"gpu": 3}
    assert calls
    assert not any(calls)


def test_a_large_backlog_is_packed_as_the_small_one() -> None:
    work = [demand(80_000, CPU=4, memory=16 * GI), demand(10_000, CPU=1, GPU=1)]
    decision = schedule(parse_scenario({"groups": [CPU32, GPU], "demands": work}))
    assert {name: g.launch for name, g in decision.groups.items()} == {"cpu32": 8750, "gpu": 10_000}
    assert decision.unmet == ()
