"""A Ray node that started again in a leaving pod is asked to drain in its turn
(rayscale.disruption.plan): a drain is remembered with the Ray node that accepted it
(`AskedDrain.node_id`). Ray stops a drained Ray node once it is idle; in a pod that stays (a host
of a multi-host replica whose other host still works, or any pod while the autoscaler holds
removals) the container's ``ray start`` exits and the kubelet starts it again: a new Ray node under
the same pod, neither draining nor asked to drain, to which Ray would give new work while the
replica is leaving. The e2e Ray bridge restarts a worker the same way
(tests/integration/test_tpu_host_disruption_ray.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from rayscale.common import labels as L
from rayscale.disruption.notice import Notice
from rayscale.disruption.plan import (
    SETTLE_SECONDS,
    AskedDrain,
    DisruptionInput,
    DisruptionPlan,
    RayNode,
    plan_disruptions,
)

NOW = datetime(2026, 11, 29, 7, 0, 0, tzinfo=UTC)
SETTLED = NOW - timedelta(seconds=SETTLE_SECONDS)  # the drains were accepted long enough ago
CORDON = Notice("cordon", "Node n0 is cordoned (spec.unschedulable).", None, hard=False)


def host(name: str, node: str, index: int) -> dict[str, Any]:
    labels = {L.NODE_TYPE: L.WORKER, L.GROUP: "tpu", L.REPLICA_NAME: "r1", L.HOST_INDEX: str(index)}
    return {"metadata": {"name": name, "labels": labels}, "spec": {"nodeName": node}}


def replica_plan(ray: dict[str, RayNode], asked: dict[str, AskedDrain]) -> DisruptionPlan:
    """The plan of the 2-host replica r1, the node of its host r1-0 cordoned."""
    pods = [host("r1-0", "n0", 0), host("r1-1", "n1", 1)]
    return plan_disruptions(
        DisruptionInput(
            pods=pods,
            node_notices={"n0": CORDON},
            pod_notices={},
            ray_nodes=ray,
            asked=asked,
            now=NOW,
            hosts_per_group={"tpu": 2},
        )
    )


def test_a_new_ray_node_in_a_leaving_host_is_asked_to_drain() -> None:
    asked = {"r1-0": AskedDrain(NOW, None, "before"), "r1-1": AskedDrain(NOW, None, "busy")}  # accepted
    ray = {
        "r1-0": RayNode(
            "again", idle=True, draining=False
        ),  # Ray stopped the drained idle node; it came back
        "r1-1": RayNode("busy", idle=False, draining=True),  # the other host still works
    }
    result = replica_plan(ray, asked)
    assert result.deletes == ()  # the replica waits for its busy host, whole
    assert [(d.pod, d.node_id) for d in result.drains] == [("r1-0", "again")]


def test_the_node_that_accepted_is_not_asked_again_nor_waited_for_once_idle() -> None:
    """The same Ray node, idle after the drain it accepted (Ray may still say RUNNING/IDLE): done,
    no second drain; a drain remembered without its node (from before the node was kept) counts for
    whatever node the pod has."""
    ray = {"r1-0": RayNode("a", idle=True, draining=False), "r1-1": RayNode("b", idle=True, draining=False)}
    for asked in (
        {"r1-0": AskedDrain(SETTLED, None, "a"), "r1-1": AskedDrain(SETTLED, None, "b")},
        {"r1-0": AskedDrain(SETTLED, None), "r1-1": AskedDrain(SETTLED, None)},
    ):
        result = replica_plan(ray, asked)
        assert result.drains == ()
        assert sorted(d.pod for d in result.deletes) == ["r1-0", "r1-1"]  # the whole replica
