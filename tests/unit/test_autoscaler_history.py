"""Decision records: what a round saw and did, repeats folded, bounds, and replayable scenarios."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import yaml

from rayscale.autoscaler.history import (
    HISTORY_LIMIT,
    MAX_ENTRIES,
    SCENARIO_LIMIT,
    DecisionHistory,
    DecisionRecord,
    decision_record,
    record_dict,
)
from rayscale.autoscaler.scenario import parse_scenario
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
    Snapshot,
    Strategy,
    UpscalingMode,
)
from rayscale.autoscaler.trust import held_snapshot

T0 = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)
CPU = Group("cpu", {"CPU": 4, "memory": 8 * 2**30}, min_replicas=1, max_replicas=10)
GPU = Group("gpu", {"CPU": 8, "GPU": 1}, max_replicas=4)
TPU = Group("tpu", {"TPU": 4}, labels={"zone": "a"}, num_of_hosts=2, max_replicas=2, idle_timeout_seconds=30)
ZONE_A = (LabelConstraint("zone", LabelOp.IN, ("a",)),)


def busy_cluster() -> Snapshot:
    """Idle and busy workers, a slice, tasks, placement groups, request_resources and a request."""
    return Snapshot(
        groups=(CPU, GPU, TPU),
        nodes=(
            Node("cpu-a", "cpu", available={"CPU": 0.5}),
            Node("cpu-b", "cpu", idle_seconds=120, labels={"rack": "r7"}),
            Node("tpu-0", "tpu", NodeState.PENDING, replica="s1", booting=True, pending_seconds=30),
            Node("tpu-1", "tpu", NodeState.PENDING, replica="s1", pending_seconds=12.5),
            Node("cpu-c", "cpu", NodeState.DRAINING),
            Node("unborn:gpu:0", "gpu", NodeState.PENDING, pending_seconds=3),
        ),
        demands=(
            Demand({"CPU": 1}, 6),
            Demand({"CPU": 1}, 2, label_selector=ZONE_A, fallbacks=((),)),
            Demand({"GPU": 4}, 1),
        ),
        gangs=(Gang(Strategy.STRICT_SPREAD, ({"GPU": 1}, {"GPU": 1}), 1, bundle_selectors=((), ZONE_A)),),
        constraints=(Constraint({"GPU": 1}, 3), Constraint({"CPU": 2}, 1, unit="ns/reserve")),
        options=Options(idle_timeout_seconds=60, upscaling_mode=UpscalingMode.CONSERVATIVE, max_workers=40),
        head=Head({"CPU": 2}, available={"CPU": 0.0}, labels={"ray.io/node-type": "head"}),
    )


def record(snapshot: Snapshot, at: datetime = T0, **kwargs: object) -> DecisionRecord:
    return decision_record(snapshot, schedule(snapshot), at, **kwargs)  # type: ignore[arg-type]


def test_a_record_says_what_was_asked_launched_removed_and_left_unmet() -> None:
    snapshot = busy_cluster()
    out = record_dict(record(snapshot, trigger="pod", written=True))
    assert out["time"] == out["lastSeen"] == "2026-01-01T01:00:00Z"
    assert (out["repeats"], out["trigger"], out["held"], out["written"], out["scenario"]) == (
        0,
        "pod",
        None,
        True,
        True,
    )
    assert out["demand"] == [  # by shape, label selectors aside, the largest first
        {"kind": "task", "resources": {"CPU": 1}, "count": 8},
        {"kind": "request", "resources": {"GPU": 1}, "unit": "", "count": 3},
        {"kind": "task", "resources": {"GPU": 4}, "count": 1},
        {
            "kind": "placementGroup",
            "bundles": [{"GPU": 1}, {"GPU": 1}],
            "strategy": "STRICT_SPREAD",
            "count": 1,
        },
        {"kind": "request", "resources": {"CPU": 2}, "unit": "ns/reserve", "count": 1},
    ]
    assert out["removed"] == [{"group": "cpu", "pod": "cpu-c", "replica": None, "cause": "DRAINED"}]
    why = "2 x {GPU: 1} (bundle(s) of request_resources or RayResourceRequests)"
    assert out["launched"] == [{"group": "gpu", "replicas": 2, "why": [why]}]
    unmet = {(u["kind"], json.dumps(u.get("resources"))): u for u in out["unmet"]}
    gpu4 = unmet[("task", '{"GPU": 4}')]
    assert (gpu4["reason"], gpu4["count"]) == ("NO_MATCHING_GROUP", 1)
    assert gpu4["why"] == "no worker group has a host that can hold it (resources or labels)"
    assert out["omitted"] == {}
    json.dumps(out)


def test_a_launch_for_minreplicas_says_so() -> None:
    out = record_dict(record(Snapshot(groups=(CPU,))))
    assert out["launched"] == [{"group": "cpu", "replicas": 1, "why": ["1 to reach minReplicas 1"]}]


def test_lists_are_bounded_and_what_is_left_out_is_counted() -> None:
    many = Snapshot(
        groups=(GPU,), demands=tuple(Demand({"CPU": 1, f"r{i}": 1}) for i in range(MAX_ENTRIES + 7))
    )
    out = record_dict(record(many))
    assert len(out["demand"]) == len(out["unmet"]) == MAX_ENTRIES
    assert out["omitted"] == {"demand": 7, "unmet": 7}


def test_the_same_decision_on_the_same_demand_repeats_the_last_record() -> None:
    history = DecisionHistory()
    snapshot = busy_cluster()
    assert history.add(record(snapshot, trigger="pod", written=True))
    assert history.add(record(snapshot, T0 + timedelta(seconds=5), written=False))  # not written: new
    for i in range(2, 5):
        assert not history.add(record(snapshot, T0 + timedelta(seconds=5 * i)))
    assert len(history) == 2
    latest = record_dict(history.newest_first()[0])
    assert (latest["time"], latest["lastSeen"], latest["repeats"]) == (
        "2026-01-01T01:00:05Z",
        "2026-01-01T01:00:20Z",
        3,
    )
    fewer = Snapshot(groups=snapshot.groups, nodes=snapshot.nodes, demands=snapshot.demands[:1])
    assert history.add(record(fewer, T0 + timedelta(seconds=25)))  # other demand: a new record
    assert len(history) == 3


def test_a_hold_counts_by_kind_not_by_its_countdown() -> None:
    history = DecisionHistory()
    snapshot = Snapshot(groups=(CPU,), nodes=(Node("w", "cpu"),))
    grace = "Ray's GCS session changed (head restart): {}s of grace left"
    assert history.add(record(snapshot, held=grace.format(120)))
    assert not history.add(record(snapshot, held=grace.format(115)))
    assert history.add(record(snapshot, held="the head's raylet is not running in Ray's GCS"))
    assert history.add(record(snapshot))
    assert [r.held for r in history.newest_first()] == [
        None,
        "the head's raylet is not running in Ray's GCS",
        grace.format(120),
    ]


def test_the_history_is_bounded_and_only_the_newest_keep_their_scenario() -> None:
    history = DecisionHistory()
    for i in range(HISTORY_LIMIT + 10):
        snapshot = Snapshot(groups=(CPU,), demands=(Demand({"CPU": 1}, i + 1),))
        history.add(record(snapshot, T0 + timedelta(seconds=i)))
    records = history.newest_first()
    assert len(records) == HISTORY_LIMIT
    assert records[0].demand[0].count == HISTORY_LIMIT + 10
    assert [r.snapshot is not None for r in records] == [True] * SCENARIO_LIMIT + [False] * (
        HISTORY_LIMIT - SCENARIO_LIMIT
    )
    assert history.scenario(SCENARIO_LIMIT - 1) is not None
    assert history.scenario(SCENARIO_LIMIT) is None
    assert history.scenario(HISTORY_LIMIT) is None
    assert history.scenario(-1) is None


def test_the_scenario_of_a_record_replays_its_decision() -> None:
    """What `rayscale simulate --from-history` will read: through YAML, parse_scenario, schedule."""
    snapshot = busy_cluster()
    history = DecisionHistory()
    history.add(record(snapshot))
    doc = history.scenario(0)
    assert doc is not None
    parsed = parse_scenario(yaml.safe_load(yaml.safe_dump(doc)))
    assert parse_scenario(json.loads(json.dumps(doc))) == parsed
    assert schedule(parsed).to_dict() == schedule(snapshot).to_dict()
    assert [n.name for n in parsed.nodes] == [n.name for n in snapshot.nodes]  # unborn ones too
    assert (parsed.options, parsed.gangs, parsed.constraints) == (
        snapshot.options,
        snapshot.gangs,
        snapshot.constraints,
    )


def test_a_held_round_keeps_what_the_scheduler_saw() -> None:
    snapshot = busy_cluster()
    history = DecisionHistory()
    scheduled = held_snapshot(snapshot)
    history.add(decision_record(snapshot, schedule(scheduled), T0, held="held", scheduled=scheduled))
    doc = history.scenario(0)
    assert doc is not None
    parsed = parse_scenario(doc)
    assert all(n.idle_seconds == 0 and n.pending_seconds == 0 for n in parsed.nodes)
    assert schedule(parsed).to_dict() == schedule(scheduled).to_dict()


def test_rounds_that_change_nothing_repeat_whether_or_not_they_wrote() -> None:
    """A round that launched and removed nothing but wrote a patch (tidying workersToDelete once
    the pods went) is no new decision: it repeats the last one that changed nothing."""
    history = DecisionHistory()
    quiet = Snapshot(groups=(GPU,))
    assert history.add(record(quiet, trigger="pod", written=True))
    assert not history.add(record(quiet, T0 + timedelta(seconds=1), trigger="RayCluster", written=False))
    assert not history.add(record(quiet, T0 + timedelta(seconds=2), written=True))
    assert len(history) == 1
    assert record_dict(history.newest_first()[0])["repeats"] == 2
