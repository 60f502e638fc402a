"""The scheduler follows Ray 2.60's autoscaler on fallback selectors, placement group bundle
selectors, constraint selectors and units, the head node, draining and dead Ray nodes,
provisioning limits and a running node's own labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import (
    RAY_REQUEST_UNIT,
    Constraint,
    Decision,
    Demand,
    Gang,
    Group,
    Head,
    LabelConstraint,
    LabelOp,
    Node,
    NodeState,
    Options,
    Selector,
    Snapshot,
    Strategy,
)


def zone(*values: str) -> Selector:
    return (LabelConstraint("zone", LabelOp.IN, values),)


def group(name: str, cpus: float = 4, labels: Mapping[str, str] | None = None, **extra: Any) -> Group:
    return Group(name, {"CPU": cpus}, labels or {}, **extra)


def zones(*names: str, **extra: Any) -> tuple[Group, ...]:
    """One 4-CPU group per zone, named after it."""
    return tuple(group(n, labels={"zone": n}, **extra) for n in names)


def launches(decision: Decision) -> dict[str, int]:
    return {name: g.launch for name, g in decision.groups.items() if g.launch}


def removed(decision: Decision) -> dict[str, str]:
    return {t.name: str(t.reason) for t in decision.terminate}


def targets(decision: Decision, kind: str) -> list[tuple[str, str, int, tuple[str, ...]]]:
    return [
        (t.group, str(t.on), t.count, t.nodes)
        for p in decision.placements
        if p.kind == kind
        for t in p.targets
    ]


# ----------------------------------------------------------- 1. fallback label selectors


def test_unusable_first_selector_launches_the_fallbacks_group() -> None:
    task = Demand({"CPU": 1}, 2, zone("nowhere"), (zone("b"),))
    decision = schedule(Snapshot(zones("a", "b"), demands=(task,)))
    assert launches(decision) == {"b": 1}
    assert decision.unmet == ()
    (placement,) = decision.placements
    assert placement.label_selector == zone("nowhere")
    assert placement.fallbacks == (zone("b"),)
    assert decision.to_dict()["placements"][0]["fallbacks"] == [
        [{"key": "zone", "op": "in", "values": ["b"]}]
    ]


def test_existing_host_matching_a_fallback_is_used_before_a_new_preferred_one() -> None:
    task = Demand({"CPU": 1}, 1, zone("b"), (zone("a"),))
    decision = schedule(Snapshot(zones("a", "b"), (Node("a-1", "a"),), demands=(task,)))
    assert launches(decision) == {}
    assert targets(decision, "demand") == [("a", "running", 1, ("a-1",))]


def test_earliest_matching_selector_wins_among_hosts_and_new_groups() -> None:
    tasks = Demand({"CPU": 2}, 3, zone("b"), (zone("a"),))
    nodes = (Node("a-1", "a", available={"CPU": 2}), Node("b-1", "b"))  # a-1 is the better fit
    decision = schedule(Snapshot(zones("a", "b"), nodes, demands=(tasks,)))
    assert launches(decision) == {}
    assert targets(decision, "demand") == [("a", "running", 1, ("a-1",)), ("b", "running", 2, ("b-1",))]
    tasks = Demand({"CPU": 1}, 3, zone("b"), (zone("a"),))
    assert launches(schedule(Snapshot(zones("a", "b"), demands=(tasks,)))) == {"b": 1}
    groups = (group("a", labels={"zone": "a"}), group("b", labels={"zone": "b"}, backoff=True))
    assert launches(schedule(Snapshot(groups, demands=(tasks,)))) == {"a": 1}


# ------------------------------------------------------ 2. placement group bundle selectors


def test_bundle_selectors_choose_the_group_and_the_host() -> None:
    pg = Gang(Strategy.PACK, ({"CPU": 1}, {"CPU": 1}), 1, (zone("b"), ()))
    decision = schedule(Snapshot(zones("a", "b"), (Node("a-1", "a"),), gangs=(pg,)))
    assert launches(decision) == {"b": 1}  # bundle 0 cannot go on a-1
    assert sorted(targets(decision, "gang")) == [("a", "running", 1, ("a-1",)), ("b", "new", 1, ())]
    assert decision.to_dict()["placements"][0]["bundleSelectors"] == [
        [{"key": "zone", "op": "in", "values": ["b"]}],
        None,
    ]


def test_strict_pack_needs_a_host_matching_every_bundle_selector() -> None:
    prod = (LabelConstraint("env", LabelOp.IN, ("prod",)),)
    groups = (group("b", labels={"zone": "b"}), group("bp", labels={"zone": "b", "env": "prod"}))
    pg = Gang(Strategy.STRICT_PACK, ({"CPU": 1}, {"CPU": 1}), 1, (zone("b"), prod))
    assert launches(schedule(Snapshot(groups, gangs=(pg,)))) == {"bp": 1}


def test_strict_spread_bundles_each_on_a_matching_host() -> None:
    pg = Gang(Strategy.STRICT_SPREAD, ({"CPU": 1}, {"CPU": 1}), 1, (zone("b"), zone("b")))
    decision = schedule(Snapshot(zones("a", "b"), (Node("a-1", "a"), Node("b-1", "b")), gangs=(pg,)))
    assert launches(decision) == {"b": 1}
    assert sorted(targets(decision, "gang")) == [("b", "new", 1, ()), ("b", "running", 1, ("b-1",))]


def test_gang_whose_bundle_selector_matches_no_group_launches_nothing() -> None:
    pg = Gang(Strategy.PACK, ({"CPU": 1}, {"CPU": 1}), 1, ((), zone("nowhere")))
    decision = schedule(Snapshot(zones("a"), gangs=(pg,)))
    assert launches(decision) == {}
    assert [(u.kind, str(u.reason)) for u in decision.unmet] == [("gang", "NO_MATCHING_GROUP")]


# ------------------------------------------------------------------- 3. constraints


def test_constraint_label_selector_picks_the_group() -> None:
    need = Constraint({"CPU": 4}, 1, zone("b"))
    assert launches(schedule(Snapshot(zones("a", "b"), constraints=(need,)))) == {"b": 1}


def test_each_constraint_unit_is_all_or_nothing_on_its_own() -> None:
    constraints = (
        Constraint({"CPU": 100}, 1, unit="ns/too-big"),
        Constraint({"CPU": 4}, 2, unit="ns/fits"),
        Constraint({"CPU": 4}, 1, unit=RAY_REQUEST_UNIT),
    )
    decision = schedule(Snapshot(zones("a"), constraints=constraints))
    assert launches(decision) == {"a": 3}
    assert [(u.unit, u.count, str(u.reason)) for u in decision.unmet] == [
        ("ns/too-big", 1, "NO_MATCHING_GROUP")
    ]
    assert sorted((p.unit, p.count) for p in decision.placements) == [("", 1), ("ns/fits", 2)]
    assert {c.get("unit") for c in decision.to_dict()["placements"]} == {"", "ns/fits"}


def test_rays_request_resources_goes_first_then_units_by_name() -> None:
    constraints = (
        Constraint({"CPU": 4}, 1, unit="ns/b"),
        Constraint({"CPU": 4}, 1, unit="ns/a"),
        Constraint({"CPU": 4}, 1, unit=RAY_REQUEST_UNIT),
    )
    decision = schedule(Snapshot(zones("a", max_replicas=2), constraints=constraints))
    assert sorted(p.unit or "" for p in decision.placements) == ["", "ns/a"]
    assert [(u.unit, str(u.reason)) for u in decision.unmet] == [("ns/b", "MAX_REPLICAS")]


# ------------------------------------------------------------------------- 4. the head


def test_head_takes_demand_before_workers_and_is_never_a_group() -> None:
    head = Head({"CPU": 8}, {"CPU": 3}, {"zone": "h"})
    demands = (Demand({"CPU": 1}, 3), Demand({"CPU": 1}, 1, zone("h")))
    decision = schedule(Snapshot(zones("a"), (Node("a-1", "a"),), demands=demands, head=head))
    assert launches(decision) == {}
    placed = sorted(targets(decision, "demand"))
    assert placed == [("", "head", 1, ()), ("", "head", 2, ()), ("a", "running", 1, ("a-1",))]
    assert set(decision.groups) == {"a"}
    assert all(
        t["on"] == "head" and "group" not in t
        for p in decision.to_dict()["placements"]
        for t in p["targets"]
        if t["on"] == "head"
    )


def test_head_capacity_counts_for_constraints_not_its_free_resources() -> None:
    head = Head({"CPU": 8}, {"CPU": 0})
    decision = schedule(
        Snapshot(zones("a"), constraints=(Constraint({"CPU": 8}),), demands=(Demand({"CPU": 1}),), head=head)
    )
    assert launches(decision) == {"a": 1}  # for the task; the constraint is covered by the head
    assert targets(decision, "constraint") == [("", "head", 1, ())]


def test_head_is_not_counted_in_max_workers_and_no_room_on_it_is_no_matching_group() -> None:
    head = Head({"CPU": 64}, {"CPU": 2})
    demands = (Demand({"CPU": 4}), Demand({"CPU": 2}), Demand({"CPU": 32}))
    decision = schedule(Snapshot(zones("a"), demands=demands, head=head, options=Options(max_workers=1)))
    assert launches(decision) == {"a": 1}
    assert sorted(targets(decision, "demand")) == [("", "head", 1, ()), ("a", "new", 1, ())]
    assert [(u.resources, str(u.reason)) for u in decision.unmet] == [({"CPU": 32.0}, "NO_MATCHING_GROUP")]


# ------------------------------------------------------------------------ 5. node states


def test_draining_and_dead_replicas_go_whole_and_are_replaced_without_backoff() -> None:
    groups = (group("a", min_replicas=2), group("slice", num_of_hosts=2))
    nodes = (
        Node("a-drain", "a", NodeState.DRAINING),
        Node("a-dead", "a", NodeState.DEAD),
        Node("s-0", "slice", replica="r1"),
        Node("s-1", "slice", NodeState.DRAINING, replica="r1"),
    )
    decision = schedule(Snapshot(groups, nodes, demands=(Demand({"CPU": 4}, 2),)))
    assert removed(decision) == {
        "a-drain": "DRAINED",
        "a-dead": "NODE_DEAD",
        "s-0": "DRAINED",
        "s-1": "DRAINED",
    }
    assert launches(decision) == {"a": 2}  # min replicas replaced; the group is not backing off
    assert decision.unmet == ()  # the two tasks go on the replacements, not on the draining hosts
    assert {t[1] for t in targets(decision, "demand")} == {"new"}


# ------------------------------------------------------------------- 6. provisioning limits


def test_booting_pods_get_the_boot_limit_unscheduled_ones_the_provisioning_limit() -> None:
    options = Options(max_node_provision_seconds=900, max_node_boot_seconds=3600)
    nodes = (
        Node("booting", "a", NodeState.PENDING, pending_seconds=1000, booting=True),
        Node("unscheduled", "a", NodeState.PENDING, pending_seconds=1000),
        Node("stuck", "a", NodeState.PENDING, pending_seconds=3601, booting=True),
    )
    decision = schedule(Snapshot(zones("a"), nodes, options=options))
    assert removed(decision) == {"unscheduled": "LAUNCH_FAILED", "stuck": "LAUNCH_FAILED"}


def test_the_worker_cap_removes_no_replica_it_does_not_have_to() -> None:
    """Over maxWorkers 3 with 5 hosts: the 4-host replica must go (KubeRay removes it whole); the
    busy single host first in Ray's order is not needed gone once it has (it once went too)."""
    wide = group("wide", num_of_hosts=4)
    idle = {"beta-r0-h2": 45.0, "beta-r0-h3": 61.0}
    nodes = (
        Node("alpha-2", "alpha"),
        *(
            Node(f"beta-r0-h{i}", "wide", replica="beta-r0", idle_seconds=idle.get(f"beta-r0-h{i}", 0.0))
            for i in range(4)
        ),
    )
    decision = schedule(Snapshot((group("alpha"), wide), nodes, options=Options(max_workers=3)))
    assert set(removed(decision)) == {f"beta-r0-h{i}" for i in range(4)}
    assert decision.groups["alpha"].replicas == 1


