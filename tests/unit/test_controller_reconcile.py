"""Whole-cluster planning: services, head, groups in order, suspend, validation, managedBy."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import cluster, group, pod, with_status

from rayscale.cluster.validation import Invalid
from rayscale.controller import pods as podspec
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.plan import Plan
from rayscale.controller.reconcile import PlannerOptions, plan_cluster
from rayscale.controller.snapshot import ClusterSnapshot


def _plan(body: dict[str, Any], pods: list[dict[str, Any]], services: list[str] | None = None,
          exp: ScaleExpectations | None = None) -> Plan:  # fmt: skip
    svcs = [{"metadata": {"name": n}} for n in (services if services is not None else ["rc-head-svc"])]
    plan, _ = plan_cluster(ClusterSnapshot(body, pods, svcs), exp or ScaleExpectations())
    return plan


def stored(kind: str, status: str = "True", message: str = "") -> dict[str, Any]:
    """A condition as the API server stores it (the CRD requires its time and reason)."""
    time = "2026-01-01T00:00:00Z"
    return {"type": kind, "status": status, "lastTransitionTime": time, "reason": kind, "message": message}


def _summary(plan: Plan) -> list[tuple[str, int, int]]:
    return [(s.group, len(s.creates), len(s.deletes)) for s in plan.steps]


def test_new_cluster_creates_services_head_and_workers_in_spec_order() -> None:
    plan = _plan(cluster(group("b", replicas=2), group("a", replicas=1, hosts=2)), [], services=[])
    assert [s["metadata"]["name"] for s in plan.services] == ["rc-head-svc", "rc-headless"]
    assert _summary(plan) == [("", 1, 0), ("b", 2, 0), ("a", 2, 0)]


def test_unmet_expectations_skip_group() -> None:
    exp = ScaleExpectations()
    exp.expect(("ns", "rc", "a"), "rc-a-worker-x", "create")
    plan = _plan(cluster(group("a", replicas=2), group("b", replicas=1)), [pod("h", "headgroup")], exp=exp)
    assert _summary(plan) == [("b", 1, 0)]
    assert plan.requeue_after is not None
    assert plan.requeue_after <= 30.1


def test_invalid_spec_touches_nothing_and_warns_once() -> None:
    body = cluster(group(min_replicas=3, max_replicas=1))
    plan = _plan(body, [pod("h", "headgroup")], services=[])
    assert plan.steps == []
    assert plan.services == []
    assert plan.invalid == "spec.workerGroupSpecs[0].minReplicas: must be <= maxReplicas (3 > 1)"
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "InvalidRayClusterSpec")]
    again = with_status(body, conditions=[stored("SpecValid", "False", plan.invalid)])
    assert _plan(again, []).events == []


def test_the_stored_status_is_read_typed_whatever_its_autoscaler_part() -> None:
    """The controller reads the status keys it owns: an `autoscaler` part it cannot read (a newer
    autoscaler's) leaves the conditions read; a status the CRD would refuse is read as empty."""
    resumed = cluster(group(replicas=1))
    newer = {"unmetDemand": [{"kind": "future", "count": 1}]}
    suspended = with_status(resumed, conditions=[stored("RayClusterSuspended")], autoscaler=newer)
    assert _summary(_plan(suspended, [])) == []  # Suspended=True: flipped first, nothing created
    snapshot = ClusterSnapshot(suspended, [], [])
    assert "autoscaler" not in snapshot.stored_status
    refused = with_status(resumed, conditions=[{"type": "RayClusterSuspended", "status": "True"}])
    assert ClusterSnapshot(refused, [], []).stored_status == {}
    assert _summary(_plan(refused, [])) == [("", 1, 0), ("small", 1, 0)]


def test_managed_by_other_controller_is_skipped() -> None:
    assert _plan(cluster(group(), managedBy="kueue.x-k8s.io/multikueue"), []).skip


def test_suspend_flow() -> None:
    pods = [pod("h", "headgroup"), pod("a")]
    body = cluster(group(replicas=1), suspend=True)
    assert _summary(_plan(body, pods)) == []  # waits for the Suspending condition
    suspending = with_status(body, conditions=[stored("RayClusterSuspending")])
    assert _summary(_plan(suspending, pods)) == [("*", 0, 2)]
    resumed = with_status(cluster(group(replicas=1)), conditions=[stored("RayClusterSuspended")])
    assert _summary(_plan(resumed, [])) == []  # status flips Suspended=False first
    assert _summary(_plan(cluster(group(replicas=1)), [])) == [("", 1, 0), ("small", 1, 0)]


def test_unhealthy_head_is_deleted_and_workers_wait() -> None:
    plan = _plan(cluster(group(replicas=2)), [pod("h", "headgroup", phase="Failed")])
    assert _summary(plan) == [("", 0, 1)]


def test_two_heads_is_an_error() -> None:
    plan = _plan(cluster(group(replicas=0)), [pod("h1", "headgroup"), pod("h2", "headgroup")])
    assert plan.error is not None
    assert plan.steps == []


def test_stuck_terminating_pod_is_not_counted() -> None:
    clock_now = 1767225600.0 + 3600  # an hour after the pod's deletion deadline
    exp = ScaleExpectations(clock=lambda: clock_now)
    stuck = pod("a", index=0, deleting="2026-01-01T00:00:00Z")
    plan = _plan(cluster(group(replicas=1)), [pod("h", "headgroup"), stuck], exp=exp)
    assert _summary(plan) == [("small", 1, 0)]
    assert plan.steps[0].creates[0].manifest["metadata"]["labels"]["ray.io/worker-group-replica-index"] == "0"


def _head_built_from(body: dict[str, Any], **annotations: str) -> dict[str, Any]:
    """The head pod as rayscale built it from `body`, with its annotations (overridable)."""
    from rayscale.cluster.meta import ClusterMeta
    from rayscale.cluster.validation import parse_and_validate
    from rayscale.controller import pods as podspec

    spec = parse_and_validate(ClusterMeta.from_body(body), body["spec"])
    built = podspec.head_pod(ClusterMeta.from_body(body), spec)  # type: ignore[arg-type]
    head = pod("h", "headgroup")
    head["metadata"]["annotations"] = {**built["metadata"]["annotations"], **annotations}
    return head


def test_recreate_upgrade_strategy_deletes_every_pod_when_the_spec_changed() -> None:
    body = cluster(group(replicas=1), upgradeStrategy={"type": "Recreate"})
    head = _head_built_from(body)
    pods = [head, pod("a")]
    assert _summary(_plan(body, pods)) == []  # unchanged
    scaled = cluster(group(replicas=3, max_replicas=20), upgradeStrategy={"type": "Recreate"})
    assert _summary(_plan(scaled, pods)) == [("small", 2, 0)]  # replicas and bounds do not count
    changed = cluster(group(replicas=1), upgradeStrategy={"type": "Recreate"})
    changed["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.56.0"
    plan = _plan(changed, pods)
    assert _summary(plan) == [("*", 0, 2)]
    assert {d.why for d in plan.steps[0].deletes} == {"upgrade"}
    assert [(e.reason, e.message) for e in plan.events] == [
        (
            "DeletedPod",
            "Deleted all Pods for RayCluster ns/rc due to spec change with Recreate upgradeStrategy",
        )
    ]
    # Without Recreate, or for a head another operator built, nothing is deleted.
    changed["spec"]["upgradeStrategy"] = {"type": "None"}
    assert _summary(_plan(changed, pods)) == []
    changed["spec"]["upgradeStrategy"] = {"type": "Recreate"}
    foreign = _head_built_from(body, **{"ray.io/kuberay-version": "v1.6.2"})
    assert _summary(_plan(changed, [foreign, pod("a")])) == []


def test_an_unforeseen_planning_error_is_an_invalid_spec_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a spec makes planning raise ends in SpecValid=False with the error, and one
    Warning Event, never in an exception (which the queue would retry every few seconds)."""

    def broken(*_: Any, **__: Any) -> Any:
        raise KeyError("containers")

    monkeypatch.setattr(podspec, "head_pod", broken)
    body = cluster(group())
    plan, spec = plan_cluster(ClusterSnapshot(body, [], []), ScaleExpectations())
    message = "spec: cannot be reconciled (KeyError: 'containers')"
    assert isinstance(spec, Invalid)
    assert (spec.reason, spec.message) == ("InvalidRayClusterSpec", message)
    assert (plan.invalid, plan.steps, plan.services) == (message, [], [])
    assert [(e.type, e.reason, e.message) for e in plan.events] == [
        ("Warning", "InvalidRayClusterSpec", message)
    ]
    again = with_status(body, conditions=[stored("SpecValid", "False", message)])
    assert plan_cluster(ClusterSnapshot(again, [], []), ScaleExpectations())[0].events == []


def test_one_reconcile_creates_at_most_its_budget_of_worker_pods() -> None:
    body = cluster(group("a", replicas=400, max_replicas=1000), group("b", replicas=300, max_replicas=1000),
                   group("c", replicas=5, max_replicas=10, hosts=4))  # fmt: skip
    unwindowed = PlannerOptions(scheduler_window=0)
    head = [pod("h", "headgroup")]
    plan, _ = plan_cluster(ClusterSnapshot(body, head, []), ScaleExpectations(), unwindowed)
    assert _summary(plan) == [("a", 400, 0), ("b", 100, 0)]  # 500 in all; c waits
    assert plan.requeue_after is not None
    options = PlannerOptions(max_creates=3)
    plan, _ = plan_cluster(ClusterSnapshot(body, [pod("h", "headgroup")], []), ScaleExpectations(), options)
    assert _summary(plan) == [("a", 3, 0)]
    # a multi-host group with any room left gets one whole replica
    body = cluster(group("c", replicas=5, max_replicas=10, hosts=4))
    plan, _ = plan_cluster(ClusterSnapshot(body, [pod("h", "headgroup")], []), ScaleExpectations(), options)
    assert _summary(plan) == [("c", 4, 0)]


def test_a_cluster_over_the_pod_limit_builds_no_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*_: Any, **__: Any) -> Any:
        raise AssertionError("a pod was built for a cluster over the limit")

    monkeypatch.setattr(podspec, "worker_pod", never)
    monkeypatch.setattr(podspec, "head_pod", never)
    body = cluster(group(replicas=100_000, max_replicas=2**31 - 1))
    plan = _plan(body, [], services=[])
    assert plan.invalid is not None
    assert plan.invalid.startswith(
        "spec.workerGroupSpecs[0].replicas: 100000 replicas x 1 hosts = 100000 pods"
    )
    assert (plan.steps, plan.services) == ([], [])
    monkeypatch.undo()  # under a higher limit the same cluster plans, a budget at a time
    options = PlannerOptions(max_pods=100_000, max_creates=10)
    plan, _ = plan_cluster(ClusterSnapshot(body, [pod("h", "headgroup")], []), ScaleExpectations(), options)
    assert _summary(plan) == [("small", 10, 0)]


def _awaiting(name: str, group_name: str) -> dict[str, Any]:
    """A pod created and not yet looked at by the kube-scheduler: Pending, no PodScheduled."""
    p = pod(name, group_name, phase="Pending", ready=False)
    p["status"]["conditions"] = []
    return p


def _unschedulable(name: str, group_name: str) -> dict[str, Any]:
    p = _awaiting(name, group_name)
    p["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    return p


def test_a_cluster_keeps_at_most_a_window_of_pods_before_the_kube_scheduler() -> None:
    body = cluster(group("a", replicas=400, max_replicas=1000), group("b", replicas=300, max_replicas=1000))
    head = pod("h", "headgroup")
    options = PlannerOptions(scheduler_window=32)

    def summary(pods: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
        plan, _ = plan_cluster(ClusterSnapshot(body, [head, *pods], []), ScaleExpectations(), options)
        if plan.steps:
            assert plan.requeue_after is not None  # the rest follow in a later reconcile
        return _summary(plan)

    assert summary([]) == [("a", 32, 0)]  # an empty window: 32, the first group first
    waiting = [_awaiting(f"a-{i}", "a") for i in range(20)]
    assert summary(waiting) == [("a", 12, 0)]  # 20 of a's pods still wait for the scheduler
    assert summary([_awaiting(f"a-{i}", "a") for i in range(32)]) == []
    # Pods the scheduler placed, or looked at and could not place (a node to come from the cluster
    # autoscaler), are out of the window: a scale-up waiting for nodes still shows all its pods.
    placed = [_awaiting(f"a-{i}", "a") for i in range(200)]
    for p in placed:
        p["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    unplaceable = [_unschedulable(f"a-{200 + i}", "a") for i in range(150)]
    assert summary(placed + unplaceable) == [("a", 32, 0)]


def test_a_group_another_scheduler_places_has_no_window() -> None:
    gang = group("g", replicas=100, max_replicas=100)
    gang["template"]["spec"]["schedulerName"] = "volcano"
    body = cluster(group("a", replicas=100, max_replicas=100), gang)
    waiting = [_awaiting(f"a-{i}", "a") for i in range(32)]
    plan, _ = plan_cluster(ClusterSnapshot(body, [pod("h", "headgroup"), *waiting], []), ScaleExpectations())
    assert _summary(plan) == [("g", 100, 0)]  # a waits for the kube-scheduler; g is not its to pace
