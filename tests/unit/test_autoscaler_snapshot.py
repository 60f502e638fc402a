"""Building the scheduler's Snapshot from a RayCluster, its pods, the GCS state and RayResourceRequests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support.builders import cluster, group, pod

from rayscale.api.names import RAYRESOURCEREQUEST
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import (
    Constraint,
    Demand,
    Gang,
    LabelConstraint,
    LabelOp,
    Node,
    NodeState,
    RemovalCause,
    Snapshot,
    Strategy,
    UnmetReason,
)
from rayscale.autoscaler.snapshot import (
    MAX_NODE_BOOT_ANNOTATION,
    MAX_NODE_PROVISION_ANNOTATION,
    build_snapshot,
    is_unborn,
    ray_missing_since,
    short_groups,
)
from rayscale.autoscaler.spec_reader import SpecError
from rayscale.ray import model as ray

NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)  # the factory's pods were created an hour earlier
GPU_TEMPLATE = {
    "spec": {"containers": [{"name": "ray", "resources": {"limits": {"cpu": "4", "nvidia.com/gpu": "1"}}}]}
}


def rc(**groups: dict[str, Any]) -> dict[str, Any]:
    return cluster(*groups.values(), autoscaling=True)


def gcs(*nodes: ray.RayNodeState, **extra: Any) -> ray.ClusterState:
    return ray.ClusterState(version=1, session_name="s", nodes=nodes, **extra)


def ray_node(
    pod_name: str, status: ray.NodeStatus = ray.NodeStatus.RUNNING, **extra: Any
) -> ray.RayNodeState:
    return ray.RayNodeState(node_id=f"id-{pod_name}", status=status, instance_id=pod_name, **extra)


def build(
    body: dict[str, Any],
    pods: list[dict[str, Any]],
    state: ray.ClusterState | None = None,
    requests: list[dict[str, Any]] | None = None,
    backing_off: frozenset[str] = frozenset(),
) -> Snapshot:
    return build_snapshot(body, pods, state, requests or [], backing_off, NOW)


def nodes_by_name(snapshot: Snapshot) -> dict[str, Node]:
    return {n.name: n for n in snapshot.nodes}


def test_groups_come_from_the_spec_with_backoff() -> None:
    body = rc(
        a=group("small", replicas=0, max_replicas=5),
        b=group("gpu", replicas=0, template=GPU_TEMPLATE),
    )
    snap = build(body, [], backing_off=frozenset({"gpu"}))
    assert [(g.name, g.backoff) for g in snap.groups] == [("small", False), ("gpu", True)]
    assert snap.groups[0].resources["CPU"] == 1
    assert snap.groups[0].max_replicas == 5
    assert snap.groups[1].resources["GPU"] == 1
    assert snap.options.max_node_provision_seconds == 900


def test_provision_timeout_from_argument_and_annotation() -> None:
    body = rc(a=group(replicas=0))
    assert (
        build_snapshot(
            body, [], None, [], (), NOW, max_node_provision_seconds=60
        ).options.max_node_provision_seconds
        == 60
    )
    body["metadata"]["annotations"] = {MAX_NODE_PROVISION_ANNOTATION: "30"}
    assert build(body, []).options.max_node_provision_seconds == 30
    body["metadata"]["annotations"] = {MAX_NODE_PROVISION_ANNOTATION: "soon"}
    assert build(body, []).options.max_node_provision_seconds == 900


def test_pods_joined_with_ray_nodes_by_pod_name() -> None:
    body = rc(a=group(replicas=4))
    pods = [
        pod("w-idle"),
        pod("w-busy"),
        pod("w-noray"),  # running pod, Ray not up yet
        pod("w-sched", phase="Pending", ready=False, created="2026-01-01T00:50:00Z"),
        pod("head", "headgroup"),
    ]
    state = gcs(
        ray_node("w-idle", ray.NodeStatus.IDLE, idle_duration_ms=90_000, available_resources={"CPU": 1.0}),
        ray_node("w-busy", available_resources={"CPU": 0.0}),
        ray_node("w-sched", ray.NodeStatus.DEAD),
    )
    nodes = nodes_by_name(build(body, pods, state))
    assert set(nodes) == {"w-idle", "w-busy", "w-noray", "w-sched"}
    assert nodes["w-idle"] == Node(
        "w-idle", "small", NodeState.RUNNING, available={"CPU": 1.0}, idle_seconds=90.0
    )
    assert nodes["w-busy"].state is NodeState.RUNNING
    assert nodes["w-busy"].idle_seconds == 0
    assert nodes["w-busy"].available == {"CPU": 0.0}
    # runs without a Ray node: booting, aged from when it was first seen so (now: no map given)
    assert nodes["w-noray"] == Node("w-noray", "small", NodeState.PENDING, booting=True)
    # not running, not scheduled (a DEAD node of an earlier container does not count): from creation
    assert nodes["w-sched"] == Node("w-sched", "small", NodeState.PENDING, pending_seconds=600)


def test_terminating_listed_and_failed_pods() -> None:
    body = rc(a=group(replicas=1, scaleStrategy={"workersToDelete": ["w-listed"]}))
    pods = [
        pod("w-ok"),
        pod("w-listed"),
        pod("w-gone", deleting="2026-01-01T00:59:00Z"),
        pod("w-failed", phase="Failed", ready=False),
    ]
    state = gcs(*(ray_node(p["metadata"]["name"]) for p in pods))
    nodes = nodes_by_name(build(body, pods, state))
    assert nodes["w-ok"].state is NodeState.RUNNING
    for name in ("w-listed", "w-gone", "w-failed"):
        assert nodes[name].state is NodeState.TERMINATING, name
    assert not any(is_unborn(n) for n in nodes)


def test_draining_node_takes_no_work_and_goes() -> None:
    body = rc(a=group(replicas=1))
    state = gcs(
        ray_node("w", ray.NodeStatus.DRAINING, idle_duration_ms=5000, available_resources={"CPU": 1.0})
    )
    snap = build(body, [pod("w")], state)
    node = nodes_by_name(snap)["w"]
    assert node.state is NodeState.DRAINING
    assert node.available is None  # idle: it goes, whatever is free
    assert node.idle_seconds == 5
    assert [(r.name, r.reason) for r in schedule(snap).terminate] == [("w", RemovalCause.DRAINED)]


def test_running_pod_whose_ray_node_died_goes_as_node_dead() -> None:
    body = rc(a=group(replicas=2, min_replicas=2))
    state = gcs(ray_node("w1", ray.NodeStatus.DEAD), ray_node("w2"))
    snap = build(body, [pod("w1"), pod("w2")], state)
    assert nodes_by_name(snap)["w1"].state is NodeState.DEAD
    decision = schedule(snap)
    assert [(r.name, r.reason) for r in decision.terminate] == [("w1", RemovalCause.NODE_DEAD)]
    assert decision.groups["small"].replicas == 2  # min replicas brings a new one


def test_a_restarted_raylet_is_alive_again() -> None:
    body = rc(a=group(replicas=1))
    state = gcs(
        ray_node("w", ray.NodeStatus.DEAD), ray.RayNodeState("id-new", ray.NodeStatus.IDLE, instance_id="w")
    )
    assert nodes_by_name(build(body, [pod("w")], state))["w"].state is NodeState.RUNNING


def test_running_pod_without_ray_node_ages_from_when_first_seen_missing() -> None:
    """The old rule aged it from the pod's creation: a worker whose Ray node vanished (a head restart)
    was removed as a failed launch after 900 s and its group backed off."""
    body = rc(a=group(replicas=1))
    body["metadata"]["annotations"] = {MAX_NODE_PROVISION_ANNOTATION: "5"}
    old = "2025-06-01T00:00:00Z"
    pods = [pod("w", created=old)]
    seen = {"w": datetime(2026, 1, 1, 0, 50, 0, tzinfo=UTC)}  # 600 s before NOW
    snap = build_snapshot(body, pods, gcs(), [], (), NOW, missing_since=seen)
    assert snap.nodes == (Node("w", "small", NodeState.PENDING, pending_seconds=600, booting=True),)
    assert snap.options.max_node_boot_seconds == 3600
    assert schedule(snap).terminate == ()
    # an hour and more without a Ray node: that is a failed launch
    seen = {"w": datetime(2025, 12, 31, 23, 59, 0, tzinfo=UTC)}
    late = build_snapshot(body, pods, gcs(), [], (), NOW, missing_since=seen)
    assert [r.reason for r in schedule(late).terminate] == [RemovalCause.LAUNCH_FAILED]


def scheduled(
    name: str, at: str | None, *, status: str = "True", created: str = "2025-06-01T00:00:00Z"
) -> dict[str, Any]:
    p = pod(name, phase="Pending", ready=False, created=created)
    cond: dict[str, Any] = {"type": "PodScheduled", "status": status}
    if at is not None:
        cond["lastTransitionTime"] = at
    p["status"]["conditions"].append(cond)
    return p


def test_scheduled_pod_boots_from_when_it_was_scheduled() -> None:
    """Slow image pulls: the pod was created long ago but scheduled 20 minutes ago; the old rule
    removed it at 900 s from creation."""
    body = rc(a=group(replicas=4))
    pods = [
        scheduled("w-pulling", "2026-01-01T00:40:00Z"),
        scheduled("w-no-time", None, created="2026-01-01T00:59:00Z"),  # then from creation
        scheduled("w-unschedulable", "2026-01-01T00:59:00Z", status="False", created="2026-01-01T00:40:00Z"),
        pod("w-new", phase="Pending", ready=False, created="2026-01-01T00:55:00Z"),
    ]
    snap = build(body, pods, gcs())
    nodes = nodes_by_name(snap)
    assert nodes["w-pulling"] == Node(
        "w-pulling", "small", NodeState.PENDING, pending_seconds=1200, booting=True
    )
    assert nodes["w-no-time"] == Node(
        "w-no-time", "small", NodeState.PENDING, pending_seconds=60, booting=True
    )
    assert nodes["w-unschedulable"] == Node(
        "w-unschedulable", "small", NodeState.PENDING, pending_seconds=1200
    )
    assert nodes["w-new"] == Node("w-new", "small", NodeState.PENDING, pending_seconds=300)
    decision = schedule(snap)
    assert [(r.name, r.reason) for r in decision.terminate] == [
        ("w-unschedulable", RemovalCause.LAUNCH_FAILED)
    ]
    # without the GCS the same clocks apply to pods that do not run
    assert {n.name: n.booting for n in build(body, pods, None).nodes if not is_unborn(n.name)} == {
        "w-pulling": True, "w-no-time": True, "w-unschedulable": False, "w-new": False,
    }  # fmt: skip


def test_boot_limit_from_argument_and_annotation() -> None:
    body = rc(a=group(replicas=0))
    assert build(body, []).options.max_node_boot_seconds == 3600
    snap = build_snapshot(body, [], None, [], (), NOW, max_node_boot_seconds=600)
    assert snap.options.max_node_boot_seconds == 600
    body["metadata"]["annotations"] = {MAX_NODE_BOOT_ANNOTATION: "7200"}
    assert build(body, []).options.max_node_boot_seconds == 7200
    body["metadata"]["annotations"] = {MAX_NODE_BOOT_ANNOTATION: "-1"}
    assert build(body, []).options.max_node_boot_seconds == 3600


def test_missing_since_starts_keeps_and_forgets() -> None:
    t0 = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
    pods = [pod("a"), pod("b"), pod("c"), pod("d", phase="Pending", ready=False), pod("h", "headgroup")]
    state = gcs(ray_node("c"), ray_node("b", ray.NodeStatus.DEAD))
    previous = {"a": t0, "b": t0, "c": t0, "d": t0, "gone": t0}
    # a: still missing, keeps t0; b: has a (dead) node; c: its node appeared; d: not running;
    # gone: no pod; the head pod is not a worker
    assert ray_missing_since(pods, state, previous, NOW) == {"a": t0}
    assert ray_missing_since(pods, state, {}, NOW) == {"a": NOW}
    # without the GCS nothing can be told: kept, minus pods that are gone
    assert ray_missing_since(pods, None, previous, NOW) == {"a": t0, "b": t0, "c": t0, "d": t0}


def test_pods_whose_drain_was_accepted_are_draining_until_their_removal_lands() -> None:
    body = rc(a=group(replicas=2))
    pods = [pod("w1"), pod("w2")]
    busy = gcs(ray_node("w1", available_resources={"CPU": 0.0}), ray_node("w2"))
    for state in (busy, None):
        snap = build_snapshot(body, pods, state, [], (), NOW, draining={"w1", "other"})
        assert nodes_by_name(snap)["w1"] == Node("w1", "small", NodeState.DRAINING)
        decision = schedule(snap)
        assert [(r.name, r.reason) for r in decision.terminate] == [("w1", RemovalCause.DRAINED)]
        assert decision.groups["small"].replicas == 1


def test_head_and_running_node_labels_come_from_the_gcs() -> None:
    body = rc(a=group(replicas=1))
    head = ray.RayNodeState(
        "id-head", ray.NodeStatus.RUNNING, total_resources={"CPU": 2.0, "node:__internal_head__": 1.0},
        available_resources={"CPU": 1.0},
    )  # fmt: skip
    w = ray_node("w", labels={"zone": "a"}, dynamic_labels={"_PG_x": ""})
    snap = build(body, [pod("w")], gcs(head, w))
    assert snap.head is not None
    assert snap.head.resources == {"CPU": 2.0, "node:__internal_head__": 1.0}
    assert nodes_by_name(snap)["w"].labels == {"zone": "a", "_PG_x": ""}
    assert build(body, [pod("w")], gcs(ray_node("w"))).head is None
    assert nodes_by_name(build(body, [pod("w")], gcs(ray_node("w"))))["w"].labels is None


def test_gcs_unreachable_running_nodes_are_busy_and_never_removed() -> None:
    body = rc(a=group(replicas=2, min_replicas=0), b=group("other", replicas=0))
    body["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": 0}
    old = "2025-01-01T00:00:00Z"
    pods = [pod("w1", created=old), pod("w2", created=old)]
    snap = build(body, pods, None)
    assert {n.state for n in snap.nodes} == {NodeState.RUNNING}
    assert all(n.idle_seconds == 0 and n.pending_seconds == 0 for n in snap.nodes)
    assert snap.demands == ()
    assert snap.gangs == ()
    assert schedule(snap).terminate == ()
    # the same pods, idle for an hour per the GCS, are removed: the test above can fail
    state = gcs(*(ray_node(n, ray.NodeStatus.IDLE, idle_duration_ms=3_600_000) for n in ("w1", "w2")))
    assert {r.reason for r in schedule(build(body, pods, state)).terminate} == {RemovalCause.IDLE}


def test_unscheduled_pod_ages_even_without_gcs() -> None:
    body = rc(a=group(replicas=1))
    snap = build(body, [pod("w", phase="Pending", ready=False, created="2026-01-01T00:30:00Z")], None)
    assert snap.nodes == (Node("w", "small", NodeState.PENDING, pending_seconds=1800),)
    assert [r.reason for r in schedule(snap).terminate] == [RemovalCause.LAUNCH_FAILED]


def test_replicas_without_pods_yet_are_unborn_pending_nodes() -> None:
    body = rc(a=group(replicas=3, scaleStrategy={"workersToDelete": ["w-listed"]}))
    pods = [pod("w1"), pod("w-listed")]
    snap = build(body, pods, gcs(ray_node("w1"), ray_node("w-listed")))
    unborn = [n for n in snap.nodes if is_unborn(n.name)]
    assert len(unborn) == 2
    assert all(n.state is NodeState.PENDING and n.group == "small" for n in unborn)
    decision = schedule(snap)
    assert decision.groups["small"].replicas == 3  # nothing launched twice, nothing removed
    assert decision.groups["small"].launch == 0


def test_replicas_whose_pods_are_never_created_fail_to_launch() -> None:
    """A quota or an admission webhook refuses the pods: the group has been short since `short_since`."""
    body = rc(a=group(replicas=3), b=group("fallback", replicas=0))
    pods = [pod("w1")]
    state = gcs(ray_node("w1"))
    assert short_groups(build(body, pods, state)) == {"small"}

    fresh = build_snapshot(body, pods, state, [], (), NOW, short_since={"small": NOW})
    assert {n.pending_seconds for n in fresh.nodes if is_unborn(n.name)} == {0.0}
    assert schedule(fresh).terminate == ()

    since = datetime(2026, 1, 1, 0, 44, 0, tzinfo=UTC)  # 16 minutes: past the default 900 s
    old = build_snapshot(body, pods, state, [], (), NOW, short_since={"small": since})
    assert {n.pending_seconds for n in old.nodes if is_unborn(n.name)} == {960.0}
    decision = schedule(old)
    assert [(r.group, r.reason) for r in decision.terminate] == [("small", RemovalCause.LAUNCH_FAILED)] * 2
    assert all(is_unborn(r.name) for r in decision.terminate)
    assert decision.groups["small"].replicas == 1  # the running pod stays


def test_unborn_follows_min_and_max() -> None:
    body = rc(a=group(replicas=0, min_replicas=2), b=group("big", replicas=9, max_replicas=1))
    counts: dict[str, int] = {}
    for n in build(body, []).nodes:
        counts[n.group] = counts.get(n.group, 0) + 1
    assert counts == {"small": 2, "big": 1}


def test_multi_host_replicas() -> None:
    body = rc(a=group("tpu", replicas=2, hosts=2))
    pods = [
        pod("t-a-0", "tpu", replica="tpu-a", host=0),
        pod("t-a-1", "tpu", replica="tpu-a", host=1),
    ]
    snap = build(body, pods, gcs(ray_node("t-a-0"), ray_node("t-a-1")))
    real = [n for n in snap.nodes if not is_unborn(n.name)]
    assert {n.replica for n in real} == {"tpu-a"}
    unborn = [n for n in snap.nodes if is_unborn(n.name)]
    assert len(unborn) == 2
    assert len({n.replica for n in unborn}) == 1
    assert schedule(snap).groups["tpu"].replicas == 2


def test_multi_host_pods_without_replica_labels_form_replicas_of_num_of_hosts() -> None:
    """KubeRay before v1.6 labels no replica: 2 pods of a 2-host group are one replica, not two."""
    body = rc(a=group("tpu", replicas=1, hosts=2))
    pods = [pod("t-x", "tpu"), pod("t-y", "tpu")]
    snap = build(body, pods, gcs(ray_node("t-x"), ray_node("t-y")))
    assert [n.replica for n in snap.nodes] == ["unlabelled:tpu:0", "unlabelled:tpu:0"]
    decision = schedule(snap)
    assert (decision.groups["tpu"].replicas, decision.terminate) == (1, ())


def test_demand_gangs_and_gcs_constraints() -> None:
    body = rc(a=group(replicas=0))
    zone = ray.LabelSelector((ray.GcsLabelConstraint("zone", ray.LabelOperator.IN, ("a", "b")),))
    other = ray.LabelSelector((ray.GcsLabelConstraint("zone", ray.LabelOperator.NOT_IN, ("c",)),))
    bundle = ray.ResourceRequest({"GPU": 1.0})
    state = gcs(
        pending_requests=(
            ray.ResourceDemand(ray.ResourceRequest({"CPU": 1.0}, label_selectors=(zone, other)), 5),
            ray.ResourceDemand(ray.ResourceRequest({"CPU": 2.0}), 0),
        ),
        pending_gangs=(
            ray.GangRequest(bundles=(bundle, bundle), strategy="STRICT_SPREAD"),
            ray.GangRequest(bundles=(bundle, bundle), strategy="STRICT_SPREAD"),
            ray.GangRequest(
                bundles=(
                    ray.ResourceRequest(
                        {"CPU": 1.0}, placement_constraints=(ray.PlacementConstraint("affinity", "_PG_x"),)
                    ),
                )
            ),
        ),
        constraints=((ray.ResourceDemand(ray.ResourceRequest({"CPU": 4.0}), 2),),),
    )
    snap = build(body, [], state)
    assert snap.demands == (
        Demand(
            {"CPU": 1.0},
            5,
            (LabelConstraint("zone", LabelOp.IN, ("a", "b")),),
            ((LabelConstraint("zone", LabelOp.NOT_IN, ("c",)),),),
        ),
    )
    assert snap.gangs == (
        Gang(Strategy.STRICT_SPREAD, ({"GPU": 1.0}, {"GPU": 1.0}), 2),
        Gang(Strategy.STRICT_PACK, ({"CPU": 1.0},), 1),
    )
    assert snap.constraints == (Constraint({"CPU": 4.0}, 2),)


def request(name: str, cluster_name: str = "rc", namespace: str = "ns", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, **extra}
    return {
        **RAYRESOURCEREQUEST.type_meta(),
        "metadata": meta,
        "spec": {
            "clusterName": cluster_name,
            "bundles": [{"resources": {"GPU": 1, "memory": "1Gi"}, "count": 3}],
        },
    }


def test_resource_requests_join_gcs_constraints() -> None:
    body = rc(a=group(replicas=0))
    state = gcs(constraints=((ray.ResourceDemand(ray.ResourceRequest({"CPU": 4.0}), 2),),))
    requests = [
        request("b-reserve"),
        request("a-reserve"),
        request("other-cluster", cluster_name="rc2"),
        request("other-ns", namespace="ns2"),
        request("deleting", deletionTimestamp="2026-01-01T00:00:00Z"),
    ]
    requests[1]["spec"]["bundles"] = [{"resources": {"CPU": "500m"}}]
    bad = request("bad")
    bad["spec"]["bundles"] = [{"resources": {"CPU": "lots"}}]
    snap = build(body, [], state, [*requests, bad])
    assert snap.constraints == (
        Constraint({"CPU": 4.0}, 2),
        Constraint({"CPU": 0.5}, 1, unit="ns/a-reserve"),
        Constraint({"GPU": 1.0, "memory": 2.0**30}, 3, unit="ns/b-reserve"),
    )


def test_resource_requests_without_gcs() -> None:
    snap = build(rc(a=group(replicas=0)), [], None, [request("r")])
    assert snap.constraints == (Constraint({"GPU": 1.0, "memory": 2.0**30}, 3, unit="ns/r"),)


def test_pods_of_unknown_or_suspended_groups_are_left_out() -> None:
    body = rc(a=group(replicas=1), b=group("off", replicas=1, suspend=True))
    pods = [pod("w"), pod("x", "off"), pod("y", "nosuch")]
    assert [n.name for n in build(body, pods, gcs(ray_node("w"))).nodes] == ["w"]


def test_the_pod_limit_caps_the_decision_and_refuses_specs_beyond_it() -> None:
    """With --max-pods-per-cluster the autoscaler never writes replicas past the limit (whatever
    maxReplicas says), and a spec already past it is refused before a node is made for each replica."""

    def request(count: int) -> dict[str, Any]:
        bundles = [{"resources": {"CPU": 1}, "count": count}]
        return {
            "metadata": {"name": "r", "namespace": "ns"},
            "spec": {"clusterName": "rc", "bundles": bundles},
        }

    body = rc(a=group("a", replicas=0, max_replicas=2**31 - 1), b=group("b", replicas=0, max_replicas=5))
    snapshot = build_snapshot(body, [], None, [], (), NOW, max_pods=10)
    assert snapshot.options.max_workers == 10
    assert build_snapshot(body, [], None, [], (), NOW).options.max_workers is None
    # only set where the groups' maxima could go past the limit
    small = rc(b=group("b", replicas=0, max_replicas=5))
    assert build_snapshot(small, [], None, [], (), NOW, max_pods=10).options.max_workers is None
    decision = schedule(build_snapshot(body, [], None, [request(8)], (), NOW, max_pods=10))
    assert sum(g.replicas for g in decision.groups.values()) == 8
    # 50 one-CPU bundles need 50 one-CPU pods: all or nothing, so nothing, and the reason says why
    decision = schedule(build_snapshot(body, [], None, [request(50)], (), NOW, max_pods=10))
    assert (decision.groups["a"].replicas, decision.groups["b"].replicas) == (0, 0)
    assert {u.reason for u in decision.unmet} == {UnmetReason.MAX_WORKERS}

    over = rc(a=group("a", replicas=100_000, max_replicas=2**31 - 1))
    with pytest.raises(SpecError, match=r"^spec.workerGroupSpecs\[0\]\.replicas: 100000 replicas"):
        build_snapshot(over, [], None, [], (), NOW, max_pods=10_000)
