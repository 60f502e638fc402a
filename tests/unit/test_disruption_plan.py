"""The disruption planner: from notices to Ray drains, pod deletions and replacements, one round at a
time; multi-host replicas drained and deleted as a whole; the head only reported."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rayscale.common import labels as L
from rayscale.disruption.notice import Notice
from rayscale.disruption.plan import (
    DRAIN_REASON,
    EVENT_DELETE,
    EVENT_DRAIN,
    EVENT_HEAD,
    SETTLE_SECONDS,
    AskedDrain,
    DeleteWhy,
    DisruptionInput,
    DisruptionPlan,
    Drain,
    RayNode,
    plan_disruptions,
)

NOW = datetime(2026, 11, 29, 7, 0, 0, tzinfo=UTC)
CORDON = Notice("cordon", "Node n1 is cordoned (spec.unschedulable).", None, hard=False)


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def spot(seconds: float, node: str = "n1") -> Notice:
    return Notice("spot", f"Node {node} has an EC2 Spot interruption notice.", at(seconds), hard=True)


def pod(
    name: str,
    node: str,
    *,
    group: str = "cpu",
    head: bool = False,
    replica: str | None = None,
    terminating: bool = False,
) -> dict[str, Any]:
    labels = {L.NODE_TYPE: L.HEAD if head else L.WORKER, L.GROUP: L.HEAD_GROUP if head else group}
    if replica is not None:
        labels[L.REPLICA_NAME] = replica
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if terminating:
        meta["deletionTimestamp"] = "2026-11-29T06:59:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}}


def busy(node_id: str) -> RayNode:
    return RayNode(node_id, idle=False, draining=False)


def plan(
    pods: Sequence[dict[str, Any]],
    *,
    nodes: Mapping[str, Notice] | None = None,
    pod_notices: Mapping[str, Notice] | None = None,
    ray: Mapping[str, RayNode] | None = None,
    asked: Mapping[str, AskedDrain] | None = None,
    now: datetime = NOW,
    hosts: Mapping[str, int] | None = None,
    ray_known: bool = True,
) -> DisruptionPlan:
    return plan_disruptions(
        DisruptionInput(
            pods=pods,
            node_notices=nodes or {},
            pod_notices=pod_notices or {},
            ray_nodes=ray or {},
            asked=asked or {},
            now=now,
            hosts_per_group=hosts or {},
            ray_known=ray_known,
        )
    )


def deleted(result: DisruptionPlan) -> dict[str, DeleteWhy]:
    return {d.pod: d.why for d in result.deletes}


def test_a_cordoned_node_with_a_busy_worker_is_drained_and_waits() -> None:
    result = plan(
        [pod("w1", "n1"), pod("w2", "n2")], nodes={"n1": CORDON}, ray={"w1": busy("a1"), "w2": busy("a2")}
    )

    assert result.drains == (Drain("w1", "a1", "PREEMPTION", CORDON.message, None),)
    assert result.drains[0].deadline_ms == 0
    assert result.deletes == ()
    assert [(w.pod, w.source, w.deadline) for w in result.waiting] == [("w1", "cordon", None)]
    assert result.replacements == {"cpu": 1}
    assert [(e.type, e.reason) for e in result.events] == [("Normal", EVENT_DRAIN)]
    assert "w1" in result.events[0].message
    assert CORDON.message in result.events[0].message


def test_a_drained_worker_whose_ray_node_turns_idle_is_deleted() -> None:
    asked = {"w1": AskedDrain(at(-60), None)}
    still_busy = plan(
        [pod("w1", "n1")], nodes={"n1": CORDON}, ray={"w1": RayNode("a1", False, True)}, asked=asked
    )
    assert (still_busy.drains, still_busy.deletes, still_busy.events) == ((), (), ())
    assert [w.pod for w in still_busy.waiting] == ["w1"]

    idle = plan([pod("w1", "n1")], nodes={"n1": CORDON}, ray={"w1": RayNode("a1", True, True)}, asked=asked)
    assert deleted(idle) == {"w1": DeleteWhy.IDLE}
    assert idle.drains == ()
    assert idle.waiting == ()
    assert idle.replacements == {"cpu": 1}
    assert [e.reason for e in idle.events] == [EVENT_DELETE]


def test_an_idle_worker_is_drained_before_it_is_deleted() -> None:
    first = plan([pod("w1", "n1")], nodes={"n1": CORDON}, ray={"w1": RayNode("a1", True, False)})
    assert [d.pod for d in first.drains] == ["w1"]
    assert first.deletes == ()

    # Ray accepted, and still reports it idle but not draining yet: the accepted drain is enough,
    # once the idle view is SETTLE_SECONDS younger than the drain.
    second = plan(
        [pod("w1", "n1")],
        nodes={"n1": CORDON},
        ray={"w1": RayNode("a1", True, False)},
        asked={"w1": AskedDrain(at(-SETTLE_SECONDS), None)},
    )
    assert second.drains == ()
    assert deleted(second) == {"w1": DeleteWhy.IDLE}


def test_an_idle_view_right_after_the_drain_is_not_trusted() -> None:
    """A task that began a moment before the drain shows in the GCS's view only once its raylet
    reports it: a round 35 ms after the drain was accepted saw the busy node idle (even DRAINING)
    and deleted it (make chaos, Karpenter and spot rows). Within SETTLE_SECONDS the pod waits,
    asked nothing again; after it, an idle node is done."""
    for draining in (False, True):
        for since in (0.035, SETTLE_SECONDS - 0.1):
            early = plan(
                [pod("w1", "n1")],
                nodes={"n1": CORDON},
                ray={"w1": RayNode("a1", True, draining)},
                asked={"w1": AskedDrain(at(-since), None, "a1")},
            )
            assert (early.drains, early.deletes) == ((), ())
            assert [w.pod for w in early.waiting] == ["w1"]
        late = plan(
            [pod("w1", "n1")],
            nodes={"n1": CORDON},
            ray={"w1": RayNode("a1", True, draining)},
            asked={"w1": AskedDrain(at(-SETTLE_SECONDS), None, "a1")},
        )
        assert deleted(late) == {"w1": DeleteWhy.IDLE}
    # A drain that is not rayscale's (Ray says DRAINING, nothing asked): Ray's word is taken.
    theirs = plan([pod("w1", "n1")], nodes={"n1": CORDON}, ray={"w1": RayNode("a1", True, True)})
    assert deleted(theirs) == {"w1": DeleteWhy.IDLE}


def test_a_soft_notice_without_deadline_waits_as_long_as_ray_is_busy() -> None:
    asked = {"w1": AskedDrain(NOW, None)}
    for later in (60, 3600, 86400 * 7):
        result = plan(
            [pod("w1", "n1")],
            nodes={"n1": CORDON},
            ray={"w1": RayNode("a1", False, True)},
            asked=asked,
            now=at(later),
        )
        assert result.deletes == ()
        assert [w.pod for w in result.waiting] == ["w1"]


def test_a_spot_notice_deletes_at_its_deadline_though_busy() -> None:
    notice = spot(120)
    before = plan([pod("w1", "n1")], nodes={"n1": notice}, ray={"w1": busy("a1")})
    assert before.drains == (Drain("w1", "a1", DRAIN_REASON, notice.message, at(120)),)
    assert before.drains[0].deadline_ms == int(at(120).timestamp() * 1000)
    assert before.deletes == ()
    assert [(w.pod, w.deadline) for w in before.waiting] == [("w1", at(120))]

    asked = {"w1": AskedDrain(NOW, at(120))}
    draining = RayNode("a1", idle=False, draining=True)
    almost = plan([pod("w1", "n1")], nodes={"n1": notice}, ray={"w1": draining}, asked=asked, now=at(119))
    assert almost.deletes == ()
    due = plan([pod("w1", "n1")], nodes={"n1": notice}, ray={"w1": draining}, asked=asked, now=at(120))
    assert deleted(due) == {"w1": DeleteWhy.DEADLINE}
    assert due.waiting == ()
    assert due.drains == ()


def test_a_soft_notice_deletes_at_its_deadline_too() -> None:
    karpenter = Notice("karpenter", "Node n1 is being disrupted by Karpenter.", at(300), hard=False)
    asked = {"w1": AskedDrain(NOW, at(300))}
    result = plan(
        [pod("w1", "n1")],
        nodes={"n1": karpenter},
        ray={"w1": RayNode("a1", False, True)},
        asked=asked,
        now=at(301),
    )
    assert deleted(result) == {"w1": DeleteWhy.DEADLINE}


def test_a_past_deadline_drains_and_deletes_in_one_round() -> None:
    result = plan([pod("w1", "n1")], nodes={"n1": spot(-1)}, ray={"w1": busy("a1")})
    assert [d.pod for d in result.drains] == ["w1"]
    assert deleted(result) == {"w1": DeleteWhy.DEADLINE}
    assert [e.reason for e in result.events] == [EVENT_DELETE]


def test_a_worker_without_a_live_ray_node_on_a_disrupted_node_is_deleted_at_once() -> None:
    result = plan([pod("w1", "n1")], nodes={"n1": CORDON})
    assert deleted(result) == {"w1": DeleteWhy.NO_RAY_NODE}
    assert result.drains == ()
    assert result.waiting == ()
    assert result.replacements == {"cpu": 1}


def test_a_pod_notice_disrupts_its_worker() -> None:
    evicted = Notice("pod:EvictionByEvictionAPI", "Pod ns/w1 is evicted.", at(30), hard=True)
    result = plan([pod("w1", "n1"), pod("w2", "n1")], pod_notices={"w1": evicted}, ray={"w1": busy("a1")})
    assert [(d.pod, d.deadline) for d in result.drains] == [("w1", at(30))]
    assert result.deletes == ()
    assert [w.pod for w in result.waiting] == ["w1"]


def test_a_multi_host_replica_with_one_host_on_a_tainted_node_drains_and_deletes_all_hosts() -> None:
    pods = [pod(f"tpu-r1-{i}", f"n{i}", group="tpu", replica="r1") for i in range(4)]
    pods.append(pod("tpu-r2-0", "n9", group="tpu", replica="r2"))
    ray = {p["metadata"]["name"]: busy(f"a-{p['metadata']['name']}") for p in pods}
    nodes = {"n2": spot(120, "n2")}

    first = plan(pods, nodes=nodes, ray=ray, hosts={"tpu": 4})
    r1 = [f"tpu-r1-{i}" for i in range(4)]
    assert [d.pod for d in first.drains] == r1
    assert {d.deadline for d in first.drains} == {at(120)}
    assert first.deletes == ()
    assert [w.pod for w in first.waiting] == r1
    assert first.replacements == {"tpu": 1}
    assert len(first.events) == 1
    assert "replica r1" in first.events[0].message

    asked = {p: AskedDrain(at(-SETTLE_SECONDS), at(120)) for p in r1}
    idle = {p: RayNode(f"a-{p}", idle=True, draining=True) for p in r1}
    # Three hosts idle, one still busy: the replica waits as a whole.
    some = plan(pods, nodes=nodes, ray={**ray, **idle, "tpu-r1-3": RayNode("a3", False, True)}, asked=asked)
    assert some.deletes == ()
    assert [w.pod for w in some.waiting] == r1

    all_idle = plan(pods, nodes=nodes, ray={**ray, **idle}, asked=asked, hosts={"tpu": 4})
    assert deleted(all_idle) == {
        "tpu-r1-0": DeleteWhy.REPLICA,
        "tpu-r1-1": DeleteWhy.REPLICA,
        "tpu-r1-2": DeleteWhy.IDLE,
        "tpu-r1-3": DeleteWhy.REPLICA,
    }
    assert all_idle.replacements == {"tpu": 1}


def test_a_multi_host_replica_goes_whole_at_the_earliest_deadline_of_its_hosts() -> None:
    pods = [pod("g-0", "n0", group="tpu", replica="r1"), pod("g-1", "n1", group="tpu", replica="r1")]
    nodes = {"n0": Notice("karpenter", "Node n0 is being disrupted.", at(600), hard=False), "n1": spot(60)}
    ray = {"g-0": busy("a0"), "g-1": busy("a1")}

    first = plan(pods, nodes=nodes, ray=ray)
    assert {d.deadline for d in first.drains} == {at(60)}
    assert all(w.source == "spot" for w in first.waiting)

    asked = {p: AskedDrain(NOW, at(60)) for p in ray}
    draining = {p: RayNode(n.node_id, False, True) for p, n in ray.items()}
    due = plan(pods, nodes=nodes, ray=draining, asked=asked, now=at(60))
    assert deleted(due) == {"g-0": DeleteWhy.DEADLINE, "g-1": DeleteWhy.DEADLINE}


def test_the_replica_label_of_a_single_host_group_does_not_join_pods() -> None:
    pods = [pod("w1", "n1", replica="r"), pod("w2", "n2", replica="r")]
    result = plan(pods, nodes={"n1": CORDON}, hosts={"cpu": 1})
    assert deleted(result) == {"w1": DeleteWhy.NO_RAY_NODE}
    assert result.replacements == {"cpu": 1}


def test_the_head_on_a_tainted_node_gives_a_head_notice_and_no_delete() -> None:
    notice = spot(30)
    result = plan(
        [pod("head", "n1", head=True), pod("w1", "n2")], nodes={"n1": notice}, ray={"head": busy("h")}
    )
    assert result.head is not None
    assert (result.head.pod, result.head.source, result.head.message, result.head.deadline) == (
        "head",
        "spot",
        notice.message,
        at(30),
    )
    assert (result.drains, result.deletes, result.waiting) == ((), (), ())
    assert result.replacements == {}
    assert [(e.type, e.reason) for e in result.events] == [("Warning", EVENT_HEAD)]

    overdue = plan([pod("head", "n1", head=True)], nodes={"n1": notice}, now=at(3600))
    assert overdue.deletes == ()
    assert overdue.head is not None


def test_repeated_rounds_do_not_ask_the_same_drain_twice() -> None:
    pods, nodes = [pod("w1", "n1")], {"n1": spot(120)}
    first = plan(pods, nodes=nodes, ray={"w1": busy("a1")})
    assert len(first.drains) == 1
    asked = {"w1": AskedDrain(NOW, first.drains[0].deadline)}

    # Ray has not reported the node draining yet: the remembered drain is enough.
    again = plan(pods, nodes=nodes, ray={"w1": busy("a1")}, asked=asked, now=at(5))
    assert again.drains == ()
    assert again.events == ()
    assert [w.pod for w in again.waiting] == ["w1"]


def test_a_drain_is_asked_again_when_a_new_notice_brings_the_deadline_forward() -> None:
    pods, ray = [pod("w1", "n1")], {"w1": busy("a1")}
    asked = {"w1": AskedDrain(NOW, None)}
    assert plan(pods, nodes={"n1": CORDON}, ray=ray, asked=asked).drains == ()
    sooner = plan(pods, nodes={"n1": spot(30)}, ray=ray, asked=asked)
    assert [(d.pod, d.deadline) for d in sooner.drains] == [("w1", at(30))]


def test_a_node_draining_for_another_reason_is_not_asked() -> None:
    result = plan([pod("w1", "n1")], nodes={"n1": CORDON}, ray={"w1": RayNode("a1", False, True)})
    assert result.drains == ()
    assert [w.pod for w in result.waiting] == ["w1"]


def test_a_terminating_pod_is_left_alone() -> None:
    result = plan(
        [pod("w1", "n1", terminating=True)],
        nodes={"n1": spot(-10)},
        pod_notices={"w1": spot(-10)},
        ray={"w1": busy("a1")},
    )
    assert result == DisruptionPlan()


def test_a_terminating_host_is_not_drained_but_its_replica_still_goes_whole() -> None:
    pods = [
        pod("g-0", "n0", group="tpu", replica="r1", terminating=True),
        pod("g-1", "n1", group="tpu", replica="r1"),
    ]
    result = plan(pods, nodes={"n0": CORDON}, ray={"g-0": busy("a0"), "g-1": busy("a1")})
    assert [d.pod for d in result.drains] == ["g-1"]
    assert [w.pod for w in result.waiting] == ["g-1"]
    assert result.replacements == {"tpu": 1}


def test_pods_on_untainted_nodes_are_untouched() -> None:
    pods = [pod("head", "h", head=True), pod("w1", "n1"), pod("w2", "n2", group="gpu")]
    result = plan(pods, nodes={"other": CORDON}, pod_notices={"elsewhere": spot(0)}, ray={"w1": busy("a1")})
    assert result == DisruptionPlan()


def test_now_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        plan([], now=datetime(2026, 11, 29, 7, 0, 0))


def test_without_rays_state_nothing_is_drained_and_a_unit_goes_only_at_its_deadline() -> None:
    pods = [pod("w1", "n1"), pod("w2", "n2")]
    nodes = {"n1": CORDON, "n2": spot(30, "n2")}
    before = plan(pods, nodes=nodes, ray_known=False)
    assert (before.drains, before.deletes) == ((), ())  # no Ray node is taken for "none"
    assert [(w.pod, w.source) for w in before.waiting] == [("w1", "cordon"), ("w2", "spot")]
    assert before.replacements == {"cpu": 2}
    assert before.events == ()

    after = plan(pods, nodes=nodes, ray_known=False, now=at(30))
    assert deleted(after) == {"w2": DeleteWhy.DEADLINE}
    assert [w.pod for w in after.waiting] == ["w1"]  # a cordon has no deadline: it waits for Ray


def test_each_event_names_the_pods_it_is_about() -> None:
    pods = [pod("head", "h", head=True), pod("g-0", "n0", group="tpu", replica="r1"),
            pod("g-1", "n1", group="tpu", replica="r1"), pod("w1", "n2")]  # fmt: skip
    result = plan(
        pods,
        nodes={"h": CORDON, "n0": spot(30, "n0"), "n2": spot(-1, "n2")},
        ray={"g-0": busy("a0"), "g-1": busy("a1"), "w1": busy("a2")},
        hosts={"tpu": 2, "cpu": 1},
    )
    assert [(e.reason, e.pods) for e in result.events] == [
        (EVENT_HEAD, ("head",)),
        (EVENT_DELETE, ("w1",)),  # units by group: cpu, then tpu
        (EVENT_DRAIN, ("g-0", "g-1")),
    ]
