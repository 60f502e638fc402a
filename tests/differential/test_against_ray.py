"""rayscale's scheduler judged by Ray 2.60's on generated cases (Ray runs in a subprocess).

``make unit`` runs a bounded number of cases (``RAYSCALE_DIFF_CASES``, default 400) with a seed
that changes per commit (``seed.commit_seed``; ``RAYSCALE_DIFF_SEED`` overrides it), printed on
failure with the command that replays it; ``make fuzz`` runs 20,000 with every generator
feature. A difference that no allowlist entry explains fails with the shrunk case written to
tests/differential/failures/ and replayable with ``rayscale simulate``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rayscale.autoscaler.scheduling.model import (
    Decision,
    Demand,
    DemandKind,
    Gang,
    Group,
    GroupDecision,
    Head,
    LabelConstraint,
    LabelOp,
    Node,
    NodeState,
    PlacementTarget,
    Removal,
    RemovalCause,
    Snapshot,
    Strategy,
    Target,
    Unmet,
    UnmetReason,
)
from tests.differential import allowlist, generate, runner, scenario_io, shrink
from tests.differential.compare import Outcome, compare
from tests.differential.oracle import Oracle, ray_available, ray_python
from tests.differential.ray_case import to_ray
from tests.differential.seed import commit_seed

CASES = int(os.environ.get("RAYSCALE_DIFF_CASES", "400"))
SEED = commit_seed()
FAILURES = Path(__file__).resolve().parent / "failures"  # this checkout's runs (not committed)
FOUND = Path(__file__).resolve().parent / "found"  # differences found and recorded (committed)
FIXED = Path(__file__).resolve().parent / "fixed"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "autoscaling.md"


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    if not ray_available():
        pytest.fail(
            f"{ray_python()} has no ray==2.60.0 (the dev extra installs it; or set RAYSCALE_RAY_PYTHON)"
        )
    with Oracle() as o:
        yield o


def _one(oracle: Oracle, snap: Snapshot) -> Outcome:
    return runner.evaluate(oracle, [("t", snap)])[0]


# ----------------------------------------------------------------------------- the judge


def test_generated_cases_match_ray(oracle: Oracle) -> None:
    report = runner.run(oracle, SEED, CASES, shrink_per_kind=1, shrink_seconds=30.0)
    assert report.cases == CASES
    print(f"differential: seed {SEED}, {report.cases} cases; replay: {report.replay_command()}")
    if report.by_kind:
        pytest.fail("rayscale differs from Ray:\n" + report.summary(), pytrace=False)


# ----------------------------------------------------------------------------- the harness can fail


def test_oracle_answers_like_ray(oracle: Oracle) -> None:
    """Known Ray behaviour through the oracle: 3 x 1-CPU tasks on 1-CPU nodes launch 3 nodes."""
    snap = Snapshot(groups=(Group("cpu", {"CPU": 1.0}),), demands=(Demand({"CPU": 1.0}, 3),), head=Head({}))
    answer = oracle.ask([to_ray("t", snap)])[0]
    assert answer["error"] is None
    assert answer["launch"] == {"cpu": 3}
    assert answer["infeasible_demands"] == [0]


def test_oracle_sees_strict_pack_split_by_selectors(oracle: Oracle) -> None:
    """Ray merges STRICT_PACK bundles only when their selectors are equal (an allowlist entry)."""
    group = Group("g", {"CPU": 1.0}, labels={"zone": "a"})
    sel = (LabelConstraint("zone", LabelOp.IN, ("a",)),)
    gang = Gang(Strategy.STRICT_PACK, ({"CPU": 1.0}, {"CPU": 1.0}), 1, (sel, ()))
    outcome = _one(oracle, Snapshot(groups=(group,), gangs=(gang,), head=Head({})))
    assert outcome.ray["launch"] == {"g": 2}  # two 1-CPU nodes for a pack that needs one 2-CPU node
    assert outcome.ray["infeasible_pgs"] == []
    kinds = {d.kind for d in outcome.differences}
    assert "unplaced-gang" in kinds
    _, allowed = runner.split(outcome, allowlist.load())
    assert [entry for entry, _ in allowed] == ["strict-pack-split-by-selectors"]


def test_compare_catches_unplaced_work_and_extra_hosts(oracle: Oracle) -> None:
    """A decision that leaves work Ray places, or launches more than Ray, is a difference."""
    snap = Snapshot(groups=(Group("cpu", {"CPU": 4.0}),), demands=(Demand({"CPU": 1.0}, 2),), head=Head({}))
    outcome = _one(oracle, snap)
    assert outcome.differences == []
    assert outcome.decision is not None
    lazy = Decision(
        groups={"cpu": GroupDecision(current=0, replicas=0, launch=0, terminate=0)},
        terminate=(),
        unmet=(Unmet(DemandKind.DEMAND, {"CPU": 1.0}, None, None, (), 2, UnmetReason.MAX_REPLICAS),),
        placements=(),
    )
    kinds = {d.kind for d in compare(Outcome("t", snap, lazy, outcome.ray))}
    assert kinds == {"unplaced-demand"}
    greedy = Decision(
        groups={"cpu": GroupDecision(current=0, replicas=3, launch=3, terminate=0)},
        terminate=(),
        unmet=(),
        placements=(),
    )
    assert {d.kind for d in compare(Outcome("t", snap, greedy, outcome.ray))} == {
        "more-hosts:CPU",
        "unaccounted-demand",
    }


def test_compare_catches_a_different_idle_removal(oracle: Oracle) -> None:
    group = Group("cpu", {"CPU": 4.0})
    nodes = (
        Node("cpu-0", "cpu", NodeState.RUNNING, idle_seconds=600.0),
        Node("cpu-1", "cpu", NodeState.RUNNING, idle_seconds=5.0),
    )
    snap = Snapshot(groups=(group,), nodes=nodes, head=Head({}))
    outcome = _one(oracle, snap)
    assert [t["instance"] for t in outcome.ray["terminate"]] == ["cpu-0"]
    assert outcome.differences == []
    assert outcome.decision is not None
    keep_all = Decision(groups=outcome.decision.groups, terminate=(), unmet=(), placements=())
    kinds = {d.kind for d in compare(Outcome("t", snap, keep_all, outcome.ray))}
    assert kinds == {"idle-only-ray", "more-hosts:CPU"}


def test_cap_keeps_minimum_keeps_only_the_minimum(oracle: Oracle) -> None:
    """Ray's cap cuts a pending host of a group at its minimum and idles two hosts of another;
    rayscale's cap takes that group's pending host instead and keeps one running host as its
    minimum (excused); keeping a second idle host above the minimum is not."""
    snap = scenario_io.read(FIXED / "idle-only-ray-s845603366-205.yaml")
    outcome = _one(oracle, snap)
    assert outcome.decision is not None
    _, allowed = runner.split(outcome, allowlist.load())
    assert "cap-keeps-minimum" in [entry for entry, _ in allowed]
    gamma = outcome.decision.groups["gamma"]
    two = GroupDecision(gamma.current, gamma.replicas + 1, 0, gamma.terminate - 1)
    more = dict(outcome.decision.groups, gamma=two)
    keep = Decision(
        groups=more,
        terminate=tuple(r for r in outcome.decision.terminate if r.reason is not RemovalCause.IDLE),
        unmet=outcome.decision.unmet,
        placements=outcome.decision.placements,
    )
    kept = Outcome("t", snap, keep, outcome.ray)
    kept.differences = compare(kept)
    failing, _ = runner.split(kept, allowlist.load())
    kinds = {(d.kind, d.subject) for d in failing}
    assert kinds >= {("idle-only-ray", "gamma-0"), ("idle-only-ray", "gamma-2")}


def _failing(outcome: Outcome, decision: Decision, entries: list[allowlist.Entry]) -> set[str]:
    other = Outcome(outcome.case_id, outcome.snapshot, decision, outcome.ray)
    other.differences = compare(other)
    return {d.kind for d in runner.split(other, entries, issues=[])[0]}


def test_cap_keeps_minimum_launches_only_into_the_whole_replicas_room(oracle: Oracle) -> None:
    """Ray's cap cuts alpha-0, the minimum; rayscale keeps it, takes the surplus host as a whole
    two-host beta replica and launches an alpha host for the demand into the room left (excused
    by cap-keeps-minimum alone). One more alpha host, or cutting the other beta replica too to
    launch alpha hosts in its place, is not."""
    snap = scenario_io.read(FIXED / "more-hosts-CPU-s1682659306-57.yaml")
    outcome = _one(oracle, snap)
    decision = outcome.decision
    assert decision is not None
    entries = allowlist.load()
    assert _failing(outcome, decision, entries) == set()
    assert "more-hosts:CPU" in _failing(
        outcome, decision, [e for e in entries if e.id != "cap-keeps-minimum"]
    )
    alpha = decision.groups["alpha"]
    assert (alpha.launch, [r.replica for r in decision.terminate]) == (1, ["beta-r0", "beta-r0"])
    one_more = dict(decision.groups, alpha=GroupDecision(alpha.current, alpha.replicas + 1, 2, 0))
    assert "more-hosts:CPU" in _failing(outcome, dataclasses.replace(decision, groups=one_more), entries)
    # Both beta replicas cut, their work on three new alpha hosts: as many hosts as Ray, not a rounding.
    beta = decision.groups["beta"]
    cut_all = dataclasses.replace(
        decision,
        groups={
            "alpha": GroupDecision(alpha.current, alpha.replicas + 2, 3, 0),
            "beta": GroupDecision(beta.current, 0, 0, 2),
        },
        terminate=tuple(
            Removal(n.name, "beta", RemovalCause.MAX_WORKERS, n.replica)
            for n in snap.nodes
            if n.group == "beta"
        ),
        placements=tuple(
            dataclasses.replace(
                p,
                targets=(
                    PlacementTarget("alpha", Target.RUNNING, 1, ("alpha-0",)),
                    PlacementTarget("alpha", Target.NEW, p.count - 1),
                ),
            )
            for p in decision.placements
        ),
    )
    assert "more-hosts:CPU" in _failing(outcome, cut_all, entries)


# ----------------------------------------------------------------------------- generator, shrinker, files


def test_generator_is_deterministic_and_valid() -> None:
    for i in range(50):
        a, b = generate.case(7, i), generate.case(7, i)
        assert a == b
        assert shrink.valid(a), i
        assert scenario_io.roundtrip(a) is None, i
    assert generate.case(7, 1) != generate.case(8, 1)


def test_shrink_finds_a_small_case() -> None:
    big = next(s for i in range(200) if len((s := generate.case(3, i)).gangs) and len(s.nodes) > 2)

    def has_gang(snaps: list[Snapshot]) -> list[bool]:
        return [bool(s.gangs) for s in snaps]

    small, tried = shrink.shrink(big, has_gang)
    assert tried > 0
    assert [(g.count, len(g.bundles)) for g in small.gangs] == [(1, 1)]
    assert (small.nodes, small.demands, len(small.groups)) == ((), (), 1)


def test_failure_file_replays(tmp_path: Path) -> None:
    snap = generate.case(5, 3)
    path = tmp_path / "case.yaml"
    scenario_io.write(path, snap, "what differed\nsecond line")
    assert path.read_text(encoding="utf-8").startswith("# what differed\n# second line\n")
    assert runner.replay(path, snap) is None


def test_recorded_failures_replay() -> None:
    """The shrunk cases of differences found (none may be open) stay readable by `rayscale
    simulate`, with Ray's answer recorded beside them."""
    paths = sorted([*FOUND.glob("*.yaml"), *FAILURES.glob("*.yaml")])
    assert runner.replay_all(paths) == dict.fromkeys(paths)
    for path in paths:
        case_id, ray = scenario_io.read_answer(path)
        assert case_id, path
        assert "launch" in ray, path


@pytest.mark.parametrize("path", sorted(FIXED.glob("*.yaml")), ids=lambda p: p.stem)
def test_fixed_differences_match_ray(oracle: Oracle, path: Path) -> None:
    """Differences found and fixed earlier stay fixed: the shrunk case agrees with Ray."""
    snap = scenario_io.read(path)
    failing, _ = runner.split(_one(oracle, snap), allowlist.load())
    assert not failing, [d.detail for d in failing]


# ----------------------------------------------------------------------------- the allowlist


def test_allowlist_entries_have_predicates() -> None:
    ids = [e.id for e in allowlist.load()]
    assert len(ids) == len(set(ids))
    assert set(ids) == set(allowlist.PREDICATES)
    assert all(e.reason and "\n" not in e.reason for e in allowlist.load())


def test_docs_show_the_allowlist() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert allowlist.docs_section(text, allowlist.load()) == text, (
        "docs/autoscaling.md does not show tests/differential/allowlist.yaml; run "
        "`python -m tests.differential --write-docs`"
    )
