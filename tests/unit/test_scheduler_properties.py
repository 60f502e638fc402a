"""Properties of every decision, on generated clusters (hypothesis)."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import (
    Constraint,
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
    Target,
    UpscalingMode,
    drained_while_working,
)

SHAPES = [{"CPU": 1.0}, {"CPU": 2.0, "memory": 4e9}, {"CPU": 0.5}, {"GPU": 1.0}, {"TPU": 4.0}, {"CPU": 16.0}]
HOSTS = [{"CPU": 8.0, "memory": 32e9}, {"CPU": 4.0, "GPU": 1.0}, {"CPU": 8.0, "TPU": 4.0}, {"CPU": 2.0}]
LABELS: list[dict[str, str]] = [{}, {"zone": "a"}, {"zone": "b"}, {"zone": "a", "disk": "ssd"}]
SELECTORS: list[Selector] = [
    (),
    (LabelConstraint("zone", LabelOp.IN, ("a",)),),
    (LabelConstraint("zone", LabelOp.IN, ("b", "c")),),
    (LabelConstraint("zone", LabelOp.NOT_IN, ("a",)),),
    (LabelConstraint("disk", LabelOp.IN, ("ssd",)), LabelConstraint("zone", LabelOp.IN, ("a",))),
]
UNITS = ["", "ns/one", "ns/two"]


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    groups = []
    for i in range(draw(st.integers(1, 3))):
        low = draw(st.integers(0, 2))
        groups.append(
            Group(
                name=f"g{i}",
                resources=draw(st.sampled_from(HOSTS)),
                labels=draw(st.sampled_from(LABELS)),
                min_replicas=low,
                max_replicas=draw(st.integers(low, 6)),
                num_of_hosts=draw(st.sampled_from([1, 1, 2])),
                idle_timeout_seconds=draw(st.sampled_from([None, 10.0])),
                priority=draw(st.integers(0, 1)),
                backoff=draw(st.booleans()) and draw(st.booleans()),
            )
        )
    nodes = []
    for j in range(draw(st.integers(0, 8))):
        group = draw(st.sampled_from(groups))
        state = draw(st.sampled_from(list(NodeState)))
        for h in range(group.num_of_hosts):
            nodes.append(
                Node(
                    name=f"n{j}-{h}",
                    group=group.name,
                    state=state,
                    replica=f"r{j}" if group.num_of_hosts > 1 else None,
                    available=draw(st.sampled_from([None, {}, {"CPU": 1.0}])),
                    idle_seconds=draw(st.sampled_from([0.0, 5.0, 100.0])),
                    pending_seconds=draw(st.sampled_from([0.0, 1000.0, 4000.0])),
                    booting=draw(st.booleans()),
                    labels=draw(st.sampled_from([None, None, *LABELS])),
                )
            )
    selector = st.sampled_from(SELECTORS)
    demands = tuple(
        Demand(
            draw(st.sampled_from(SHAPES)),
            draw(st.integers(1, 40)),
            draw(selector),
            tuple(draw(st.lists(selector, max_size=2))),
        )
        for _ in range(draw(st.integers(0, 4)))
    )
    gangs = []
    for _ in range(draw(st.integers(0, 2))):
        bundles = tuple(draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3)))
        with_selectors = draw(st.booleans())
        gangs.append(
            Gang(
                draw(st.sampled_from(list(Strategy))),
                bundles,
                bundle_selectors=tuple(draw(selector) for _ in bundles) if with_selectors else (),
            )
        )
    constraints = tuple(
        Constraint(
            draw(st.sampled_from(SHAPES)),
            draw(st.integers(1, 3)),
            draw(selector),
            draw(st.sampled_from(UNITS)),
        )
        for _ in range(draw(st.integers(0, 3)))
    )
    head = draw(
        st.sampled_from(
            [None, Head({"CPU": 4.0}, None, {"zone": "a"}), Head({"CPU": 8.0, "GPU": 1.0}, {"CPU": 1.0})]
        )
    )
    options = Options(
        idle_timeout_seconds=draw(st.sampled_from([None, 60.0, 1.0])),
        upscaling_mode=draw(st.sampled_from(list(UpscalingMode))),
        max_workers=draw(st.sampled_from([None, None, 4, 20])),
    )
    return Snapshot(tuple(groups), tuple(nodes), demands, tuple(gangs), constraints, options, head)


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(snapshots())
def test_replicas_stay_within_min_and_max(snapshot: Snapshot) -> None:
    decision = schedule(snapshot)
    unlimited = snapshot.options.max_workers is None and snapshot.options.upscaling_mode != "Conservative"
    for group in snapshot.groups:
        g = decision.groups[group.name]
        causes = {t.reason for t in decision.terminate if t.group == group.name}
        assert g.replicas == g.current + g.launch - g.terminate
        # a replica held by a host drained while it works is never written away, even over max
        held = {
            n.replica or n.name for n in snapshot.nodes if n.group == group.name and drained_while_working(n)
        }
        assert 0 <= g.replicas - len(held) <= group.max_replicas
        if causes & {"IDLE", "MAX_WORKERS"}:  # voluntary removals never cut below min
            assert g.replicas >= group.min_replicas
        if unlimited and not group.backoff and "LAUNCH_FAILED" not in causes:
            assert g.replicas >= group.min_replicas


@SETTINGS
@given(snapshots())
def test_no_node_holding_placed_work_is_removed(snapshot: Snapshot) -> None:
    decision = schedule(snapshot)
    removed = {t.name for t in decision.terminate}
    for placement in decision.placements:
        for target in placement.targets:
            assert not removed & set(target.nodes)


@SETTINGS
@given(snapshots())
def test_every_unit_is_placed_or_unmet_with_a_reason(snapshot: Snapshot) -> None:
    decision = schedule(snapshot)
    for kind, asked in (
        ("demand", sum(d.count for d in snapshot.demands)),
        ("gang", sum(g.count for g in snapshot.gangs)),
        ("constraint", sum(c.count for c in snapshot.constraints)),
    ):
        placed = sum(p.count for p in decision.placements if p.kind == kind)
        unmet = sum(u.count for u in decision.unmet if u.kind == kind)
        assert placed + unmet == asked, kind
    for p in decision.placements:
        if p.kind == "demand":
            assert sum(t.count for t in p.targets) == p.count


@SETTINGS
@given(snapshots())
def test_same_input_same_output(snapshot: Snapshot) -> None:
    assert schedule(snapshot).to_dict() == schedule(snapshot).to_dict()


def _matches(selectors: tuple[Selector, ...], labels: Mapping[str, str]) -> bool:
    return not selectors or any(all(c.matches(labels) for c in s) for s in selectors)


@SETTINGS
@given(snapshots())
def test_demand_and_constraints_only_go_where_a_selector_matches(snapshot: Snapshot) -> None:
    decision = schedule(snapshot)
    group_labels = {g.name: g.labels for g in snapshot.groups}
    node_labels = {
        n.name: n.labels if n.labels is not None else group_labels[n.group] for n in snapshot.nodes
    }
    for p in decision.placements:
        if p.kind == "gang":
            continue
        selectors = (p.label_selector, *p.fallbacks) if p.label_selector or p.fallbacks else ()
        for t in p.targets:
            if t.on is Target.HEAD:
                assert snapshot.head is not None
                assert _matches(selectors, snapshot.head.labels)
            elif t.on is Target.NEW:
                assert _matches(selectors, group_labels[t.group])
            for name in t.nodes:
                assert _matches(selectors, node_labels[name])


@SETTINGS
@given(snapshots())
def test_draining_and_dead_nodes_go_and_take_no_work(snapshot: Snapshot) -> None:
    """... except the replicas with a host drained by someone else while it works: they stay."""
    decision = schedule(snapshot)
    causes = {t.name: t.reason for t in decision.terminate}
    used = {name for p in decision.placements for t in p.targets for name in t.nodes}
    held = {(n.group, n.replica or n.name) for n in snapshot.nodes if drained_while_working(n)}
    for node in snapshot.nodes:
        if (node.group, node.replica or node.name) in held:
            assert node.name not in causes
            assert node.name not in used
        elif node.state in (NodeState.DRAINING, NodeState.DEAD):
            assert node.name in causes
            assert node.name not in used


@SETTINGS
@given(snapshots())
def test_each_constraint_unit_is_placed_whole_or_not_at_all(snapshot: Snapshot) -> None:
    decision = schedule(snapshot)
    for unit in {c.unit for c in snapshot.constraints}:
        asked = sum(c.count for c in snapshot.constraints if c.unit == unit)
        placed = sum(p.count for p in decision.placements if p.kind == "constraint" and p.unit == unit)
        assert placed in (0, asked)
