"""Scale expectations under virtual time (with the KubeRay #4078 fix)."""

from __future__ import annotations

from tests.support.builders import pod
from tests.support.fakes import ManualClock

from rayscale.controller.expectations import ScaleExpectations

KEY = ("ns", "rc", "small")
EPOCH_2026 = 1767225600.0  # 2026-01-01T00:00:00Z


def test_create_met_when_visible() -> None:
    exp = ScaleExpectations(clock=ManualClock(EPOCH_2026))
    exp.expect(KEY, "a", "create")
    assert not exp.satisfied(KEY, {})
    assert exp.satisfied(KEY, {"a": pod("a")})
    assert exp.pending(KEY) == 0


def test_create_met_after_30_seconds() -> None:
    clock = ManualClock(EPOCH_2026)
    exp = ScaleExpectations(clock=clock)
    exp.expect(KEY, "a", "create")
    clock.now += 29.9
    assert not exp.satisfied(KEY, {})
    assert exp.next_deadline(KEY) is not None
    clock.now += 0.1
    assert exp.satisfied(KEY, {})


def test_delete_met_only_when_gone() -> None:
    clock = ManualClock(EPOCH_2026)
    exp = ScaleExpectations(clock=clock)
    exp.expect(KEY, "a", "delete")
    terminating = pod("a", deleting="2026-01-01T00:00:30Z")
    clock.now += 300
    assert not exp.satisfied(KEY, {"a": terminating})
    assert exp.satisfied(KEY, {})


def test_stuck_terminating_pod_stops_blocking() -> None:
    clock = ManualClock(EPOCH_2026)
    exp = ScaleExpectations(clock=clock, stuck_after=600)
    exp.expect(KEY, "a", "delete")
    stuck = pod("a", deleting="2026-01-01T00:00:30Z")  # grace period ends 30 s in
    clock.now += 30 + 600
    assert not exp.is_stuck(stuck)
    assert not exp.satisfied(KEY, {"a": stuck})
    clock.now += 1
    assert exp.is_stuck(stuck)
    assert exp.satisfied(KEY, {"a": stuck})


def test_groups_independent_and_forget_cluster() -> None:
    exp = ScaleExpectations(clock=ManualClock(EPOCH_2026))
    exp.expect(KEY, "a", "create")
    other = ("ns", "rc", "other")
    assert exp.satisfied(other, {})
    exp.forget_cluster("ns", "rc")
    assert exp.satisfied(KEY, {})
