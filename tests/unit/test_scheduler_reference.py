"""Cases from Ray's own scheduler tests (autoscaler v2's test_scheduler.py) and KubeRay's autoscaler
e2e scenarios (KubeRay's ray-operator/test/e2eautoscaler), written as scenarios."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.scenarios import cpu, decide, demand, launches, node, removed, unmet

# ------------------------------------------------------------------ Ray test_scheduler.py

M4 = [
    {"name": "small", "resources": {"CPU": 2}},
    {"name": "medium", "resources": {"CPU": 16}},
    {"name": "large", "resources": {"CPU": 64}},
]
GPU_TYPES = [
    {"name": "cpu", "resources": {"CPU": 16}},
    {"name": "gpu", "resources": {"CPU": 16, "GPU": 1}},
]


def test_ray_single_resources() -> None:
    assert launches(decide({"groups": [cpu("t", 1)], "demands": [demand(1, CPU=1)]})) == {"t": 1}
    assert launches(decide({"groups": [cpu("t", 1)], "demands": [demand(3, CPU=1)]})) == {"t": 3}
    free = node("n", "t", available={"CPU": 1})
    assert launches(decide({"groups": [cpu("t", 1)], "nodes": [free], "demands": [demand(1, CPU=1)]})) == {}
    requested = node("n", "t", state="pending")
    assert (
        launches(decide({"groups": [cpu("t", 1)], "nodes": [requested], "demands": [demand(1, CPU=1)]})) == {}
    )
    low = node("n", "t", available={"CPU": 0.9})
    assert launches(decide({"groups": [cpu("t", 1)], "nodes": [low], "demands": [demand(1, CPU=1)]})) == {
        "t": 1
    }


def test_ray_implicit_resources() -> None:
    implicit = {"resources": {"node:__internal_implicit_resource_x": 0.5}, "count": 1}
    assert launches(decide({"groups": [cpu("t", 1)], "demands": [implicit]})) == {"t": 1}
    busy = node("n", "t", available={"CPU": 0})
    assert launches(decide({"groups": [cpu("t", 1)], "nodes": [busy], "demands": [implicit]})) == {}


def test_ray_max_worker_num_enforced_with_requests() -> None:
    decision = decide(
        {
            "groups": [cpu("t", 1)],
            "nodes": [node("n", "t", available={"CPU": 0})],
            "demands": [demand(3, CPU=1)],
            "options": {"maxWorkers": 2},
        }
    )
    assert launches(decision) == {"t": 1}
    assert unmet(decision) == [("demand", 2, "MAX_WORKERS")]


def test_ray_multi_requests_fittable() -> None:
    groups = [cpu("c", 1), {"name": "g", "resources": {"CPU": 1, "GPU": 1}}]
    for order in ([demand(1, CPU=1), demand(1, CPU=1, GPU=1)], [demand(1, CPU=1, GPU=1), demand(1, CPU=1)]):
        assert launches(decide({"groups": groups, "demands": order})) == {"c": 1, "g": 1}
    fractional = [demand(1, CPU=0.5), demand(1, CPU=0.5)]
    assert launches(decide({"groups": [cpu("c", 1)], "demands": fractional})) == {"c": 1}
    fragmented = node("n", "c", available={"CPU": 0.5})
    decision = decide(
        {
            "groups": [cpu("c", 1, maxReplicas=1)],
            "nodes": [fragmented],
            "demands": [demand(1, CPU=0.5), demand(1, CPU=1)],
        }
    )
    assert unmet(decision) == [("demand", 1, "MAX_REPLICAS")]


@pytest.mark.parametrize("cpus", [1, 2])
def test_ray_multi_node_types_score(cpus: int) -> None:
    groups = [*M4, {"name": "gpu", "resources": {"CPU": 2, "GPU": 1}}]
    assert launches(decide({"groups": groups, "demands": [demand(1, CPU=cpus)]})) == {"small": 1}


def test_ray_multi_node_types_score_with_gpu() -> None:
    assert launches(decide({"groups": GPU_TYPES, "demands": [demand(1, CPU=1)]})) == {"cpu": 1}
    assert launches(decide({"groups": GPU_TYPES, "demands": [demand(1, CPU=1, GPU=1)]})) == {"gpu": 1}


def test_ray_packing_heuristic_fewer_hosts_than_ray() -> None:
    # Ray launches 64 + 16 + 16 + 2 + 2 (5 hosts) for 100 one-CPU tasks: the fullest host scores
    # best each round, and a type picked moves behind the others on ties. rayscale packs the
    # same work on two 64-CPU hosts.
    decision = decide({"groups": M4, "demands": [demand(100, CPU=1)]})
    assert launches(decision) == {"large": 2}


def test_ray_resource_constraints() -> None:
    covered = {"groups": [cpu("t", 4, minReplicas=1)], "constraints": [{"resources": {"CPU": 4}, "count": 1}]}
    assert launches(decide(covered)) == {"t": 1}
    larger = {
        "groups": [cpu("t", 4, minReplicas=1), {"name": "g", "resources": {"CPU": 4, "GPU": 1}}],
        "constraints": [{"resources": {"CPU": 4}, "count": 2}, {"resources": {"GPU": 1}, "count": 1}],
    }
    assert launches(decide(larger)) == {"t": 1, "g": 1}  # the GPU host also carries 4 CPUs
    impossible = {
        "groups": [cpu("t", 4, minReplicas=1)],
        "constraints": [{"resources": {"CPU": 8}, "count": 1}],
    }
    decision = decide(impossible)
    assert launches(decision) == {"t": 1}
    assert unmet(decision) == [("constraint", 1, "NO_MATCHING_GROUP")]


def test_ray_max_workers_per_type() -> None:
    nodes = [
        node("alloc", "t", state="pending"),
        node("run-busy", "t", available={"CPU": 0}),
        node("run-light", "t", available={"CPU": 3}),
    ]
    assert removed(decide({"groups": [cpu("t", maxReplicas=2)], "nodes": nodes})) == {"alloc": "MAX_REPLICAS"}
    assert removed(decide({"groups": [cpu("t", maxReplicas=1)], "nodes": nodes})) == {
        "alloc": "MAX_REPLICAS",
        "run-light": "MAX_REPLICAS",
    }


@pytest.mark.parametrize(
    ("cap", "expected"),
    [
        (4, set()),
        (3, {"alloc"}),
        (2, {"alloc", "idle"}),
        (1, {"alloc", "idle", "light"}),
    ],
)
def test_ray_max_num_nodes(cap: int, expected: set[str]) -> None:
    nodes = [
        node("alloc", "t", state="pending"),
        node("idle", "t", idleSeconds=5),
        node("light", "t", available={"CPU": 3}),
        node("busy", "t", available={"CPU": 0}),
    ]
    decision = decide(
        {"groups": [cpu("t")], "nodes": nodes, "options": {"maxWorkers": cap, "idleTimeoutSeconds": None}}
    )
    assert set(removed(decision)) == expected
    assert set(removed(decision).values()) <= {"MAX_WORKERS"}


@pytest.mark.parametrize(
    ("timeout", "with_constraint", "terminated"),
    [
        (1, False, True),
        (2, False, True),
        (10, False, False),
        (1, True, False),
        (2, True, False),
        (10, True, False),
    ],
)
def test_ray_idle_termination(timeout: int, with_constraint: bool, terminated: bool) -> None:
    scenario: dict[str, Any] = {
        "groups": [cpu("t")],
        "nodes": [node("idle", "t", idleSeconds=5), node("busy", "t", available={"CPU": 0})],
        "options": {"idleTimeoutSeconds": timeout},
    }
    if with_constraint:
        scenario["constraints"] = [{"resources": {"CPU": 4}, "count": 2}]
    assert removed(decide(scenario)) == ({"idle": "IDLE"} if terminated else {})


def test_ray_gang_scheduling() -> None:
    pair = [{"CPU": 1}, {"CPU": 1}]
    groups = [cpu("t", 2)]
    assert launches(decide({"groups": groups, "gangs": [{"strategy": "STRICT_PACK", "bundles": pair}]})) == {
        "t": 1
    }
    assert launches(
        decide({"groups": groups, "gangs": [{"strategy": "STRICT_SPREAD", "bundles": pair}]})
    ) == {"t": 2}
    big = decide(
        {"groups": groups, "gangs": [{"strategy": "STRICT_PACK", "bundles": [{"CPU": 2}, {"CPU": 1}]}]}
    )
    assert launches(big) == {}
    assert unmet(big) == [("gang", 1, "NO_MATCHING_GROUP")]


def test_ray_gang_scheduling_with_others() -> None:
    decision = decide(
        {
            "groups": [
                cpu("type_1", 4, minReplicas=1),
                {"name": "type_2", "resources": {"CPU": 2, "GPU": 1}},
            ],
            "nodes": [node("n1", "type_1", available={"CPU": 2})],
            "constraints": [{"resources": {"CPU": 4}, "count": 2}],
            "gangs": [
                {"strategy": "STRICT_SPREAD", "bundles": [{"GPU": 1}, {"GPU": 1}]},
                {"strategy": "STRICT_PACK", "bundles": [{"CPU": 8}]},
                {"strategy": "PACK", "bundles": [{"CPU": 2}, {"CPU": 2}]},
            ],
            "demands": [demand(2, CPU=1)],
        }
    )
    assert launches(decision) == {"type_1": 1, "type_2": 2}
    assert unmet(decision) == [("gang", 1, "NO_MATCHING_GROUP")]


# ------------------------------------------------------------------ KubeRay e2e autoscaler scenarios


def raycluster(*groups: dict[str, Any], **autoscaler: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "ray-cluster"},
        "spec": {
            "enableInTreeAutoscaling": True,
            "autoscalerOptions": autoscaler,
            "headGroupSpec": {
                "rayStartParams": {"num-cpus": "0"},
                "template": {"spec": {"containers": [{}]}},
            },
            "workerGroupSpecs": list(groups),
        },
    }


def worker_group(name: str, params: dict[str, str], **fields: Any) -> dict[str, Any]:
    container = {"name": "ray-worker", "resources": {"limits": {"cpu": "1", "memory": "1G"}}}
    template: dict[str, Any] = {"spec": {"containers": [container]}}
    if "nodeSelector" in fields:
        template["spec"]["nodeSelector"] = fields.pop("nodeSelector")
    return {"groupName": name, "rayStartParams": params, "template": template, "minReplicas": 0, **fields}


def test_kuberay_cpu_actors_scale_up_and_idle_down() -> None:
    cluster = raycluster(worker_group("small-group", {"num-cpus": "1"}, maxReplicas=3))
    assert (
        decide({"cluster": cluster, "demands": [demand(2, CPU=1)]})["groups"]["small-group"]["replicas"] == 2
    )
    nodes = [node("w1", "small-group", available={"CPU": 0}), node("w2", "small-group", idleSeconds=61)]
    assert decide({"cluster": cluster, "nodes": nodes})["groups"]["small-group"]["replicas"] == 1


@pytest.mark.parametrize(
    ("params", "actor"),
    [
        ({"num-cpus": "1", "num-gpus": "1"}, {"CPU": 1, "GPU": 1}),
        ({"num-cpus": "1", "resources": "'{\"CustomResource\": 1}'"}, {"CPU": 1, "CustomResource": 1}),
    ],
    ids=["fake-gpu", "custom-resource"],
)
def test_kuberay_accelerator_and_custom_resource_groups(
    params: dict[str, str], actor: dict[str, float]
) -> None:
    cluster = raycluster(worker_group("g", params, maxReplicas=3))
    assert decide({"cluster": cluster, "demands": [{"resources": actor}]})["groups"]["g"]["replicas"] == 1


@pytest.mark.parametrize(
    ("hosts", "topology", "accelerator"),
    [(1, "2x2x1", "tpu-v4-podslice"), (4, "4x4", "tpu-v6e-slice")],
    ids=["v4-single-host", "v6e-multi-host"],
)
def test_kuberay_fake_tpu_slice_scales_atomically(hosts: int, topology: str, accelerator: str) -> None:
    group = worker_group(
        "tpu-group",
        {"num-cpus": "1", "resources": "'{\"TPU\":4}'"},
        numOfHosts=hosts,
        maxReplicas=4,
        nodeSelector={
            "cloud.google.com/gke-tpu-topology": topology,
            "cloud.google.com/gke-tpu-accelerator": accelerator,
        },
    )
    cluster = raycluster(group)
    decision = decide({"cluster": cluster, "demands": [{"resources": {"TPU": 4}, "count": hosts}]})
    assert decision["groups"]["tpu-group"]["replicas"] == 1
    pending = [node(f"p{i}", "tpu-group", state="pending", replica="r") for i in range(hosts)]
    shrunk = raycluster({**group, "maxReplicas": 0})
    decision = decide({"cluster": shrunk, "nodes": pending})
    assert decision["groups"]["tpu-group"]["replicas"] == 0
    assert len(decision["terminate"]) == hosts


def test_kuberay_desired_state_scales_to_max() -> None:
    cluster = raycluster(worker_group("g", {"num-cpus": "1"}, maxReplicas=3), idleTimeoutSeconds=3600)
    decision = decide({"cluster": cluster, "demands": [demand(30, CPU=1)]})
    assert decision["groups"]["g"]["replicas"] == 3
    assert unmet(decision) == [("demand", 27, "MAX_REPLICAS")]


def test_kuberay_min_replicas_update() -> None:
    cluster = raycluster(worker_group("test-group", {"num-cpus": "1"}, minReplicas=2, maxReplicas=3))
    nodes = [node("w1", "test-group", idleSeconds=1000)]
    assert decide({"cluster": cluster, "nodes": nodes})["groups"]["test-group"]["replicas"] == 2
    assert (
        decide({"cluster": cluster, "demands": [demand(3, CPU=1)]})["groups"]["test-group"]["replicas"] == 3
    )


def test_kuberay_max_replicas_lowered_removes_a_busy_node() -> None:
    cluster = raycluster(worker_group("test-group", {"num-cpus": "1"}, minReplicas=1, maxReplicas=1))
    nodes = [node("w1", "test-group", available={"CPU": 0}), node("w2", "test-group", available={"CPU": 0})]
    decision = decide({"cluster": cluster, "nodes": nodes, "demands": [demand(2, CPU=1)]})
    assert decision["groups"]["test-group"]["replicas"] == 1
    assert list(removed(decision).values()) == ["MAX_REPLICAS"]


def test_kuberay_group_idle_timeouts() -> None:
    cluster = raycluster(
        worker_group("short", {"num-cpus": "1"}, maxReplicas=1, idleTimeoutSeconds=10),
        worker_group("long", {"num-cpus": "2"}, maxReplicas=1, idleTimeoutSeconds=30),
        version="v2",  # a group's own idle timeout needs autoscaler v2
    )
    nodes = [node("s", "short", idleSeconds=20), node("l", "long", idleSeconds=20)]
    assert removed(decide({"cluster": cluster, "nodes": nodes})) == {"s": "IDLE"}


def test_kuberay_gpu_nodes_for_cpu_tasks_when_alone() -> None:
    cluster = raycluster(worker_group("gpu-group", {"num-cpus": "1", "num-gpus": "1"}, maxReplicas=3))
    assert launches(decide({"cluster": cluster, "demands": [demand(1, CPU=1)]})) == {"gpu-group": 1}


def test_kuberay_idle_node_kept_for_placement_group() -> None:
    cluster = raycluster(
        worker_group("short-idle-group", {"num-cpus": "1"}, maxReplicas=2), idleTimeoutSeconds=6
    )
    gang = {"strategy": "STRICT_SPREAD", "bundles": [{"CPU": 1}, {"CPU": 1}]}
    decision = decide(
        {"cluster": cluster, "nodes": [node("old", "short-idle-group", idleSeconds=10)], "gangs": [gang]}
    )
    assert decision["terminate"] == []
    assert launches(decision) == {"short-idle-group": 1}


def test_kuberay_request_resources() -> None:
    cluster = raycluster(worker_group("request-group", {"num-cpus": "1"}, maxReplicas=2))
    decision = decide({"cluster": cluster, "constraints": [{"resources": {"CPU": 1}}]})
    assert decision["groups"]["request-group"]["replicas"] == 1


@pytest.mark.parametrize(
    ("cpus", "strategy", "pods"),
    [("2", "STRICT_PACK", 1), ("2", "PACK", 1), ("2", "STRICT_SPREAD", 2), ("1", "SPREAD", 2)],
)
def test_kuberay_placement_groups(cpus: str, strategy: str, pods: int) -> None:
    cluster = raycluster(worker_group("cpu-group", {"num-cpus": cpus}, maxReplicas=3), idleTimeoutSeconds=10)
    gang = {"strategy": strategy, "bundles": [{"CPU": 1}, {"CPU": 1}]}
    assert decide({"cluster": cluster, "gangs": [gang]})["groups"]["cpu-group"]["replicas"] == pods


def test_kuberay_conservative_first_jump_at_most_five() -> None:
    cluster = raycluster(
        worker_group("test-group", {"num-cpus": "1"}, maxReplicas=10), upscalingMode="Conservative"
    )
    first = decide({"cluster": cluster, "demands": [demand(10, CPU=1)]})
    assert first["groups"]["test-group"]["replicas"] == 5
    running = [node(f"w{i}", "test-group", available={"CPU": 0}) for i in range(5)]
    later = decide({"cluster": cluster, "nodes": running, "demands": [demand(5, CPU=1)]})
    assert later["groups"]["test-group"]["replicas"] == 10
