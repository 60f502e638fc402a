"""Worker reconcile planning per group, as table cases."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import cluster, group, pod

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.replicas import expected_replicas
from rayscale.common import labels as L
from rayscale.controller.workers import GroupPlan, plan_group

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"
GONE = "2026-01-01T00:03:00Z"


def _plan(g: dict[str, Any], pods: list[dict[str, Any]], *, autoscaling: bool = False) -> GroupPlan:
    body = cluster(g, autoscaling=autoscaling)
    spec = RayClusterSpec.model_validate(body["spec"])
    names = iter(["aaaaa", "bbbbb", "ccccc"])
    return plan_group(ClusterMeta.from_body(body), spec, spec.workers[0], pods, suffix=lambda: next(names))


def _created_indices(plan: GroupPlan) -> list[str]:
    return [c.manifest["metadata"]["labels"][L.REPLICA_INDEX] for c in plan.creates]


def _deleted(plan: GroupPlan) -> list[tuple[str, str]]:
    return [(d.name, d.why) for d in plan.deletes]


@pytest.mark.parametrize(
    ("replicas", "lo", "hi", "suspend", "expected"),
    [(3, 0, 5, None, 3), (None, 2, 5, None, 2), (9, 0, 5, None, 5), (0, 1, 5, None, 1), (3, 0, 5, True, 0)],
)
def test_expected_replicas(
    replicas: int | None, lo: int, hi: int, suspend: bool | None, expected: int
) -> None:
    g = RayClusterSpec.model_validate(
        cluster(group(replicas=replicas, min_replicas=lo, max_replicas=hi, suspend=suspend))["spec"]
    ).workers[0]
    assert expected_replicas(g) == expected


def test_scale_up_uses_lowest_free_replica_indices() -> None:
    plan = _plan(group(replicas=4), [pod("a", index=0), pod("b", index=2)])
    assert _created_indices(plan) == ["1", "3"]
    assert plan.deletes == []


def test_terminating_pods_count_and_are_not_replaced() -> None:
    plan = _plan(group(replicas=2), [pod("a", index=0), pod("b", index=1, deleting=GONE)])
    assert plan.creates == []
    assert plan.deletes == []


@pytest.mark.parametrize(
    ("pods", "victims"),
    [
        # KubeRay's choice: the first by name, as the API server lists them (not the youngest)
        ([pod("b", created=T0), pod("c", created=T2), pod("a", created=T1)], ["a"]),
        (
            [pod("old", created=T0), pod("young", created=T2), pod("pend", created=T0, phase="Pending")],
            ["pend"],
        ),
        (
            [pod("old", created=T0), pod("unready", created=T0, ready=False), pod("y", created=T2)],
            ["unready"],
        ),
        # an already terminating pod is the surplus: nothing more is deleted (TestRayClusterScalingDown)
        ([pod("a", created=T0), pod("b", created=T2), pod("c", created=T1, deleting=GONE)], []),
    ],
)
def test_scale_down_without_autoscaling(pods: list[dict[str, Any]], victims: list[str]) -> None:
    plan = _plan(group(replicas=2), pods)
    assert [d.name for d in plan.deletes] == victims
    assert all(d.why == "scaleDown" for d in plan.deletes)


def test_no_scale_down_with_autoscaling() -> None:
    plan = _plan(group(replicas=1), [pod("a"), pod("b")], autoscaling=True)
    assert plan.deletes == []
    assert plan.creates == []


def test_workers_to_delete_even_with_replicas_unchanged() -> None:
    g = group(replicas=2, scaleStrategy={"workersToDelete": ["b", "not-there"]})
    plan = _plan(g, [pod("a", index=0), pod("b", index=1)], autoscaling=True)
    assert _deleted(plan) == [("b", "workersToDelete")]
    assert _created_indices(plan) == ["1"]


def test_workers_to_delete_with_replicas_lowered() -> None:
    g = group(replicas=1, scaleStrategy={"workersToDelete": ["a"]})
    plan = _plan(g, [pod("a", index=0), pod("b", index=1)], autoscaling=True)
    assert _deleted(plan) == [("a", "workersToDelete")]
    assert plan.creates == []


def test_unhealthy_pods_deleted_first_and_nothing_created() -> None:
    pods = [
        pod("failed", phase="Failed", index=0),
        pod("dead-never", terminated=True, restart_policy="Never", index=1),
        pod("dead-always", terminated=True, restart_policy="Always", index=2),
    ]
    plan = _plan(group(replicas=5), pods)
    assert _deleted(plan) == [("failed", "unhealthy"), ("dead-never", "unhealthy")]
    assert plan.creates == []
    assert plan.requeue


def test_suspended_group_deletes_its_pods() -> None:
    plan = _plan(group(replicas=2, suspend=True), [pod("a"), pod("b", deleting=GONE)])
    assert _deleted(plan) == [("a", "suspendGroup")]


def _slice(replica: str, index: int, hosts: int = 2, **kw: Any) -> list[dict[str, Any]]:
    return [pod(f"{replica}-{h}", "tpu", index=index, replica=replica, host=h, **kw) for h in range(hosts)]


def test_multi_host_creates_whole_replicas() -> None:
    plan = _plan(group("tpu", replicas=3, hosts=2), _slice("tpu-x", 1))
    labels = [c.manifest["metadata"]["labels"] for c in plan.creates]
    assert [(x[L.REPLICA_NAME], x[L.REPLICA_INDEX], x[L.HOST_INDEX]) for x in labels] == [
        ("tpu-aaaaa", "0", "0"), ("tpu-aaaaa", "0", "1"), ("tpu-bbbbb", "2", "0"), ("tpu-bbbbb", "2", "1")
    ]  # fmt: skip


def test_multi_host_incomplete_replica_deleted_whole() -> None:
    pods = _slice("tpu-x", 0) + _slice("tpu-y", 1)[:1]
    plan = _plan(group("tpu", replicas=2, hosts=2), pods)
    assert _deleted(plan) == [("tpu-y-0", "incompleteReplica")]
    assert plan.creates == []
    assert plan.requeue


def test_multi_host_waits_while_incomplete_replica_terminates() -> None:
    pods = _slice("tpu-x", 0) + _slice("tpu-y", 1, deleting=GONE)[:1]
    plan = _plan(group("tpu", replicas=2, hosts=2), pods)
    assert plan.deletes == []
    assert plan.creates == []
    assert plan.requeue


def test_multi_host_workers_to_delete_expands_to_replica() -> None:
    g = group("tpu", replicas=2, hosts=2, scaleStrategy={"workersToDelete": ["tpu-y-1"]})
    plan = _plan(g, _slice("tpu-x", 0) + _slice("tpu-y", 1), autoscaling=True)
    assert _deleted(plan) == [("tpu-y-0", "workersToDelete"), ("tpu-y-1", "workersToDelete")]
    assert plan.creates == []


def test_multi_host_unhealthy_host_deletes_replica() -> None:
    pods = _slice("tpu-x", 0)
    pods[1]["status"]["phase"] = "Failed"
    plan = _plan(group("tpu", replicas=1, hosts=2), pods)
    assert {d.name for d in plan.deletes} == {"tpu-x-0", "tpu-x-1"}


def test_multi_host_scale_down_removes_the_first_replica_by_name() -> None:
    pods = _slice("tpu-y", 0, created=T0) + _slice("tpu-x", 1, created=T2) + _slice("tpu-z", 2, created=T1)
    plan = _plan(group("tpu", replicas=2, hosts=2), pods)
    assert {d.name for d in plan.deletes} == {"tpu-x-0", "tpu-x-1"}


def _unlabelled(*names: str, created: str = T0) -> list[dict[str, Any]]:
    """Multi-host pods as KubeRay makes them without RayMultiHostIndexing: no replica labels."""
    return [pod(n, "tpu", created=created) for n in names]


def test_multi_host_adopts_pods_without_replica_labels() -> None:
    # one replica of 2 hosts made by KubeRay without RayMultiHostIndexing: nothing to do
    plan = _plan(group("tpu", replicas=1, hosts=2), _unlabelled("k-0", "k-1"))
    assert plan == GroupPlan()
    # an odd count is never completed nor deleted: ceil(3 / 2) replicas
    plan = _plan(group("tpu", replicas=2, hosts=2), _unlabelled("k-0", "k-1", "k-2"))
    assert plan == GroupPlan()


def test_multi_host_scale_up_beside_unlabelled_pods_creates_one_labelled_replica() -> None:
    pods = _unlabelled("k-0", "k-1") + _slice("tpu-x", 1)
    plan = _plan(group("tpu", replicas=3, hosts=2), pods)
    assert plan.deletes == []
    assert _created_indices(plan) == ["0", "0"]
    assert {c.manifest["metadata"]["labels"][L.REPLICA_NAME] for c in plan.creates} == {"tpu-aaaaa"}


def test_multi_host_workers_to_delete_of_unlabelled_pod_deletes_exactly_it() -> None:
    g = group("tpu", replicas=1, hosts=2, scaleStrategy={"workersToDelete": ["k-2"]})
    plan = _plan(g, _unlabelled("k-0", "k-1", "k-2", "k-3"), autoscaling=True)
    assert _deleted(plan) == [("k-2", "workersToDelete")]
    assert plan.creates == []
    assert plan.requeue


def test_multi_host_unhealthy_unlabelled_pod_deleted_alone() -> None:
    pods = _unlabelled("k-0", "k-1")
    pods[0]["status"]["phase"] = "Failed"
    plan = _plan(group("tpu", replicas=1, hosts=2), pods)
    assert _deleted(plan) == [("k-0", "unhealthy")]


def test_multi_host_scale_down_removes_unlabelled_pods_by_hosts() -> None:
    pods = _slice("tpu-x", 0, created=T0) + _unlabelled("k-0", "k-1", created=T1)
    pods += _unlabelled("k-2", "k-3", created=T2)
    plan = _plan(group("tpu", replicas=2, hosts=2), pods)
    assert {d.name for d in plan.deletes} == {"k-0", "k-1"}  # the first by name
    assert all(d.why == "scaleDown" for d in plan.deletes)
    assert _plan(group("tpu", replicas=2, hosts=2), pods, autoscaling=True).deletes == []


def test_multi_host_scale_down_removes_an_incomplete_unlabelled_remainder_first() -> None:
    pods = _unlabelled("k-0", created=T0) + _slice("tpu-x", 1, created=T2)
    plan = _plan(group("tpu", replicas=1, hosts=2), pods)
    assert _deleted(plan) == [("k-0", "scaleDown")]