def test_a_failed_launch_backs_its_group_off_but_not_its_minimum() -> None:
    """The stuck replica goes and a task waits (BACKOFF), but the group's minimum is relaunched:
    KubeRay's controller keeps minReplicas whatever the autoscaler writes."""
    nodes = (Node("stuck", "a", NodeState.PENDING, pending_seconds=1000),)
    snap = Snapshot((group("a", min_replicas=1),), nodes, demands=(Demand({"CPU": 4}, 2),))
    decision = schedule(snap)
    assert removed(decision) == {"stuck": "LAUNCH_FAILED"}
    assert launches(decision) == {"a": 1}
    assert [(u.count, str(u.reason)) for u in decision.unmet] == [(1, "BACKOFF")]


def test_the_slice_head_resource_stays_with_host_0_when_host_0_is_terminating() -> None:
    """Host 1 of a replica whose host 0 is going has no ``TPU-<type>-head``: a head task needs a new
    replica (it once went to host 1, which took host 0's place in the replica)."""
    head = "TPU-v6e-8-head"
    tpu = Group("slice", {"CPU": 4, "TPU": 4, head: 1}, num_of_hosts=2)
    nodes = (
        Node("s-0", "slice", NodeState.TERMINATING, replica="r1"),
        Node("s-1", "slice", replica="r1"),
    )
    decision = schedule(Snapshot((tpu,), nodes, demands=(Demand({head: 1, "TPU": 4}, 1),)))
    assert launches(decision) == {"slice": 1}
    assert targets(decision, "demand") == [("slice", "new", 1, ())]


# ------------------------------------------------------------------- 7. a node's own labels


def test_running_nodes_own_labels_are_matched() -> None:
    nodes = tuple(Node(f"a-{i}", "a", labels={"zone": "b", "ray.io/node-id": f"id{i}"}) for i in range(2))
    decision = schedule(Snapshot(zones("a", "b"), nodes, demands=(Demand({"CPU": 4}, 2, zone("b")),)))
    assert launches(decision) == {}
    assert targets(decision, "demand") == [("a", "running", 2, ("a-0", "a-1"))]
