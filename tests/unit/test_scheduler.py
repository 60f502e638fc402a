"""The scheduler's behaviours, as tables of scenarios (the `rayscale simulate` format)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.scenarios import cpu, decide, demand, launches, node, removed, unmet

GI = 1024**3


CASES: list[tuple[str, dict[str, Any], dict[str, int], dict[str, str], list[tuple[str, int, str]]]] = [
    # (id, scenario, launches, removals, unmet)
    ("min-launch", {"groups": [cpu("a", minReplicas=2)]}, {"a": 2}, {}, []),
    (
        "min-counts-existing-running-and-pending",
        {
            "groups": [cpu("a", minReplicas=2)],
            "nodes": [node("a-1", "a"), node("a-2", "a", state="pending")],
        },
        {},
        {},
        [],
    ),
    (
        "terminating-nodes-do-not-count-or-absorb",
        {
            "groups": [cpu("a", minReplicas=1)],
            "nodes": [node("a-1", "a", state="terminating")],
            "demands": [demand(2, CPU=4)],
        },
        {"a": 2},
        {},
        [],
    ),
    (
        "max-replicas-removes-pending-first",
        {
            "groups": [cpu("a", maxReplicas=1)],
            "nodes": [node("a-run", "a", idleSeconds=0), node("a-pend", "a", state="pending")],
        },
        {},
        {"a-pend": "MAX_REPLICAS"},
        [],
    ),
    (
        "max-replicas-removes-longest-idle-then-least-used",
        {
            "groups": [cpu("a", maxReplicas=1)],
            "nodes": [
                node("busy", "a", available={"CPU": 0}),
                node("half", "a", available={"CPU": 2}),
                node("idle", "a", idleSeconds=30),
            ],
            "options": {"idleTimeoutSeconds": None},
        },
        {},
        {"idle": "MAX_REPLICAS", "half": "MAX_REPLICAS"},
        [],
    ),
    (
        "max-workers-removes-across-groups",
        {
            "groups": [cpu("a"), cpu("b")],
            "nodes": [node("a-1", "a", available={"CPU": 0}), node("b-1", "b", idleSeconds=5)],
            "options": {"maxWorkers": 1, "idleTimeoutSeconds": None},
        },
        {},
        {"b-1": "MAX_WORKERS"},
        [],
    ),
    (
        "max-workers-limits-launches",
        {
            "groups": [cpu("a")],
            "nodes": [node("a-1", "a", available={"CPU": 0})],
            "demands": [demand(3, CPU=4)],
            "options": {"maxWorkers": 2},
        },
        {"a": 1},
        {},
        [("demand", 2, "MAX_WORKERS")],
    ),
    (
        "existing-free-capacity-first",
        {
            "groups": [cpu("a")],
            "nodes": [node("a-1", "a", available={"CPU": 3})],
            "demands": [demand(3, CPU=1)],
        },
        {},
        {},
        [],
    ),
    (
        "pending-node-absorbs",
        {"groups": [cpu("a")], "nodes": [node("a-1", "a", state="pending")], "demands": [demand(4, CPU=1)]},
        {},
        {},
        [],
    ),
    (
        "fractional-free-does-not-fit",
        {
            "groups": [cpu("a")],
            "nodes": [node("a-1", "a", available={"CPU": 0.9})],
            "demands": [demand(1, CPU=1)],
        },
        {"a": 1},
        {},
        [],
    ),
    (
        "too-big-for-any-group",
        {"groups": [cpu("a")], "demands": [demand(2, CPU=5)]},
        {},
        {},
        [("demand", 2, "NO_MATCHING_GROUP")],
    ),
    (
        "unknown-resource",
        {"groups": [cpu("a")], "demands": [{"resources": {"Custom": 1}, "count": 1}]},
        {},
        {},
        [("demand", 1, "NO_MATCHING_GROUP")],
    ),
    (
        "max-replicas-stops-launches",
        {"groups": [cpu("a", maxReplicas=2)], "demands": [demand(3, CPU=4)]},
        {"a": 2},
        {},
        [("demand", 1, "MAX_REPLICAS")],
    ),
    (
        "backoff-reroutes-to-next-group",
        {"groups": [cpu("a", backoff=True), cpu("b", 8)], "demands": [demand(2, CPU=4)]},
        {"b": 1},
        {},
        [],
    ),
    (
        "backoff-everywhere",
        {"groups": [cpu("a", backoff=True)], "demands": [demand(2, CPU=4)]},
        {},
        {},
        [("demand", 2, "BACKOFF")],
    ),
    (
        "backoff-group-still-keeps-its-minimum",
        {"groups": [cpu("a", minReplicas=1, backoff=True)]},
        {"a": 1},
        {},
        [],
    ),
    (
        "launch-failed-removed-and-group-backs-off",
        {
            "groups": [cpu("a"), cpu("b")],
            "nodes": [node("a-1", "a", state="pending", pendingSeconds=901)],
            "demands": [demand(1, CPU=4)],
        },
        {"b": 1},
        {"a-1": "LAUNCH_FAILED"},
        [],
    ),
    (
        "pending-within-provision-time-kept",
        {
            "groups": [cpu("a")],
            "nodes": [node("a-1", "a", state="pending", pendingSeconds=900)],
            "demands": [demand(1, CPU=4)],
        },
        {},
        {},
        [],
    ),
    (
        "idle-strictly-longer-than-timeout",
        {
            "groups": [cpu("a")],
            "nodes": [node("a-60", "a", idleSeconds=60), node("a-61", "a", idleSeconds=61)],
        },
        {},
        {"a-61": "IDLE"},
        [],
    ),
    (
        "idle-group-timeout-overrides-cluster",
        {
            "groups": [cpu("a", idleTimeoutSeconds=10), cpu("b")],
            "nodes": [node("a-1", "a", idleSeconds=30), node("b-1", "b", idleSeconds=30)],
        },
        {},
        {"a-1": "IDLE"},
        [],
    ),
    (
        "idle-disabled-without-timeout",
        {
            "groups": [cpu("a")],
            "nodes": [node("a-1", "a", idleSeconds=10_000)],
            "options": {"idleTimeoutSeconds": None},
        },
        {},
        {},
        [],
    ),
    (
        "idle-never-below-min",
        {
            "groups": [cpu("a", minReplicas=1)],
            "nodes": [node("a-1", "a", idleSeconds=100), node("a-2", "a", idleSeconds=200)],
        },
        {},
        {"a-2": "IDLE"},
        [],
    ),
    (
        "idle-node-that-gets-work-is-kept",
        {"groups": [cpu("a")], "nodes": [node("a-1", "a", idleSeconds=100)], "demands": [demand(1, CPU=1)]},
        {},
        {},
        [],
    ),
    (
        "idle-pending-nodes-are-not-idle",
        {"groups": [cpu("a")], "nodes": [node("a-1", "a", state="pending", idleSeconds=100)]},
        {},
        {},
        [],
    ),
    (
        "constraint-keeps-idle-node",
        {
            "groups": [cpu("a")],
            "nodes": [node("a-1", "a", idleSeconds=100)],
            "constraints": [{"resources": {"CPU": 4}, "count": 1}],
        },
        {},
        {},
        [],
    ),
    (
        "constraint-judged-against-total-capacity",
        {
            "groups": [cpu("a")],
            "nodes": [node("a-1", "a", available={"CPU": 0})],
            "constraints": [{"resources": {"CPU": 4}, "count": 2}],
        },
        {"a": 1},
        {},
        [],
    ),
    (
        "constraint-all-or-nothing",
        {
            "groups": [cpu("a", maxReplicas=2)],
            "constraints": [{"resources": {"CPU": 4}, "count": 3}],
        },
        {},
        {},
        [("constraint", 3, "MAX_REPLICAS")],
    ),
    (
        "constraint-launches-then-serve-demand",
        {
            "groups": [cpu("a")],
            "constraints": [{"resources": {"CPU": 4}, "count": 1}],
            "demands": [demand(1, CPU=4)],
        },
        {"a": 1},
        {},
        [],
    ),
    (
        "gang-strict-pack-one-node",
        {"groups": [cpu("a")], "gangs": [{"strategy": "STRICT_PACK", "bundles": [{"CPU": 2}, {"CPU": 2}]}]},
        {"a": 1},
        {},
        [],
    ),
    (
        "gang-strict-pack-too-big",
        {"groups": [cpu("a")], "gangs": [{"strategy": "STRICT_PACK", "bundles": [{"CPU": 3}, {"CPU": 3}]}]},
        {},
        {},
        [("gang", 1, "NO_MATCHING_GROUP")],
    ),
    (
        "gang-strict-spread-distinct-nodes",
        {"groups": [cpu("a")], "gangs": [{"strategy": "STRICT_SPREAD", "bundles": [{"CPU": 1}, {"CPU": 1}]}]},
        {"a": 2},
        {},
        [],
    ),
    (
        "gang-strict-spread-uses-existing-then-new",
        {
            "groups": [cpu("a")],
            "nodes": [node("a-1", "a", available={"CPU": 4})],
            "gangs": [{"strategy": "STRICT_SPREAD", "bundles": [{"CPU": 1}, {"CPU": 1}]}],
        },
        {"a": 1},
        {},
        [],
    ),
    (
        "gang-pack-all-or-nothing",
        {
            "groups": [cpu("a", maxReplicas=1)],
            "gangs": [{"strategy": "PACK", "bundles": [{"CPU": 4}, {"CPU": 4}]}],
            "demands": [demand(1, CPU=1)],
        },
        {"a": 1},
        {},
        [("gang", 1, "MAX_REPLICAS")],
    ),
    (
        "gang-count-partially-placed",
        {
            "groups": [cpu("a", maxReplicas=3)],
            "gangs": [{"strategy": "STRICT_SPREAD", "bundles": [{"CPU": 4}, {"CPU": 4}], "count": 2}],
        },
        {"a": 2},
        {},
        [("gang", 1, "MAX_REPLICAS")],
    ),
    (
        "labels-in",
        {
            "groups": [cpu("a", labels={"zone": "x"}), cpu("b", labels={"zone": "y"})],
            "demands": [
                {"resources": {"CPU": 1}, "labelSelector": [{"key": "zone", "op": "in", "values": ["y"]}]}
            ],
        },
        {"b": 1},
        {},
        [],
    ),
    (
        "labels-map-shorthand",
        {
            "groups": [cpu("a", labels={"zone": "x"}), cpu("b", labels={"zone": "y"})],
            "demands": [{"resources": {"CPU": 1}, "labelSelector": {"zone": "x"}}],
        },
        {"a": 1},
        {},
        [],
    ),
    (
        "labels-notin-passes-missing-label",
        {
            "groups": [cpu("a", labels={"zone": "x"}), cpu("b")],
            "demands": [
                {"resources": {"CPU": 1}, "labelSelector": [{"key": "zone", "op": "notin", "values": ["x"]}]}
            ],
        },
        {"b": 1},
        {},
        [],
    ),
    (
        "labels-no-match",
        {
            "groups": [cpu("a", labels={"zone": "x"})],
            "demands": [{"resources": {"CPU": 1}, "labelSelector": {"zone": "q"}}],
        },
        {},
        {},
        [("demand", 1, "NO_MATCHING_GROUP")],
    ),
    (
        "labels-on-existing-nodes",
        {
            "groups": [cpu("a", labels={"zone": "x"}), cpu("b", labels={"zone": "y"})],
            "nodes": [node("a-1", "a")],
            "demands": [{"resources": {"CPU": 1}, "labelSelector": {"zone": "y"}}],
        },
        {"b": 1},
        {},
        [],
    ),
    (
        "gpu-avoided-for-cpu-work",
        {
            "groups": [{"name": "gpu", "resources": {"CPU": 16, "GPU": 1}}, cpu("cpu", 4)],
            "demands": [demand(1, CPU=1)],
        },
        {"cpu": 1},
        {},
        [],
    ),
    (
        "gpu-used-when-nothing-else-fits",
        {
            "groups": [{"name": "gpu", "resources": {"CPU": 16, "GPU": 1}}, cpu("cpu", 4)],
            "demands": [demand(1, CPU=8)],
        },
        {"gpu": 1},
        {},
        [],
    ),
    (
        "gpu-used-when-cpu-group-at-max",
        {
            "groups": [{"name": "gpu", "resources": {"CPU": 16, "GPU": 1}}, cpu("cpu", 4, maxReplicas=0)],
            "demands": [demand(1, CPU=1)],
        },
        {"gpu": 1},
        {},
        [],
    ),
    (
        "priority-breaks-ties",
        {"groups": [cpu("a"), cpu("b", priority=5)], "demands": [demand(1, CPU=1)]},
        {"b": 1},
        {},
        [],
    ),
    (
        "list-order-breaks-remaining-ties",
        {"groups": [cpu("a"), cpu("b")], "demands": [demand(1, CPU=1)]},
        {"a": 1},
        {},
        [],
    ),
    (
        "smallest-group-for-a-small-remainder",
        {"groups": [cpu("big", 32), cpu("small", 4)], "demands": [demand(3, CPU=1)]},
        {"small": 1},
        {},
        [],
    ),
    (
        "big-group-for-big-demand",
        {"groups": [cpu("small", 4), cpu("big", 32)], "demands": [demand(64, CPU=1)]},
        {"big": 2},
        {},
        [],
    ),
    (
        "conservative-caps-in-flight-at-five",
        {
            "groups": [cpu("a", 1)],
            "demands": [demand(10, CPU=1)],
            "options": {"upscalingMode": "Conservative"},
        },
        {"a": 5},
        {},
        [("demand", 5, "UPSCALING_LIMIT")],
    ),
    (
        "conservative-counts-running-and-pending",
        {
            "groups": [cpu("a", 1)],
            "nodes": [node(f"r{i}", "a", available={"CPU": 0}) for i in range(8)]
            + [node("p", "a", state="pending", available={"CPU": 0})],
            "demands": [demand(20, CPU=1)],
            "options": {"upscalingMode": "Conservative"},
        },
        {"a": 7},  # in flight: 1 pending (which takes one unit) + 7 new = max(5, 8 running)
        {},
        [("demand", 12, "UPSCALING_LIMIT")],
    ),
    (
        "aggressive-is-unlimited",
        {"groups": [cpu("a", 1)], "demands": [demand(10, CPU=1)], "options": {"upscalingMode": "Aggressive"}},
        {"a": 10},
        {},
        [],
    ),
]


@pytest.mark.parametrize(
    ("scenario", "want_launch", "want_removed", "want_unmet"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_behaviour(
    scenario: dict[str, Any],
    want_launch: dict[str, int],
    want_removed: dict[str, str],
    want_unmet: list[tuple[str, int, str]],
) -> None:
    decision = decide(scenario)
    assert launches(decision) == want_launch
    assert removed(decision) == want_removed
    assert unmet(decision) == want_unmet


TPU_SLICE = {
    "name": "slice",
    "resources": {"CPU": 1, "TPU": 4, "TPU-v6e-16-head": 1},
    "numOfHosts": 4,
    "maxReplicas": 2,
}


def test_multi_host_tasks_launch_one_whole_replica() -> None:
    decision = decide({"groups": [TPU_SLICE], "demands": [demand(4, TPU=4)]})
    assert decision["groups"]["slice"] == {"current": 0, "replicas": 1, "launch": 1, "terminate": 0}


def test_multi_host_slice_head_resource_is_on_host_zero_only() -> None:
    decision = decide({"groups": [TPU_SLICE], "demands": [{"resources": {"TPU-v6e-16-head": 1}, "count": 2}]})
    assert decision["groups"]["slice"]["launch"] == 2


def test_multi_host_strict_spread_gang_fills_one_replica() -> None:
    gang = {"strategy": "STRICT_SPREAD", "bundles": [{"TPU": 4}] * 4}
    decision = decide({"groups": [TPU_SLICE], "gangs": [gang]})
    assert decision["groups"]["slice"]["launch"] == 1
    assert decision["unmet"] == []


def slice_nodes(replica: str, idle: float, state: str = "running") -> list[dict[str, Any]]:
    return [
        node(f"{replica}-{i}", "slice", replica=replica, idleSeconds=idle if i else idle + 100, state=state)
        for i in range(4)
    ]


def test_multi_host_counts_and_removes_whole_replicas() -> None:
    decision = decide({"groups": [TPU_SLICE], "nodes": slice_nodes("r1", 0) + slice_nodes("r2", 500)})
    assert decision["groups"]["slice"] == {"current": 2, "replicas": 1, "launch": 0, "terminate": 1}
    assert removed(decision) == {f"r2-{i}": "IDLE" for i in range(4)}
    assert {t["replica"] for t in decision["terminate"]} == {"r2"}


def test_multi_host_replica_idle_only_when_every_host_is() -> None:
    nodes = slice_nodes("r1", 500)
    nodes[2]["idleSeconds"] = 1
    assert decide({"groups": [TPU_SLICE], "nodes": nodes})["terminate"] == []


def test_multi_host_max_zero_removes_pending_slice() -> None:
    group = {**TPU_SLICE, "maxReplicas": 0}
    decision = decide({"groups": [group], "nodes": slice_nodes("r1", 0, state="pending")})
    assert removed(decision) == {f"r1-{i}": "MAX_REPLICAS" for i in range(4)}
    assert decision["groups"]["slice"]["replicas"] == 0


def test_multi_host_launch_failure_removes_the_replica() -> None:
    nodes = slice_nodes("r1", 0)
    nodes[3].update(state="pending", pendingSeconds=1000)
    assert removed(decide({"groups": [TPU_SLICE], "nodes": nodes})) == {
        f"r1-{i}": "LAUNCH_FAILED" for i in range(4)
    }


def test_placements_explain_where_each_shape_went() -> None:
    decision = decide(
        {
            "groups": [cpu("a")],
            "nodes": [node("a-1", "a", available={"CPU": 1}), node("a-2", "a", state="pending")],
            "demands": [demand(6, CPU=1), {"resources": {"CPU": 1}, "count": 1, "labelSelector": {"x": "y"}}],
        }
    )
    assert decision["placements"] == [
        {
            "kind": "demand",
            "resources": {"CPU": 1},
            "count": 6,
            "targets": [
                {"group": "a", "on": "running", "count": 1, "nodes": ["a-1"]},
                {"group": "a", "on": "pending", "count": 4, "nodes": ["a-2"]},
                {"group": "a", "on": "new", "count": 1},
            ],
        }
    ]
    assert decision["unmet"] == [
        {
            "kind": "demand",
            "resources": {"CPU": 1},
            "labelSelector": [{"key": "x", "op": "in", "values": ["y"]}],
            "count": 1,
            "reason": "NO_MATCHING_GROUP",
        }
    ]


def test_memory_bytes_do_not_swamp_cpu_when_choosing_groups() -> None:
    # A memory-heavy group must not win CPU work just because its byte count is huge.
    groups = [
        {"name": "mem", "resources": {"CPU": 2, "memory": "512Gi"}},
        {"name": "cpu", "resources": {"CPU": 16, "memory": "16Gi"}},
    ]
    decision = decide({"groups": groups, "demands": [demand(16, CPU=1)]})
    assert launches(decision) == {"cpu": 1}


def test_same_demand_in_several_entries_is_one_shape() -> None:
    decision = decide({"groups": [cpu("a")], "demands": [demand(2, CPU=1), demand(2, CPU=1)]})
    assert [p["count"] for p in decision["placements"]] == [4]
    assert launches(decision) == {"a": 1}


def test_replicas_is_what_the_autoscaler_writes() -> None:
    decision = decide(
        {
            "groups": [cpu("a", labels={"pool": "a"}), cpu("b", labels={"pool": "b"})],
            "nodes": [node("a-1", "a", available={"CPU": 0}), node("b-1", "b", idleSeconds=100)],
            "demands": [{"resources": {"CPU": 1}, "count": 8, "labelSelector": {"pool": "a"}}],
        }
    )
    assert decision["groups"] == {
        "a": {"current": 1, "replicas": 3, "launch": 2, "terminate": 0},
        "b": {"current": 1, "replicas": 0, "launch": 0, "terminate": 1},
    }
