"""The differential judge can fail both ways: broken decisions against recorded Ray answers.

No Ray and no scheduler here: tests/differential/recorded/*.json hold a case, Ray 2.60's answer
(and its answers to the allowlist's variants) and rayscale's decision at the time of recording.
Each deliberately broken copy of a decision must be caught; each allowlist entry must stop
excusing a broken copy of what it covers.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from tests.differential import allowlist, checks, mutate, recorded, runner, seed
from tests.differential.compare import Outcome, compare
from tests.differential.ray_case import to_ray
from tests.differential.replay import replay

from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import (
    Decision,
    DemandKind,
    Group,
    GroupDecision,
    Head,
    Node,
    NodeState,
    Options,
    Placement,
    PlacementTarget,
    Removal,
    RemovalCause,
    Snapshot,
    Strategy,
    Target,
)

ALLOWLIST_CASES = sorted(recorded.RECORDED.glob("allowlist-*.json"))


def _judged(outcome: Outcome, decision: Decision | None = None) -> tuple[set[str], list[str]]:
    """The kinds of failing differences (and their details) of ``decision`` in ``outcome``'s case."""
    other = Outcome(outcome.case_id, outcome.snapshot, decision or outcome.decision, outcome.ray)
    other.variants = outcome.variants
    other.differences = compare(other)
    failing, _ = runner.split(other, allowlist.load(), issues=[])  # known issues excuse nothing here
    return {d.kind for d in failing}, [d.detail for d in failing]


@pytest.fixture(scope="module")
def case() -> Outcome:
    return recorded.load(recorded.RECORDED / "mutations.json")


def test_the_recorded_decision_passes(case: Outcome) -> None:
    assert _judged(case) == (set(), [])


EXPECTED = {
    "drop all launches": "silent-drop",
    "drop one placement": "unaccounted-gang",
    "overfill a host": "placement-replay",
    "STRICT_SPREAD bundle onto a host that has one": "placement-replay",
    "launch one extra host": "more-hosts:CPU",
    "remove a busy node": "idle-only-rayscale",
}


@pytest.mark.parametrize("name", sorted(mutate.MUTATIONS))
def test_a_broken_decision_is_caught(case: Outcome, name: str) -> None:
    assert case.decision is not None
    broken = mutate.MUTATIONS[name](case.snapshot, case.decision)
    assert broken is not None, f"{name} does not apply to the recorded case"
    kinds, details = _judged(case, broken)
    assert EXPECTED[name] in kinds, (kinds, details)
    if name.startswith("STRICT_SPREAD"):
        assert any("STRICT_SPREAD" in d for d in details), details


def test_fewer_hosts_by_dropping_work_is_not_an_improvement(case: Outcome) -> None:
    """Launching nothing with the work left out of the placements and of the unmet list fails,
    though it uses fewer hosts than Ray."""
    assert case.decision is not None
    lazy = dataclasses.replace(
        case.decision,
        groups={k: dataclasses.replace(g, launch=0) for k, g in case.decision.groups.items()},
        placements=(),
    )
    kinds, _ = _judged(case, lazy)
    assert {"silent-drop", "unaccounted-demand", "unaccounted-gang"} <= kinds


