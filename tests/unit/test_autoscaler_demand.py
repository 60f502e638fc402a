"""Ray's demand, its head and the RayResourceRequests as scheduler inputs: nothing Ray's own
scheduler would use is dropped (fallback selectors, per-bundle selectors of placement groups,
request_resources selectors, the head), and each RayResourceRequest is a unit of its own."""

from __future__ import annotations

from typing import Any

from rayscale.autoscaler.demand import (
    gcs_constraints,
    gcs_demands,
    gcs_gangs,
    head_node,
    request_constraints,
)
from rayscale.autoscaler.scheduling.model import (
    RAY_REQUEST_UNIT,
    Constraint,
    Demand,
    Gang,
    Head,
    LabelConstraint,
    LabelOp,
    Strategy,
)
from rayscale.cluster.meta import ClusterMeta
from rayscale.ray import model as ray

IN, NOT_IN, UNSPECIFIED = ray.LabelOperator.IN, ray.LabelOperator.NOT_IN, ray.LabelOperator.UNSPECIFIED
A100 = ray.LabelSelector((ray.GcsLabelConstraint("accelerator", IN, ("A100",)),))
H100 = ray.LabelSelector((ray.GcsLabelConstraint("accelerator", IN, ("H100",)),))
NOT_SPOT = ray.LabelSelector((ray.GcsLabelConstraint("market", NOT_IN, ("spot",)),))
ANY = ray.LabelSelector()


def state(**fields: Any) -> ray.ClusterState:
    return ray.ClusterState(version=1, session_name="session_x", nodes=fields.pop("nodes", ()), **fields)


def tasks(*demands: tuple[ray.ResourceRequest, int]) -> ray.ClusterState:
    return state(pending_requests=tuple(ray.ResourceDemand(r, n) for r, n in demands))


def task(*selectors: ray.LabelSelector, cpu: float = 1.0) -> ray.ResourceRequest:
    return ray.ResourceRequest({"CPU": cpu}, label_selectors=selectors)


def c(key: str, op: LabelOp, *values: str) -> LabelConstraint:
    return LabelConstraint(key, op, values)


# ----------------------------------------------------------------------------- tasks and actors


def test_fallback_selectors_are_kept_in_order() -> None:
    demands = gcs_demands(tasks((task(A100, H100, NOT_SPOT), 3)))
    assert demands == (
        Demand(
            {"CPU": 1.0},
            3,
            label_selector=(c("accelerator", LabelOp.IN, "A100"),),
            fallbacks=((c("accelerator", LabelOp.IN, "H100"),), (c("market", LabelOp.NOT_IN, "spot"),)),
        ),
    )


def test_an_operator_ray_fails_matches_no_host() -> None:
    # Ray's scheduler fails a constraint that is neither IN nor NOT_IN on every node; dropping it
    # would let the task go anywhere instead.
    odd = ray.LabelSelector((ray.GcsLabelConstraint("zone", UNSPECIFIED, ("a",)),))
    (demand,) = gcs_demands(tasks((task(odd, H100), 1)))
    assert demand.label_selector == (c("zone", LabelOp.IN),)
    for labels in ({}, {"zone": "a"}, {"zone": "b"}):
        assert not all(k.matches(labels) for k in demand.label_selector)
    assert demand.fallbacks == ((c("accelerator", LabelOp.IN, "H100"),),)


def test_selectors_after_one_that_matches_any_host_are_never_needed() -> None:
    assert gcs_demands(tasks((task(A100, ANY, H100), 1)))[0].selectors == (
        (c("accelerator", LabelOp.IN, "A100"),),
        (),
    )
    (anywhere,) = gcs_demands(tasks((task(ANY, H100), 1)))
    assert (anywhere.label_selector, anywhere.fallbacks) == ((), ())


def test_identical_demands_are_counted_together() -> None:
    # An empty first selector means "any host": the same demand as one without selectors.
    demands = gcs_demands(tasks((task(), 2), (task(A100), 1), (task(ANY, H100), 4), (task(cpu=2.0), 0)))
    assert demands == (
        Demand({"CPU": 1.0}, 6),
        Demand({"CPU": 1.0}, 1, (c("accelerator", LabelOp.IN, "A100"),)),
    )


# ----------------------------------------------------------------------------- placement groups


def bundle(gpus: float, *selectors: ray.LabelSelector) -> ray.ResourceRequest:
    return ray.ResourceRequest({"GPU": gpus}, label_selectors=selectors)


def pg(*bundles: ray.ResourceRequest, strategy: str = "STRICT_SPREAD") -> ray.GangRequest:
    return ray.GangRequest(bundles=bundles, strategy=strategy)


