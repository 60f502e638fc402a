"""RayResourceRequest status from a decision: Satisfied, Unsatisfiable with the reason, Pending."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support.builders import cluster, group, pod

from rayscale.autoscaler.requests import decision_status, pending_status, status_patch
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import (
    RAY_REQUEST_UNIT,
    Constraint,
    Decision,
    DemandKind,
    Group,
    Head,
    Placement,
    PlacementTarget,
    Snapshot,
    Target,
    Unmet,
    UnmetReason,
)
from rayscale.autoscaler.snapshot import build_snapshot

REQUEST = {"metadata": {"name": "r", "namespace": "ns", "generation": 3}, "status": {}}


def decided(*unmet: Unmet) -> Decision:
    return Decision(groups={}, terminate=(), unmet=unmet, placements=())


def unmet(kind: DemandKind, reason: UnmetReason, count: int = 10) -> Unmet:
    return Unmet(kind, {"GPU": 1.0, "CPU": 4.0}, None, None, (), count, reason)


def test_satisfied_when_no_constraint_is_unmet() -> None:
    # unmet tasks are not this request's business
    status = decision_status(REQUEST, decided(unmet(DemandKind.DEMAND, UnmetReason.NO_MATCHING_GROUP)))
    assert status == {"phase": "Satisfied", "reason": None, "message": "the cluster can hold every bundle",
                      "observedGeneration": 3}  # fmt: skip


def test_unsatisfiable_with_the_schedulers_reason() -> None:
    status = decision_status(REQUEST, decided(unmet(DemandKind.CONSTRAINT, UnmetReason.MAX_REPLICAS)))
    assert (status["phase"], status["reason"]) == ("Unsatisfiable", "MAX_REPLICAS")
    assert status["message"].endswith("10 x {CPU: 4, GPU: 1} (MAX_REPLICAS)")


def test_written_only_when_changed() -> None:
    new = pending_status(REQUEST, "RayCluster x does not exist")
    patch = status_patch(REQUEST, new)
    assert patch == {"status": new}
    assert status_patch({**REQUEST, "status": new}, new) is None


def _round(replicas: int, pods: list[dict[str, Any]], bundles: int, *other: dict[str, Any]) -> Decision:
    """The decision of a round on a cluster of 1-CPU workers with `replicas` in its spec."""
    body = cluster(group("cpu", replicas=replicas), *other, autoscaling=True)
    spec = {"clusterName": "rc", "bundles": [{"resources": {"CPU": 1}, "count": bundles}]}
    request = {"metadata": {"name": "r", "namespace": "ns"}, "spec": spec}
    snapshot = build_snapshot(body, pods, None, [request], (), datetime(2026, 1, 1, tzinfo=UTC))
    return schedule(snapshot)


def test_pending_while_patched_replicas_have_no_pods_yet() -> None:
    # Between the scale-up patch and the controller creating the pods, the spec's replicas are
    # "unborn" pending nodes: nothing launches and no pod starts, yet nothing runs either.
    assert decision_status(REQUEST, _round(3, [], 3))["phase"] == "Pending"
    one_running = [pod("cpu-a", "cpu")]
    assert decision_status(REQUEST, _round(3, one_running, 3))["phase"] == "Pending"
    all_running = [pod(f"cpu-{n}", "cpu") for n in "abc"]
    status = decision_status(REQUEST, _round(3, all_running, 3))
    assert status["phase"] == "Satisfied"
    # Bundles that running workers hold are satisfied even while an extra replica is unborn.
    assert decision_status(REQUEST, _round(4, all_running, 3))["phase"] == "Satisfied"


def test_pending_while_new_workers_launch() -> None:
    decision = _round(0, [], 3)
    assert decision.groups["cpu"].launch == 3
    status = decision_status(REQUEST, decision)
    assert status["phase"] == "Pending"
    assert status["message"] == "scaling up: 3 bundle(s) wait for workers that launch or start"


def test_pending_while_its_workers_start() -> None:
    starting = [pod(f"cpu-{n}", "cpu", phase="Pending") for n in "abc"]
    assert decision_status(REQUEST, _round(3, starting, 3))["phase"] == "Pending"


def test_other_groups_starting_workers_do_not_hold_it_back() -> None:
    # The request's bundles run on the CPU group; a GPU worker still starting (other demand)
    # and a GPU replica without a pod yet are not its business.
    gpu = group("gpu", replicas=2)
    pods = [pod(f"cpu-{n}", "cpu") for n in "abc"] + [pod("gpu-a", "gpu", phase="Pending")]
    assert decision_status(REQUEST, _round(3, pods, 3, gpu))["phase"] == "Satisfied"


# ---- each request is its own unit: only its own placements and unmet bundles count ----

OTHER = {"metadata": {"name": "big", "namespace": "ns", "generation": 1}, "spec": {}}


def unit_unmet(unit: str, reason: UnmetReason = UnmetReason.MAX_REPLICAS) -> Unmet:
    return Unmet(DemandKind.CONSTRAINT, {"GPU": 8.0}, None, None, (), 1, reason, unit=unit)


def unit_placed(unit: str, on: Target, count: int = 2) -> Placement:
    target = PlacementTarget("gpu", on, count)
    return Placement(DemandKind.CONSTRAINT, {"GPU": 1.0}, None, None, (), count, (target,), unit=unit)


def test_another_requests_unmet_bundles_do_not_make_it_unsatisfiable() -> None:
    decision = Decision(
        groups={},
        terminate=(),
        unmet=(unit_unmet("ns/big"), unit_unmet(RAY_REQUEST_UNIT)),
        placements=(unit_placed("ns/r", Target.RUNNING),),
    )
    assert decision_status(REQUEST, decision)["phase"] == "Satisfied"
    status = decision_status(OTHER, decision)
    assert (status["phase"], status["reason"]) == ("Unsatisfiable", "MAX_REPLICAS")
    assert status["message"].endswith(": 1 x {GPU: 8} (MAX_REPLICAS)")


def test_only_its_own_bundles_on_starting_workers_keep_it_pending() -> None:
    decision = Decision(
        groups={},
        terminate=(),
        unmet=(),
        placements=(
            unit_placed("ns/r", Target.NEW, 2),
            unit_placed("ns/r", Target.RUNNING, 1),
            unit_placed("ns/r", Target.HEAD, 1),
            unit_placed("ns/big", Target.PENDING, 5),
            unit_placed(RAY_REQUEST_UNIT, Target.NEW, 7),
        ),
    )
    status = decision_status(REQUEST, decision)
    assert (status["phase"], status["message"]) == (
        "Pending",
        "scaling up: 2 bundle(s) wait for workers that launch or start",
    )
    assert (
        decision_status(OTHER | {"metadata": {"name": "idle", "namespace": "ns"}}, decision)["phase"]
        == "Satisfied"
    )


def test_same_name_in_another_namespace_is_another_unit() -> None:
    decision = Decision(groups={}, terminate=(), unmet=(unit_unmet("other/r"),), placements=())
    assert decision_status(REQUEST, decision)["phase"] == "Satisfied"


def test_a_bundle_that_cannot_be_read_is_unsatisfiable() -> None:
    bad = REQUEST | {"spec": {"clusterName": "rc", "bundles": [{"resources": {"CPU": "lots"}}]}}
    status = decision_status(bad, decided())
    assert (status["phase"], status["reason"]) == ("Unsatisfiable", "InvalidBundles")
    assert "lots" in status["message"]


def test_with_the_scheduler_an_unsatisfiable_request_leaves_the_other_scaling() -> None:
    body = cluster(group("cpu", replicas=0), autoscaling=True)
    small = {"metadata": {"name": "r", "namespace": "ns"}, "spec": {"clusterName": "rc", "bundles": [
        {"resources": {"CPU": 1}, "count": 3}]}}  # fmt: skip
    big = {"metadata": {"name": "big", "namespace": "ns"}, "spec": {"clusterName": "rc", "bundles": [
        {"resources": {"CPU": 64}, "count": 1}]}}  # fmt: skip
    snapshot = build_snapshot(body, [], None, [small, big], (), datetime(2026, 1, 1, tzinfo=UTC))
    decision = schedule(snapshot)
    assert decision.groups["cpu"].launch == 3
    assert decision_status(small, decision)["phase"] == "Pending"
    status = decision_status(big, decision)
    assert (status["phase"], status["reason"]) == ("Unsatisfiable", "NO_MATCHING_GROUP")


def test_bundles_the_head_holds_are_satisfied() -> None:
    snapshot = Snapshot(
        groups=(Group("cpu", {"CPU": 1.0}),),
        constraints=(Constraint({"CPU": 2.0}, 1, unit="ns/r"),),
        head=Head({"CPU": 4.0}, available={"CPU": 0.0}),
    )
    decision = schedule(snapshot)
    assert decision.groups["cpu"].launch == 0
    assert decision_status(REQUEST, decision)["phase"] == "Satisfied"


BUNDLE_LIMIT = "the limit of 100000 per RayResourceRequest"
OUT_OF_RANGE = "is out of range: quantities are limited to ±9223372036854775807 (2^63-1)"


@pytest.mark.parametrize(
    ("bundles", "message"),
    [
        ([{"resources": {"memory": "1e999999"}}],
         f"spec.bundles[0].resources.memory: '1e999999' {OUT_OF_RANGE}"),
        ([{"resources": {"CPU": 1}}, {"resources": {"CPU": "1e19"}}],
         f"spec.bundles[1].resources.CPU: '1e19' {OUT_OF_RANGE}"),
        ([{"resources": {"CPU": "-1"}}], "spec.bundles[0].resources.CPU: must be >= 0"),
        ([{"resources": {"CPU": "lots"}}], "spec.bundles[0].resources.CPU: not a quantity: 'lots'"),
        ([{"resources": {"CPU": 1}, "count": 2**31 - 1}],
         f"spec.bundles[0].count: 2147483647 bundles in all is over {BUNDLE_LIMIT}"),
        ([{"resources": {"CPU": 1}, "count": 60_000}, {"resources": {"GPU": 1}, "count": 60_000}],
         f"spec.bundles[1].count: 120000 bundles in all is over {BUNDLE_LIMIT}"),
        ([{"resources": {"CPU": 1}, "count": 0}], "spec.bundles[0].count: must be an integer >= 1"),
        ([{"resources": {"CPU": 1}, "count": "many"}], "spec.bundles[0].count: must be an integer >= 1"),
        ([{"resources": ["CPU"]}], "spec.bundles[0].resources: must be a mapping"),
        ("CPU", "spec.bundles: must be a list"),
    ],
)  # fmt: skip
def test_bad_bundles_are_refused_with_the_field_whatever_the_cluster(bundles: Any, message: str) -> None:
    bad = REQUEST | {"spec": {"clusterName": "rc", "bundles": bundles}}
    expected = ("Unsatisfiable", "InvalidBundles", f"a bundle cannot be read: {message}")
    for status in (decision_status(bad, decided()), pending_status(bad, "RayCluster rc does not exist")):
        assert (status["phase"], status["reason"], status["message"]) == expected


def test_a_bad_request_is_left_out_and_the_cluster_scales_for_the_others() -> None:
    body = cluster(group("cpu", replicas=0, max_replicas=2**31 - 1), autoscaling=True)
    good = {"metadata": {"name": "good", "namespace": "ns"}, "spec": {"clusterName": "rc", "bundles": [
        {"resources": {"CPU": 1}, "count": 2}]}}  # fmt: skip
    huge = {"metadata": {"name": "huge", "namespace": "ns"}, "spec": {"clusterName": "rc", "bundles": [
        {"resources": {"memory": "1e999999"}}]}}  # fmt: skip
    many = {"metadata": {"name": "many", "namespace": "ns"}, "spec": {"clusterName": "rc", "bundles": [
        {"resources": {"CPU": 1}, "count": 2**31 - 1}]}}  # fmt: skip
    snapshot = build_snapshot(body, [], None, [good, huge, many], (), datetime(2026, 1, 1, tzinfo=UTC))
    decision = schedule(snapshot)
    assert decision.groups["cpu"].launch == 2
    assert decision_status(good, decision)["phase"] == "Pending"
    assert (
        decision_status(huge, decision)["reason"]
        == decision_status(many, decision)["reason"]
        == "InvalidBundles"
    )
