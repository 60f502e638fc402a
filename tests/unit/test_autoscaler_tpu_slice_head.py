"""``TPU-<type>-head`` belongs to host 0 of a multi-host TPU replica (``ray.io/replica-host-index``
or, for a running Ray node, what Ray reports), whatever the pods' names sort as."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.support.builders import cluster, container, group, pod

from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.snapshot import build_snapshot
from rayscale.autoscaler.virtual.plan import plan
from rayscale.cluster.accelerators import slice_host_rank
from rayscale.ray import model as ray

NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)
HEAD = "TPU-v6e-8-head"
HOST = {"TPU": 4.0, "CPU": 1.0}


def tpu_cluster() -> dict[str, Any]:
    tpu = group("tpu", replicas=1, max_replicas=2, hosts=2)
    tpu["template"]["spec"] = {
        "nodeSelector": {
            "cloud.google.com/gke-tpu-topology": "2x4",
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        },
        "containers": [container("ray-worker", cpu="1", **{"google.com/tpu": "4"})],
    }
    return cluster(tpu, autoscaling=True)


def ray_node(name: str, resources: dict[str, float]) -> ray.RayNodeState:
    return ray.RayNodeState(
        node_id=f"id-{name}",
        status=ray.NodeStatus.IDLE,
        instance_id=name,
        idle_duration_ms=5_000,
        available_resources=resources,
        total_resources=resources,
    )


def demand(resources: dict[str, float]) -> ray.ResourceDemand:
    return ray.ResourceDemand(ray.ResourceRequest(resources), 1)


def idle_slice(head_in_ray: bool = True) -> ray.ClusterState:
    # "t-a" sorts first by name but is host 1; "t-b" is host 0 and carries the head resource
    head_host = {**HOST, HEAD: 1.0} if head_in_ray else HOST
    return ray.ClusterState(
        version=1,
        session_name="s",
        nodes=(ray_node("t-a", HOST), ray_node("t-b", head_host)),
        pending_requests=(demand({HEAD: 1.0}),),
    )


def slice_pods() -> list[dict[str, Any]]:
    return [pod("t-a", "tpu", replica="tpu-x", host=1), pod("t-b", "tpu", replica="tpu-x", host=0)]


def test_host_rank_reads_ray_first_then_the_host_index() -> None:
    assert slice_host_rank("1", {HEAD: 1.0, "TPU": 4.0}) < slice_host_rank("0", {"TPU": 4.0})
    assert slice_host_rank("0", None) < slice_host_rank("1", None) < slice_host_rank("2", {"TPU": 4.0})
    assert slice_host_rank("7", None) < slice_host_rank(None, None)
    assert slice_host_rank("bogus", None) == slice_host_rank("-1", None) == slice_host_rank(None, None)


def test_a_task_for_the_slice_head_fits_the_idle_slice() -> None:
    snap = build_snapshot(tpu_cluster(), slice_pods(), idle_slice(), [], frozenset(), NOW)
    assert [n.name for n in snap.nodes] == ["t-b", "t-a"]  # host 0 first within its replica
    decision = schedule(snap)
    assert (decision.groups["tpu"].replicas, decision.groups["tpu"].launch) == (1, 0)
    assert not decision.unmet


def test_the_host_index_label_decides_before_ray_reports() -> None:
    state = idle_slice(head_in_ray=False)
    snap = build_snapshot(tpu_cluster(), slice_pods(), None, [], frozenset(), NOW)
    assert [n.name for n in snap.nodes] == ["t-b", "t-a"]
    snap = build_snapshot(tpu_cluster(), slice_pods(), state, [], frozenset(), NOW)
    assert [n.name for n in snap.nodes] == ["t-b", "t-a"]


def test_the_virtual_cluster_planner_keeps_the_head_host() -> None:
    snap = build_snapshot(tpu_cluster(), slice_pods(), idle_slice(), [], frozenset(), NOW)
    decision = plan(snap, [], {}).decision
    assert (decision.groups["tpu"].replicas, decision.groups["tpu"].launch) == (1, 0)
    assert not decision.unmet
