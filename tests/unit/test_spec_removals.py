"""A worker group removed from the spec, or a lowered maxReplicas: the pure parts. Which pods leave
(a removed group's workers, multi-host replicas whole; the busy surplus above maxReplicas), since
when and until what deadline (rayscale.io/removal-drain-seconds, its 0 and its refused values),
their notices' texts, the plan's drains and deletes, and the condition of a refused value; then
the controller's own deletes for a cluster rayscale does not autoscale."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.support.builders import cluster, group, pod
from tests.support.fakes import gcs_state

from rayscale.api.disruption_annotations import REMOVAL_DRAIN_ANNOTATION, removal_drain_seconds
from rayscale.autoscaler.disruptions import disruption_condition, plan_round
from rayscale.autoscaler.scheduling.model import (
    Decision,
    Group,
    GroupDecision,
    Node,
    NodeState,
    Removal,
    RemovalCause,
    Snapshot,
)
from rayscale.autoscaler.spec_removals import (
    CONDITION,
    GROUP_REMOVED,
    MAX_REPLICAS,
    Leaving,
    busy_surplus,
    direct_deletes,
    leaving,
    merged,
    notices,
    removal_condition,
    without_drains,
)
from rayscale.cluster.removed_groups import removed_group_pods
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.plan import DeleteWhy, Plan
from rayscale.controller.reconcile import PlannerOptions, plan_cluster
from rayscale.controller.snapshot import ClusterSnapshot
from rayscale.disruption.plan import EVENT_DELETE, EVENT_DRAIN, RayNode
from rayscale.ray import model as ray

NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)
LATER = NOW + timedelta(seconds=30)
GROUPS = (Group("cpu", {"CPU": 1.0}),)


def test_removed_groups_pods_are_the_workers_of_groups_the_spec_lacks() -> None:
    pods = [
        pod("head", "headgroup"),
        pod("cpu-1", "cpu"),
        pod("gpu-2", "gpu"),
        pod("gpu-1", "gpu"),
        pod("gpu-going", "gpu", deleting="2026-01-01T00:00:00Z"),
        pod("tpu-a-0", "tpu", replica="tpu-a", host=0),
    ]
    assert removed_group_pods(pods, {"cpu"}) == {"gpu": ["gpu-1", "gpu-2"], "tpu": ["tpu-a-0"]}
    assert removed_group_pods(pods, {"cpu", "gpu", "tpu"}) == {}


def test_a_removed_groups_pod_leaves_from_when_first_seen() -> None:
    pods = [pod("cpu-1", "cpu"), pod("gpu-1", "gpu")]
    first = leaving(pods, {"cpu"}, {}, NOW)
    assert first == {
        "gpu-1": Leaving(
            GROUP_REMOVED, "gpu", NOW, "Worker group gpu was removed from the RayCluster's spec."
        )
    }
    assert leaving(pods, {"cpu"}, first, LATER) == first  # the moment does not move
    # a remembered pod stays leaving until it is gone (a drain for preemption cannot be undone)
    surplus = {"cpu-1": Leaving(MAX_REPLICAS, "cpu", NOW, "m")}
    assert leaving(pods, {"cpu", "gpu"}, {**first, **surplus}, LATER) == {**first, **surplus}
    going = [pod("cpu-1", "cpu", deleting="2026-01-01T00:00:00Z")]
    assert leaving(going, {"cpu"}, surplus, LATER) == {}


def test_the_deadline_counts_from_the_first_sighting_and_0_drains_nothing() -> None:
    why = {
        "gpu-1": Leaving(
            GROUP_REMOVED, "gpu", NOW, "Worker group gpu was removed from the RayCluster's spec."
        )
    }
    (unset,) = notices(why, None).values()
    assert (unset.source, unset.deadline, unset.hard) == (GROUP_REMOVED, None, False)
    (twenty,) = notices(why, 20).values()
    assert twenty.deadline == NOW + timedelta(seconds=20)
    (zero,) = notices(why, 0).values()
    assert zero.deadline == NOW
    assert zero.message.endswith(f"{REMOVAL_DRAIN_ANNOTATION} is 0: deleted at once, without a drain.")


@pytest.mark.parametrize(
    ("value", "seconds", "refused"),
    [(None, None, False), ("20", 20, False), ("0", 0, False), (" 7 ", 7, False),
     ("-5", None, True), ("1.5", None, True), ("soon", None, True), ("", None, True), ("٣", None, True)],
)  # fmt: skip
def test_the_annotation_takes_whole_seconds_and_reads_anything_else_as_unset(
    value: str | None, seconds: int | None, refused: bool
) -> None:
    annotations = {} if value is None else {REMOVAL_DRAIN_ANNOTATION: value}
    got, problem = removal_drain_seconds(annotations)
    assert got == seconds
    assert (problem is not None) == refused
    if problem is not None:
        assert REMOVAL_DRAIN_ANNOTATION in problem
        assert repr(value) in problem
        assert "read as unset" in problem


def _ray(busy: bool) -> RayNode:
    return RayNode("id", idle=not busy, draining=False)


def test_a_removed_groups_busy_worker_drains_for_preemption_then_goes_once_idle() -> None:
    pods = [pod("cpu-1", "cpu"), pod("gpu-1", "gpu")]
    own = notices(leaving(pods, {"cpu"}, {}, NOW), None)
    busy = plan_round(GROUPS, pods, None, {}, {}, NOW, own=own)
    assert busy.drains == ()
    assert [w.pod for w in busy.waiting] == ["gpu-1"]  # without Ray: waits

    def state(status: ray.NodeStatus, used: float) -> ray.ClusterState:
        return gcs_state(ray.RayNodeState("id-g", status, instance_id="gpu-1", total_resources={"CPU": 1.0},
                                          available_resources={"CPU": 1.0 - used}))  # fmt: skip

    asking = plan_round(GROUPS, pods, state(ray.NodeStatus.RUNNING, 1.0), {}, {}, NOW, own=own)
    (drain,) = asking.drains
    assert (drain.pod, drain.reason, drain.deadline) == ("gpu-1", "PREEMPTION", None)
    assert "Worker group gpu was removed" in drain.message
    assert [e.reason for e in asking.events] == [EVENT_DRAIN]
    found = disruption_condition(asking, NOW, None)
    assert found is not None
    assert "gpu-1 (group-removed, no deadline)" in found["message"]
    idle = plan_round(GROUPS, pods, state(ray.NodeStatus.DRAINING, 0.0), {}, {}, NOW, own=own)
    assert direct_deletes(idle, {"cpu"}) == ("gpu-1",)
    (deleted,) = [e for e in idle.events if e.reason == EVENT_DELETE]
    assert "its Ray node is idle after draining. Worker group gpu was removed" in deleted.message
    # 0: deleted at once, and no drain asked
    zero = plan_round(GROUPS, pods, state(ray.NodeStatus.RUNNING, 1.0), {}, {}, NOW,
                      own=notices(leaving(pods, {"cpu"}, {}, NOW), 0))  # fmt: skip
    quiet = without_drains(zero, {"gpu-1"})
    assert quiet.drains == ()
    assert direct_deletes(quiet, {"cpu"}) == ("gpu-1",)
    assert "without a drain" in quiet.events[-1].message
    assert without_drains(quiet, {"gpu-1"}) is quiet


def test_a_removed_multi_host_replica_goes_whole() -> None:
    hosts = [pod("tpu-a-0", "tpu", replica="tpu-a", host=0), pod("tpu-a-1", "tpu", replica="tpu-a", host=1)]
    own = notices(leaving(hosts, {"cpu"}, {}, NOW), 20)
    overdue = plan_round(GROUPS, hosts, None, {}, {}, NOW + timedelta(seconds=20), own=own)
    assert direct_deletes(overdue, {"cpu"}) == ("tpu-a-0", "tpu-a-1")
    (event,) = overdue.events
    assert "replica tpu-a of worker group tpu (pods tpu-a-0, tpu-a-1)" in event.message
    assert "the notice's deadline passed" in event.message


def _snapshot(*nodes: Node) -> Snapshot:
    return Snapshot(groups=(Group("cpu", {"CPU": 1.0}, max_replicas=1),), nodes=nodes)


def _decision(*removals: Removal) -> Decision:
    return Decision(
        {"cpu": GroupDecision(current=3, replicas=1, launch=0, terminate=len(removals))}, removals, (), ()
    )


def test_only_the_busy_surplus_above_max_replicas_leaves() -> None:
    snap = _snapshot(
        Node("w-busy", "cpu"), Node("w-idle", "cpu"), Node("w-pending", "cpu", state=NodeState.PENDING)
    )
    decision = _decision(
        Removal("w-busy", "cpu", RemovalCause.MAX_REPLICAS),
        Removal("w-idle", "cpu", RemovalCause.MAX_REPLICAS),
        Removal("w-pending", "cpu", RemovalCause.MAX_REPLICAS),
    )
    ray = {"w-busy": _ray(True), "w-idle": _ray(False)}
    chosen = busy_surplus(decision, snap, ray, True, {"cpu": 1}, NOW)
    assert chosen == {
        "w-busy": Leaving(
            MAX_REPLICAS, "cpu", NOW, "Worker group cpu has more replicas than its maxReplicas (1) allows."
        )
    }
    # without Ray's state a running host may be busy: it leaves rather than be deleted at once
    unknown = busy_surplus(decision, snap, {}, False, {"cpu": 1}, NOW)
    assert sorted(unknown) == ["w-busy", "w-idle"]
    idle_cut = _decision(Removal("w-busy", "cpu", RemovalCause.IDLE))
    assert busy_surplus(idle_cut, snap, ray, True, {"cpu": 1}, NOW) == {}


def test_a_surplus_replica_with_one_busy_host_leaves_whole() -> None:
    snap = _snapshot(Node("a-0", "cpu", replica="a"), Node("a-1", "cpu", replica="a"))
    decision = _decision(
        Removal("a-0", "cpu", RemovalCause.MAX_REPLICAS, replica="a"),
        Removal("a-1", "cpu", RemovalCause.MAX_REPLICAS, replica="a"),
    )
    chosen = busy_surplus(decision, snap, {"a-0": _ray(False), "a-1": _ray(True)}, True, {"cpu": 1}, NOW)
    assert sorted(chosen) == ["a-0", "a-1"]


def test_two_plans_of_a_round_merge() -> None:
    pods = [pod("gpu-1", "gpu"), pod("cpu-1", "cpu")]
    first = plan_round(
        GROUPS, pods[:1], None, {}, {}, NOW, own=notices(leaving(pods[:1], {"cpu"}, {}, NOW), None)
    )
    second = plan_round(GROUPS, pods[1:], None, {}, {}, NOW,
                        own=notices({"cpu-1": Leaving(MAX_REPLICAS, "cpu", NOW, "m")}, None))  # fmt: skip
    both = merged(first, second)
    assert [w.pod for w in both.waiting] == ["gpu-1", "cpu-1"]
    assert both.replacements == {"gpu": 1, "cpu": 1}


def test_a_refused_value_is_a_condition_keeping_its_time() -> None:
    _, problem = removal_drain_seconds({REMOVAL_DRAIN_ANNOTATION: "-1"})
    found = removal_condition(problem, NOW, None)
    assert found is not None
    assert (found["type"], found["status"], found["reason"]) == (CONDITION, "False", "InvalidAnnotation")
    assert removal_condition(problem, LATER, {"conditions": [found]}) == found
    assert removal_condition(None, LATER, {"conditions": [found]}) is None


# ---------------------------------------------------------------------------- the controller


def _controller_plan(body: dict[str, Any], pods: list[dict[str, Any]], **options: Any) -> Plan:
    snapshot = ClusterSnapshot(body, pods, [{"metadata": {"name": "rc-head-svc"}}])
    plan, _ = plan_cluster(snapshot, ScaleExpectations(), PlannerOptions(**options))
    return plan


def _removed(plan: Plan) -> list[tuple[str, list[str]]]:
    return [
        (s.group, [d.name for d in s.deletes])
        for s in plan.steps
        if s.deletes and all(d.why is DeleteWhy.GROUP_REMOVED for d in s.deletes)
    ]


def test_without_rayscales_autoscaler_a_removed_groups_pods_are_deleted_at_once() -> None:
    pods = [pod("h", "headgroup"), pod("cpu-1", "cpu"), pod("gpu-2", "gpu"), pod("gpu-1", "gpu")]
    plan = _controller_plan(cluster(group("cpu", replicas=1)), pods)
    assert _removed(plan) == [("gpu", ["gpu-1", "gpu-2"])]
    (event,) = [e for e in plan.events if e.reason == "WorkerGroupRemoved"]
    assert event.type == "Normal"
    assert (
        "Worker group gpu is no longer in the spec: deleting its pods gpu-1, gpu-2 at once" in event.message
    )
    # Ray's autoscaler in the head (--mode controller) does not drain them either
    sidecar = _controller_plan(
        cluster(group("cpu", replicas=1), autoscaling=True), pods, sidecar_autoscaler=True
    )
    assert _removed(sidecar) == [("gpu", ["gpu-1", "gpu-2"])]


def test_rayscales_autoscaler_drains_them_so_the_controller_leaves_them() -> None:
    pods = [pod("h", "headgroup"), pod("cpu-1", "cpu"), pod("gpu-1", "gpu")]
    plan = _controller_plan(cluster(group("cpu", replicas=1), autoscaling=True), pods)
    assert _removed(plan) == []
    assert [e for e in plan.events if e.reason == "WorkerGroupRemoved"] == []


def test_a_removed_groups_deletes_wait_for_the_watch_to_show_them() -> None:
    pods = [pod("h", "headgroup"), pod("gpu-1", "gpu"), pod("gpu-2", "gpu")]
    exp = ScaleExpectations()
    exp.expect(("ns", "rc", "gpu"), "gpu-1", "delete")
    snapshot = ClusterSnapshot(
        cluster(group("cpu", replicas=0)), pods, [{"metadata": {"name": "rc-head-svc"}}]
    )
    plan, _ = plan_cluster(snapshot, exp)
    assert _removed(plan) == []
    gone = ClusterSnapshot(
        cluster(group("cpu", replicas=0)), [pods[0], pods[2]], [{"metadata": {"name": "rc-head-svc"}}]
    )
    plan, _ = plan_cluster(gone, exp)
    assert _removed(plan) == [("gpu", ["gpu-2"])]


def test_the_annotation_has_its_row_in_the_configuration_reference() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    assert f"| `{REMOVAL_DRAIN_ANNOTATION}: " in doc
