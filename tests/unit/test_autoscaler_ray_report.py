"""ray_report: the AutoscalingState rayscale reports to Ray's GCS after a decision."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from rayscale.autoscaler import ray_report
from rayscale.autoscaler.ray_report import (
    LaunchFailure,
    autoscaling_state,
    launch_failures,
    next_version,
    remember,
)
from rayscale.autoscaler.scheduling.model import (
    RAY_REQUEST_UNIT,
    Decision,
    DemandKind,
    Group,
    GroupDecision,
    Node,
    NodeState,
    Options,
    Placement,
    PlacementTarget,
    Removal,
    RemovalCause,
    Snapshot,
    Strategy,
    Target,
    Unmet,
    UnmetReason,
)
from rayscale.ray import model as ray

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
T = int(NOW.timestamp())
CPU = Group("cpu-group", {"CPU": 4})
GPU = Group("gpu-group", {"CPU": 8, "GPU": 1})
TPU = Group("tpu-group", {"TPU": 4}, num_of_hosts=2)
ZONE_A = ray.LabelSelector((ray.GcsLabelConstraint("zone", ray.LabelOperator.IN, ("a",)),))


def _snapshot(*nodes: Node, groups: tuple[Group, ...] = (CPU, GPU, TPU)) -> Snapshot:
    return Snapshot(groups=groups, nodes=nodes, options=Options(max_node_provision_seconds=900))


def _decision(
    launch: Mapping[str, int] | None = None,
    terminate: tuple[Removal, ...] = (),
    unmet: tuple[Unmet, ...] = (),
    placements: tuple[Placement, ...] = (),
) -> Decision:
    groups = {
        g: GroupDecision(current=0, replicas=n, launch=n, terminate=0) for g, n in (launch or {}).items()
    }
    return Decision(groups, terminate, unmet, placements)


def _state(**kwargs: Any) -> ray.ClusterState:
    kwargs.setdefault("version", 17)
    return ray.ClusterState(session_name="s", nodes=(), **kwargs)


def _pod(name: str, phase: str = "Pending", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": phase, **status}}


def _unmet(
    resources: Mapping[str, float], reason: UnmetReason, kind: DemandKind = DemandKind.DEMAND, **kw: Any
) -> Unmet:
    return Unmet(kind, resources, None, None, (), kw.pop("count", 1), reason, **kw)


def _report(snapshot: Snapshot, decision: Decision, state: ray.ClusterState | None = None, **kw: Any) -> Any:
    return autoscaling_state(
        snapshot, decision, state or _state(), kw.pop("failures", ()), NOW, version=kw.pop("version", 5), **kw
    )


# ---- pending launches and pods ----


def test_replicas_without_pods_and_new_launches_are_pending_requests_one_per_host() -> None:
    snapshot = _snapshot(
        Node("unborn:gpu-group:0", "gpu-group", NodeState.PENDING, pending_seconds=30),
        Node("unborn:gpu-group:1", "gpu-group", NodeState.PENDING, pending_seconds=30),
        Node("rc-cpu-a", "cpu-group"),
    )
    report = _report(snapshot, _decision({"tpu-group": 1, "cpu-group": 0}))
    assert report.pending_instance_requests == (
        ray.PendingInstanceRequest("gpu-group", 1, T - 30),
        ray.PendingInstanceRequest("gpu-group", 1, T - 30),
        ray.PendingInstanceRequest("tpu-group", 1, T),  # one replica of two hosts
        ray.PendingInstanceRequest("tpu-group", 1, T),
    )
    assert report.pending_instances == ()
    assert (report.last_seen_cluster_resource_state_version, report.autoscaler_state_version) == (17, 5)


def test_a_replica_given_up_is_not_pending() -> None:
    snapshot = _snapshot(Node("unborn:gpu-group:0", "gpu-group", NodeState.PENDING, pending_seconds=901))
    decision = _decision(terminate=(Removal("unborn:gpu-group:0", "gpu-group", RemovalCause.LAUNCH_FAILED),))
    assert _report(snapshot, decision).pending_instance_requests == ()


def test_pods_without_a_ray_node_are_pending_instances_with_what_they_wait_for() -> None:
    snapshot = _snapshot(
        Node("rc-gpu-unsched", "gpu-group", NodeState.PENDING),
        Node("rc-gpu-pulling", "gpu-group", NodeState.PENDING, booting=True),
        Node("rc-gpu-starting", "gpu-group", NodeState.PENDING, booting=True),
        Node("rc-gpu-raylet", "gpu-group", NodeState.PENDING, booting=True),
        Node("rc-gpu-bare", "gpu-group", NodeState.PENDING),
        Node("rc-cpu-running", "cpu-group"),
        Node("rc-cpu-going", "cpu-group", NodeState.TERMINATING),
        Node("rc-cpu-dead", "cpu-group", NodeState.DEAD),
    )
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    pulling = {"name": "ray-worker", "state": {"waiting": {"reason": "ImagePullBackOff"}}}
    pods = [
        _pod("rc-gpu-unsched", conditions=[unschedulable]),
        _pod("rc-gpu-pulling", containerStatuses=[pulling]),
        _pod("rc-gpu-starting", conditions=[{"type": "PodScheduled", "status": "True"}]),
        _pod("rc-gpu-raylet", "Running", podIP="10.0.0.7"),
        _pod("rc-gpu-bare"),
    ]
    report = _report(snapshot, _decision(), pods=pods)
    assert [
        (p.instance_id, p.ray_node_type_name, p.details, p.ip_address) for p in report.pending_instances
    ] == [
        ("rc-gpu-unsched", "gpu-group", "pod pending: unschedulable", ""),
        ("rc-gpu-pulling", "gpu-group", "pod pending: imagepullbackoff", ""),
        ("rc-gpu-starting", "gpu-group", "pod pending: starting", ""),
        ("rc-gpu-raylet", "gpu-group", "pod running: waiting for its Ray node", "10.0.0.7"),
        ("rc-gpu-bare", "gpu-group", "pod pending", ""),
    ]
    assert report.pending_instance_requests == ()


def test_a_pod_being_removed_as_failed_is_not_pending() -> None:
    snapshot = _snapshot(Node("rc-gpu-x", "gpu-group", NodeState.PENDING, pending_seconds=901))
    decision = _decision(terminate=(Removal("rc-gpu-x", "gpu-group", RemovalCause.LAUNCH_FAILED),))
    assert _report(snapshot, decision, pods=[_pod("rc-gpu-x")]).pending_instances == ()


# ---- launch failures ----


def test_launch_failures_name_the_group_the_clock_and_why() -> None:
    snapshot = _snapshot(
        Node("unborn:gpu-group:0", "gpu-group", NodeState.PENDING, pending_seconds=900),
        Node("rc-gpu-a", "gpu-group", NodeState.PENDING, pending_seconds=950),
        Node("rc-gpu-b", "gpu-group", NodeState.PENDING, pending_seconds=3700, booting=True),
        Node("rc-cpu-idle", "cpu-group"),
    )
    terminate = (
        Removal("unborn:gpu-group:0", "gpu-group", RemovalCause.LAUNCH_FAILED),
        Removal("rc-gpu-a", "gpu-group", RemovalCause.LAUNCH_FAILED),
        Removal("rc-gpu-b", "gpu-group", RemovalCause.LAUNCH_FAILED),
        Removal("rc-cpu-idle", "cpu-group", RemovalCause.IDLE),
    )
    failures = launch_failures(snapshot, _decision(terminate=terminate), NOW)
    assert sorted(failures, key=lambda f: f.reason) == [
        LaunchFailure("gpu-group", 1, "pod not created within 900s", NOW - timedelta(seconds=900), NOW),
        LaunchFailure("gpu-group", 1, "pod not scheduled within 900s", NOW - timedelta(seconds=950), NOW),
        LaunchFailure(
            "gpu-group", 1, "pod scheduled but no Ray node within 3600s", NOW - timedelta(seconds=3700), NOW
        ),
    ]
    # only the removals whose patch landed
    landed = launch_failures(snapshot, _decision(terminate=terminate), NOW, landed=["rc-gpu-a"])
    assert [f.reason for f in landed] == ["pod not scheduled within 900s"]


def test_hosts_failing_together_are_counted_together() -> None:
    snapshot = _snapshot(
        Node(
            "unborn:tpu-group:0:0",
            "tpu-group",
            NodeState.PENDING,
            replica="unborn:tpu-group:0",
            pending_seconds=901,
        ),
        Node(
            "unborn:tpu-group:0:1",
            "tpu-group",
            NodeState.PENDING,
            replica="unborn:tpu-group:0",
            pending_seconds=901,
        ),
    )
    terminate = tuple(
        Removal(n.name, "tpu-group", RemovalCause.LAUNCH_FAILED, replica=n.replica) for n in snapshot.nodes
    )
    [failure] = launch_failures(snapshot, _decision(terminate=terminate), NOW)
    assert (failure.group, failure.count) == ("tpu-group", 2)


def test_failures_are_remembered_for_ten_minutes() -> None:
    old = LaunchFailure("gpu-group", 1, "x", NOW - timedelta(minutes=30), NOW - timedelta(minutes=11))
    recent = LaunchFailure("gpu-group", 1, "y", NOW - timedelta(minutes=20), NOW - timedelta(minutes=9))
    new = LaunchFailure("cpu-group", 2, "z", NOW - timedelta(minutes=15), NOW)
    assert remember([old, recent], [new], NOW) == (recent, new)
    assert remember([recent], [], NOW + timedelta(minutes=2)) == ()


def test_failures_are_reported_one_per_host_newest_first() -> None:
    older = LaunchFailure("gpu-group", 1, "pod not scheduled within 900s", NOW - timedelta(seconds=1000), NOW)
    newer = LaunchFailure(
        "tpu-group",
        2,
        "pod not created within 900s",
        NOW - timedelta(seconds=900),
        NOW + timedelta(seconds=5),
    )
    report = _report(_snapshot(), _decision(), failures=[older, newer])
    assert report.failed_instance_requests == (
        ray.FailedInstanceRequest("tpu-group", 1, "pod not created within 900s", T - 900, T + 5),
        ray.FailedInstanceRequest("tpu-group", 1, "pod not created within 900s", T - 900, T + 5),
        ray.FailedInstanceRequest("gpu-group", 1, "pod not scheduled within 900s", T - 1000, T),
    )


def test_failed_entries_are_capped() -> None:
    many = LaunchFailure("gpu-group", 1000, "x", NOW, NOW)
    assert (
        len(_report(_snapshot(), _decision(), failures=[many]).failed_instance_requests)
        == ray_report.MAX_FAILURES
    )


# ---- infeasible demand ----


def test_demand_no_group_can_hold_is_echoed_as_the_gcs_sent_it() -> None:
    gpu = ray.ResourceRequest({"GPU": 1.0, "CPU": 1.0}, label_selectors=(ZONE_A,))
    cpu = ray.ResourceRequest({"CPU": 1.0})
    state = _state(pending_requests=(ray.ResourceDemand(gpu, 2), ray.ResourceDemand(cpu, 4)))
    decision = _decision(
        unmet=(_unmet({"CPU": 1, "GPU": 1}, UnmetReason.NO_MATCHING_GROUP, count=2),),
        placements=(
            Placement(
                DemandKind.DEMAND,
                {"CPU": 1},
                None,
                None,
                (),
                4,
                (PlacementTarget("cpu-group", Target.NEW, 4),),
            ),
        ),
    )
    report = _report(_snapshot(), decision, state)
    assert report.infeasible_resource_requests == (gpu, gpu)
    assert report.infeasible_resource_requests[0] is gpu  # selectors and constraints untouched


def test_groups_at_their_maximum_make_demand_infeasible_too() -> None:
    gpu = ray.ResourceRequest({"GPU": 1.0})
    state = _state(pending_requests=(ray.ResourceDemand(gpu, 1),))
    for reason in (UnmetReason.MAX_REPLICAS, UnmetReason.MAX_WORKERS):
        decision = _decision(unmet=(_unmet({"GPU": 1}, reason),))
        assert _report(_snapshot(), decision, state).infeasible_resource_requests == (gpu,)


def test_backoff_and_upscaling_limits_pass_so_nothing_is_infeasible() -> None:
    gpu = ray.ResourceRequest({"GPU": 1.0})
    state = _state(pending_requests=(ray.ResourceDemand(gpu, 1),))
    for reason in (UnmetReason.BACKOFF, UnmetReason.UPSCALING_LIMIT):
        decision = _decision(unmet=(_unmet({"GPU": 1}, reason),))
        assert _report(_snapshot(), decision, state).infeasible_resource_requests == ()


def test_a_shape_is_not_infeasible_while_demand_of_that_shape_is_being_served() -> None:
    """The GCS fails queued tasks by resource shape alone: a GPU task in zone b that rayscale is
    launching a node for must not be failed because no group serves zone a."""
    in_a = ray.ResourceRequest({"GPU": 1.0}, label_selectors=(ZONE_A,))
    in_b = ray.ResourceRequest({"GPU": 1.0})
    state = _state(pending_requests=(ray.ResourceDemand(in_a, 1), ray.ResourceDemand(in_b, 1)))
    placed = Placement(
        DemandKind.DEMAND, {"GPU": 1}, None, None, (), 1, (PlacementTarget("gpu-group", Target.NEW, 1),)
    )
    decision = _decision(unmet=(_unmet({"GPU": 1}, UnmetReason.NO_MATCHING_GROUP),), placements=(placed,))
    assert _report(_snapshot(), decision, state).infeasible_resource_requests == ()
    # the same shape also waiting on a backoff: not infeasible either
    waiting = _unmet({"GPU": 1}, UnmetReason.BACKOFF)
    decision = _decision(unmet=(_unmet({"GPU": 1}, UnmetReason.NO_MATCHING_GROUP), waiting))
    assert _report(_snapshot(), decision, state).infeasible_resource_requests == ()


def test_infeasible_copies_are_capped() -> None:
    gpu = ray.ResourceRequest({"GPU": 1.0})
    state = _state(pending_requests=(ray.ResourceDemand(gpu, 10_000),))
    decision = _decision(unmet=(_unmet({"GPU": 1}, UnmetReason.NO_MATCHING_GROUP, count=10_000),))
    assert len(_report(_snapshot(), decision, state).infeasible_resource_requests) == ray_report.MAX_COPIES


def _gang(strategy: str, *bundles: dict[str, float]) -> ray.GangRequest:
    requests = tuple(ray.ResourceRequest(b) for b in bundles)
    return ray.GangRequest(
        bundles=requests,
        selectors=(ray.GangSelector(requests),),
        details=f"ab12:{strategy}|PENDING",
        strategy=strategy,
    )


def test_infeasible_placement_groups_are_echoed() -> None:
    big = _gang("STRICT_PACK", {"GPU": 8.0}, {"GPU": 8.0})
    small = _gang("PACK", {"CPU": 1.0})
    state = _state(pending_gangs=(big, small))
    gang_unmet = Unmet(
        DemandKind.GANG,
        None,
        ({"GPU": 8}, {"GPU": 8}),
        Strategy.STRICT_PACK,
        (),
        1,
        UnmetReason.NO_MATCHING_GROUP,
    )
    waiting = Unmet(DemandKind.GANG, None, ({"CPU": 1},), Strategy.PACK, (), 1, UnmetReason.BACKOFF)
    report = _report(_snapshot(), _decision(unmet=(gang_unmet, waiting)), state)
    assert report.infeasible_gang_resource_requests == (big,)


def test_request_resources_that_cannot_be_met_is_infeasible_but_not_a_rayresourcerequest() -> None:
    bundles = (ray.ResourceDemand(ray.ResourceRequest({"CPU": 64.0}), 2),)
    state = _state(constraints=(bundles,))
    ours = _unmet(
        {"CPU": 64}, UnmetReason.MAX_WORKERS, kind=DemandKind.CONSTRAINT, unit=RAY_REQUEST_UNIT, count=2
    )
    assert _report(_snapshot(), _decision(unmet=(ours,)), state).infeasible_cluster_resource_constraints == (
        bundles,
    )
    theirs = _unmet({"CPU": 64}, UnmetReason.MAX_WORKERS, kind=DemandKind.CONSTRAINT, unit="ns/big", count=2)
    assert (
        _report(_snapshot(), _decision(unmet=(theirs,)), state).infeasible_cluster_resource_constraints == ()
    )
    waiting = _unmet(
        {"CPU": 64}, UnmetReason.BACKOFF, kind=DemandKind.CONSTRAINT, unit=RAY_REQUEST_UNIT, count=2
    )
    assert (
        _report(_snapshot(), _decision(unmet=(waiting,)), state).infeasible_cluster_resource_constraints == ()
    )
    # a decision that names no units: Ray's request is recognised by its bundles
    unnamed = _unmet({"CPU": 64}, UnmetReason.NO_MATCHING_GROUP, kind=DemandKind.CONSTRAINT, count=2)
    assert _report(
        _snapshot(), _decision(unmet=(unnamed,)), state
    ).infeasible_cluster_resource_constraints == (bundles,)


# ---- versions ----


def test_versions_always_increase_even_across_restarts() -> None:
    state = _state()
    first = next_version(None, state, NOW)
    assert first >= int(NOW.timestamp() * 1000)
    assert next_version(first, state, NOW) == first + 1  # same millisecond: still higher
    assert next_version(first, state, NOW - timedelta(hours=1)) == first + 1  # the clock went back
    # a restarted rayscale (nothing remembered) is still ahead of the one before it
    assert next_version(None, state, NOW + timedelta(seconds=1)) > first
    # what the GCS says it has seen counts too
    seen = _state(last_seen_autoscaler_state_version=first + 1000)
    assert next_version(None, seen, NOW) == first + 1001