def test_placement_group_bundles_keep_their_label_selectors() -> None:
    gangs = gcs_gangs(state(pending_gangs=(pg(bundle(1, A100, H100), bundle(1), bundle(2, NOT_SPOT)),)))
    assert gangs == (
        Gang(
            Strategy.STRICT_SPREAD,
            ({"GPU": 1.0}, {"GPU": 1.0}, {"GPU": 2.0}),
            1,
            bundle_selectors=(
                (c("accelerator", LabelOp.IN, "A100"),),
                (),
                (c("market", LabelOp.NOT_IN, "spot"),),
            ),
        ),
    )


def test_placement_groups_are_counted_together_only_with_equal_selectors() -> None:
    gangs = gcs_gangs(
        state(
            pending_gangs=(
                pg(bundle(1, A100), bundle(1)),
                pg(bundle(1, H100), bundle(1)),
                pg(bundle(1, A100), bundle(1)),
                pg(bundle(1), bundle(1)),
                pg(bundle(1), bundle(1), strategy="PACK"),
            )
        )
    )
    a100 = ((c("accelerator", LabelOp.IN, "A100"),), ())
    h100 = ((c("accelerator", LabelOp.IN, "H100"),), ())
    two = ({"GPU": 1.0}, {"GPU": 1.0})
    assert gangs == (
        Gang(Strategy.STRICT_SPREAD, two, 2, a100),
        Gang(Strategy.STRICT_SPREAD, two, 1, h100),
        Gang(Strategy.STRICT_SPREAD, two, 1),
        Gang(Strategy.PACK, two, 1),
    )


# ----------------------------------------------------------------------------- request_resources


def test_request_resources_keeps_label_selectors_in_rays_unit() -> None:
    requested = state(
        constraints=((ray.ResourceDemand(bundle(1, A100), 2), ray.ResourceDemand(bundle(1), 1)),)
    )
    assert gcs_constraints(requested) == (
        Constraint({"GPU": 1.0}, 2, (c("accelerator", LabelOp.IN, "A100"),), RAY_REQUEST_UNIT),
        Constraint({"GPU": 1.0}, 1, (), RAY_REQUEST_UNIT),
    )


def rrr(name: str, *bundles: dict[str, Any], namespace: str = "ns") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterName": "rc", "bundles": list(bundles)},
    }


def test_each_ray_resource_request_is_its_own_unit() -> None:
    cluster = ClusterMeta("ns", "rc", "uid")
    requests = [
        rrr("b", {"resources": {"GPU": 1}, "count": 2}, {"resources": {"CPU": "500m"}}),
        rrr("a", {"resources": {"GPU": 8}}),
        rrr("c", {"resources": {"GPU": 2}}, namespace="other"),  # another namespace's: not bound
    ]
    assert request_constraints(ClusterMeta("ns", "other", "uid"), requests) == ()
    assert request_constraints(cluster, requests) == (
        Constraint({"GPU": 8.0}, 1, unit="ns/a"),
        Constraint({"GPU": 1.0}, 2, unit="ns/b"),
        Constraint({"CPU": 0.5}, 1, unit="ns/b"),
    )


# ----------------------------------------------------------------------------- the head

HEAD_TOTAL = {
    "CPU": 4.0,
    "memory": 8.0 * 2**30,
    "object_store_memory": 2.0 * 2**30,
    "node:10.0.0.1": 1.0,
    "node:__internal_head__": 1.0,
}


def node(node_id: str, status: ray.NodeStatus, total: dict[str, float], **extra: Any) -> ray.RayNodeState:
    return ray.RayNodeState(node_id=node_id, status=status, total_resources=total, **extra)


def test_the_head_is_the_live_node_with_rays_head_resource() -> None:
    nodes = (
        node("00", ray.NodeStatus.DEAD, HEAD_TOTAL),  # the head before a restart
        node("01", ray.NodeStatus.IDLE, {"CPU": 8.0}, instance_id="w-1"),
        node(
            "02",
            ray.NodeStatus.RUNNING,
            HEAD_TOTAL,
            available_resources={**HEAD_TOTAL, "CPU": 1.0},
            labels={"ray.io/node-id": "02"},
            dynamic_labels={"_PG_ab": "1"},
        ),
    )
    assert head_node(state(nodes=nodes)) == Head(
        resources=HEAD_TOTAL,
        available={**HEAD_TOTAL, "CPU": 1.0},
        labels={"ray.io/node-id": "02", "_PG_ab": "1"},
    )


def test_no_head_without_the_gcs_or_a_live_head() -> None:
    assert head_node(None) is None
    assert head_node(state(nodes=(node("00", ray.NodeStatus.DEAD, HEAD_TOTAL),))) is None
    assert head_node(state(nodes=(node("01", ray.NodeStatus.IDLE, {"CPU": 8.0}),))) is None


def test_a_draining_head_has_nothing_free() -> None:
    draining = node("02", ray.NodeStatus.DRAINING, HEAD_TOTAL, available_resources=HEAD_TOTAL)
    head = head_node(state(nodes=(draining,)))
    assert head is not None
    assert (head.available, head.resources) == ({}, HEAD_TOTAL)