@pytest.mark.parametrize("path", ALLOWLIST_CASES, ids=lambda p: p.stem)
def test_allowlist_entries_are_narrow(path: Path) -> None:
    """The recorded case passes only thanks to its entry (with the entries it builds on, if the
    case names any: they alone do not excuse it); a broken copy of the decision (one more host in
    any group, one placement less) fails."""
    case = recorded.load(path)
    entry = path.stem.removeprefix("allowlist-")
    companions = recorded.companions(path)
    assert case.decision is not None
    case.differences = compare(case)
    assert not runner.split(case, allowlist.load(), issues=[])[0]
    only = [e for e in allowlist.load() if e.id == entry or e.id in companions]
    assert not runner.split(case, only, issues=[])[0], f"{entry} alone does not excuse {path.name}"
    others = [e for e in allowlist.load() if e.id in companions]
    assert runner.split(case, others, issues=[])[0], f"{path.name} passes without {entry}"
    counts = checks.host_counts(case.snapshot, case.decision, case.ray)
    for g in case.snapshot.groups:
        # Enough more replicas of ``g`` to have more hosts of its kind than Ray.
        kind = checks.accelerator_kind(g)
        same = [h.name for h in case.snapshot.groups if checks.accelerator_kind(h) == kind]
        slack = max(0, sum(counts[n][1] - counts[n][0] for n in same))
        own = max(0, counts[g.name][1] - counts[g.name][0])
        more = max(1, -(-(slack + own + 1) // g.num_of_hosts))
        decided = case.decision.groups[g.name]
        if decided.replicas + more > g.max_replicas:
            continue
        groups = dict(case.decision.groups)
        groups[g.name] = dataclasses.replace(
            decided, launch=decided.launch + more, replicas=decided.replicas + more
        )
        kinds, _ = _judged(case, dataclasses.replace(case.decision, groups=groups))
        assert kinds, f"{entry} excuses {more} more replicas of {g.name}"
    if case.decision.placements:
        dropped = dataclasses.replace(case.decision, placements=case.decision.placements[1:])
        assert _judged(case, dropped)[0], f"{entry} excuses a dropped placement"


def test_the_churn_a_kept_cut_replica_saves_is_caught() -> None:
    """The recorded case's decision with the churn put back (the replica the cap cut removed and
    a new one of its group launched) fails, whatever the allowlist says."""
    case = recorded.load(recorded.RECORDED / "allowlist-cap-cut-replica-kept.json")
    churned = schedule(case.snapshot, keep_cut=False)
    assert churned != case.decision
    assert "cap-churn" in _judged(case, churned)[0]
    assert "cap-churn" not in _judged(case)[0]


# ----------------------------------------------------------------------------- the replay


def _decision(
    groups: dict[str, int], placements: tuple[Placement, ...], terminate: tuple[Removal, ...] = ()
) -> Decision:
    return Decision({k: GroupDecision(0, v, v, 0) for k, v in groups.items()}, terminate, (), placements)


def _demand(resources: dict[str, float], *targets: PlacementTarget) -> Placement:
    return Placement(DemandKind.DEMAND, resources, None, None, (), sum(t.count for t in targets), targets)


TPU = Group("tpu", {"TPU": 4.0, "TPU-v6e-8-head": 1.0}, num_of_hosts=2)
SLICE = (  # host 0 of the replica is tpu-r0-b: the snapshot lists a replica's hosts in host order
    Node("tpu-r0-b", "tpu", NodeState.RUNNING, replica="tpu-r0"),
    Node("tpu-r0-a", "tpu", NodeState.RUNNING, replica="tpu-r0"),
)


def test_replay_puts_the_slice_head_on_host_0_only() -> None:
    snap = Snapshot(groups=(TPU,), nodes=SLICE, head=Head({}))
    head = {"TPU-v6e-8-head": 1.0}
    on_0 = _demand(head, PlacementTarget("tpu", Target.RUNNING, 1, ("tpu-r0-b",)))
    on_1 = _demand(head, PlacementTarget("tpu", Target.RUNNING, 1, ("tpu-r0-a",)))
    assert list(replay(snap, _decision({}, (on_0,)))) == []
    assert list(replay(snap, _decision({}, (on_1,))))
    two_new = _demand(head, PlacementTarget("tpu", Target.NEW, 2))
    assert list(replay(snap, _decision({"tpu": 1}, (two_new,))))  # one head per new replica
    assert list(replay(snap, _decision({"tpu": 2}, (two_new,)))) == []


def test_replay_refuses_draining_removed_and_unknown_hosts() -> None:
    group = Group("cpu", {"CPU": 4.0})
    nodes = (
        Node("cpu-0", "cpu", NodeState.DRAINING, available={"CPU": 2.0}),
        Node("cpu-1", "cpu", NodeState.RUNNING, idle_seconds=100.0),
    )
    snap = Snapshot(groups=(group,), nodes=nodes, head=Head({}))
    one = {"CPU": 1.0}
    draining = _demand(one, PlacementTarget("cpu", Target.RUNNING, 1, ("cpu-0",)))
    assert any("draining" in why for why in replay(snap, _decision({}, (draining,))))
    removed = _demand(one, PlacementTarget("cpu", Target.RUNNING, 1, ("cpu-1",)))
    gone = (Removal("cpu-1", "cpu", RemovalCause.IDLE),)
    assert any("removes it" in why for why in replay(snap, _decision({}, (removed,), gone)))
    unknown = _demand(one, PlacementTarget("cpu", Target.RUNNING, 1, ("cpu-9",)))
    assert list(replay(snap, _decision({}, (unknown,))))


def test_replay_keeps_strict_pack_on_one_host() -> None:
    group = Group("cpu", {"CPU": 4.0})
    snap = Snapshot(groups=(group,), head=Head({}))
    bundles = ({"CPU": 3.0}, {"CPU": 3.0})
    pack = Placement(
        DemandKind.GANG, None, bundles, Strategy.STRICT_PACK, (), 1, (PlacementTarget("cpu", Target.NEW, 1),)
    )
    assert list(replay(snap, _decision({"cpu": 2}, (pack,))))  # 6 CPUs on one 4-CPU host
    spread = dataclasses.replace(
        pack, strategy=Strategy.STRICT_SPREAD, targets=(PlacementTarget("cpu", Target.NEW, 2),)
    )
    assert list(replay(snap, _decision({"cpu": 2}, (spread,)))) == []
    assert list(replay(snap, _decision({"cpu": 1}, (spread,))))


# ----------------------------------------------------------------------------- what Ray is fed


def test_ray_is_fed_failed_launches_and_per_host_slice_heads() -> None:
    stuck = Node("cpu-0", "cpu", NodeState.PENDING, pending_seconds=1000.0)
    booting = Node("cpu-1", "cpu", NodeState.PENDING, pending_seconds=1000.0, booting=True)
    snap = Snapshot(
        groups=(Group("cpu", {"CPU": 1.0}), TPU),
        nodes=(stuck, booting, *SLICE),
        options=Options(),
        head=Head({}),
    )
    doc = to_ray("t", snap)
    status = {i["name"]: i["status"] for i in doc["instances"]}
    assert status["cpu-0"] == "ALLOCATION_TIMEOUT"
    assert status["cpu-1"] == "ALLOCATED"  # the boot limit (3600 s) is not reached
    totals = {i["name"]: i["ray"]["total"] for i in doc["instances"] if i["ray"]}
    assert totals["tpu-r0-b"]["TPU-v6e-8-head"] == 1.0
    assert "TPU-v6e-8-head" not in totals["tpu-r0-a"]
    tpu_type = next(t for t in doc["node_types"] if t["name"] == "tpu")
    assert tpu_type["resources"]["TPU-v6e-8-head"] == 1.0  # KubeRay's config: every host, as Ray reads it


def test_a_busy_draining_host_stays_and_is_not_counted() -> None:
    group = Group("cpu", {"CPU": 4.0})
    busy = Node("cpu-0", "cpu", NodeState.DRAINING, available={"CPU": 1.0})
    snap = Snapshot(groups=(group,), nodes=(busy,), head=Head({}))
    ray: dict[str, Any] = {"launch": {}, "terminate": []}
    removed = _decision({}, (), (Removal("cpu-0", "cpu", RemovalCause.DRAINED),))
    assert [d.kind for d in checks.judge(snap, removed, ray)] == ["removes-busy-draining"]
    assert checks.host_counts(snap, _decision({}, ()), ray) == {"cpu": (0, 0)}


# ----------------------------------------------------------------------------- the seed


def test_the_seed_follows_the_commit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RAYSCALE_DIFF_SEED", raising=False)
    here = seed.commit_seed()
    assert here == seed.commit_seed()
    monkeypatch.setattr(seed, "ROOT", tmp_path)  # not a git checkout
    assert seed.commit_seed() == seed.FALLBACK
    monkeypatch.setenv("RAYSCALE_DIFF_SEED", "17")
    assert seed.commit_seed() == 17
