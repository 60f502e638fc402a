"""Properties of every decision, on generated clusters (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import (
    Constraint,
    Demand,
    Gang,
    Group,
    Node,
    NodeState,
    Options,
    Snapshot,
    Strategy,
    UpscalingMode,
)

SHAPES = [{"CPU": 1.0}, {"CPU": 2.0, "memory": 4e9}, {"CPU": 0.5}, {"GPU": 1.0}, {"TPU": 4.0}, {"CPU": 16.0}]
HOSTS = [{"CPU": 8.0, "memory": 32e9}, {"CPU": 4.0, "GPU": 1.0}, {"CPU": 8.0, "TPU": 4.0}, {"CPU": 2.0}]


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    groups = []
    for i in range(draw(st.integers(1, 3))):
        low = draw(st.integers(0, 2))
        groups.append(
            Group(
                name=f"g{i}",
                resources=draw(st.sampled_from(HOSTS)),
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
                    pending_seconds=draw(st.sampled_from([0.0, 1000.0])),
                )
            )
    demands = tuple(
        Demand(draw(st.sampled_from(SHAPES)), draw(st.integers(1, 40)))
        for _ in range(draw(st.integers(0, 4)))
    )
    gangs = tuple(
        Gang(
            draw(st.sampled_from(list(Strategy))),
            tuple(draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3))),
        )
        for _ in range(draw(st.integers(0, 2)))
    )
    constraints = tuple(
        Constraint(draw(st.sampled_from(SHAPES)), draw(st.integers(1, 3)))
        for _ in range(draw(st.integers(0, 1)))
    )
    options = Options(
        idle_timeout_seconds=draw(st.sampled_from([None, 60.0, 1.0])),
        upscaling_mode=draw(st.sampled_from(list(UpscalingMode))),
        max_workers=draw(st.sampled_from([None, None, 4, 20])),
    )
    return Snapshot(tuple(groups), tuple(nodes), demands, gangs, constraints, options)


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
        assert 0 <= g.replicas <= group.max_replicas
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
