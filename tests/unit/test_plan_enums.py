"""The controller's plan and the virtual clusters' states are enums (saying what they said as strings), and
a virtual cluster is read through its typed models."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.support.builders import cluster, group, pod

from rayscale.api.raycluster import RayClusterSpec
from rayscale.api.rayvirtualcluster import JobClusterPhase, Phase, RayVirtualClusterStatus, VcNodeState
from rayscale.api.schema import structural_schema
from rayscale.autoscaler.scheduling.model import Node, NodeState
from rayscale.autoscaler.virtual.model import Member, VcGroup, VirtualCluster
from rayscale.autoscaler.virtual.read import read, vc_meta, vc_status
from rayscale.autoscaler.virtual.report import node_state, status_of
from rayscale.cluster.meta import ClusterMeta
from rayscale.controller.plan import DeleteWhy, NodeKind
from rayscale.controller.workers import plan_group


def test_a_workers_plan_says_why_and_what_with_enums() -> None:
    body = cluster(group(replicas=2, scaleStrategy={"workersToDelete": ["b"]}))
    spec = RayClusterSpec.model_validate(body["spec"])
    pods = [pod("a", "small"), pod("b", "small")]
    plan = plan_group(ClusterMeta.from_body(body), spec, spec.workers[0], pods, suffix=lambda: "x")
    (deleted,) = plan.deletes
    assert (deleted.why, deleted.kind) == (DeleteWhy.WORKERS_TO_DELETE, NodeKind.WORKER)
    assert f"{deleted.why} {deleted.kind}" == "workersToDelete worker"  # what the Events say


def test_virtual_cluster_states_are_the_crds() -> None:
    schema = structural_schema(RayVirtualClusterStatus)["properties"]
    assert schema["phase"]["enum"] == [p.value for p in Phase]
    node = schema["groups"]["items"]["properties"]["nodes"]["items"]["properties"]["state"]
    assert node["enum"] == [s.value for s in VcNodeState]
    job = schema["jobClusters"]["items"]["properties"]["phase"]
    assert job["enum"] == [p.value for p in JobClusterPhase]


def test_a_virtual_clusters_status_is_made_of_its_states() -> None:
    assert node_state(None, gcs=True) is VcNodeState.PENDING
    assert node_state(Node("w", "cpu", idle_seconds=5.0), gcs=True) is VcNodeState.IDLE
    assert node_state(Node("w", "cpu", state=NodeState.DEAD), gcs=True) is VcNodeState.DEAD
    vc = VirtualCluster("a", (VcGroup("cpu", 1, 1, 1, 1),))
    obj = {"metadata": {"name": "a", "generation": 1}}
    nodes = {"w": Node("w", "cpu", idle_seconds=5.0)}
    status = status_of(
        obj, vc=vc, members={"w": Member("a")}, nodes=nodes, now=datetime(2026, 1, 1, tzinfo=UTC)
    )
    assert status["phase"] is Phase.READY
    assert status["groups"][0]["nodes"] == [{"pod": "w", "state": VcNodeState.IDLE}]
    assert status["groups"][0]["ready"] == 1


def _vc(generation: int, status: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": "team", "namespace": "ns", "generation": generation, "finalizers": ["x"]},
        "spec": {"rayClusterName": "rc", "groups": [{"groupName": "small", "nodes": 1, "maxNodes": 4}]},
    }
    if status is not None:
        body["status"] = status
    return body


def test_a_virtual_cluster_is_read_through_its_typed_models() -> None:
    """Its metadata and status are typed; the target hosts come from a status of the same revision."""
    rc = RayClusterSpec.model_validate(cluster(group(), autoscaling=True)["spec"])
    groups = [{"groupName": "small", "desired": 3}]
    same = read(rc, [_vc(2, {"revision": 2, "groups": groups, "phase": "Scaling"})], [])
    assert [(v.name, v.groups[0].desired) for v in same.vcs] == [("team", 3)]
    newer = read(rc, [_vc(3, {"revision": 2, "groups": groups})], [])
    assert newer.vcs[0].groups[0].desired == 1  # a spec revision not applied yet: the spec's nodes
    by_hand = read(rc, [_vc(2, {"revision": 2, "groups": groups, "phase": "Whatever"})], [])
    assert by_hand.vcs[0].groups[0].desired == 1  # a status that cannot be read counts for nothing
    meta = vc_meta(_vc(2, None))
    assert (meta.name, meta.generation, meta.finalizers, meta.deletion_timestamp) == ("team", 2, ["x"], None)
    assert vc_status(_vc(2, None)) is None
