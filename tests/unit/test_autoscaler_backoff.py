"""Backoff arithmetic under a virtual clock."""

from __future__ import annotations

import pytest
from tests.support.fakes import ManualClock

from rayscale.autoscaler.backoff import Backoff


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def test_no_failure_no_backoff(clock: ManualClock) -> None:
    b = Backoff(clock)
    assert not b.backing_off("gpu")
    assert b.remaining("gpu") == 0
    assert b.active() == frozenset()


def test_first_failure_backs_off_five_minutes(clock: ManualClock) -> None:
    b = Backoff(clock)
    entry = b.failed("gpu")
    assert entry.duration == 300
    assert entry.until == 1300
    assert b.active() == {"gpu"}
    clock.now += 299
    assert b.remaining("gpu") == pytest.approx(1)
    clock.now += 1
    assert not b.backing_off("gpu")
    assert b.active() == frozenset()


def test_doubles_to_thirty_minutes(clock: ManualClock) -> None:
    b = Backoff(clock)
    durations = []
    for _ in range(6):
        entry = b.failed("gpu")
        durations.append(entry.duration)
        clock.now = entry.until + 60  # fails again a minute after each backoff ends
    assert durations == [300, 600, 1200, 1800, 1800, 1800]


def test_resets_after_three_healthy_hours(clock: ManualClock) -> None:
    b = Backoff(clock)
    b.failed("gpu")
    entry = b.failed("gpu")
    assert entry.duration == 600
    clock.now = entry.until + 3 * 3600 - 1
    entry = b.failed("gpu")
    assert entry.duration == 1200  # not healthy long enough
    clock.now = entry.until + 3 * 3600
    assert b.failed("gpu").duration == 300


def test_groups_are_independent_and_forgettable(clock: ManualClock) -> None:
    b = Backoff(clock)
    b.failed("gpu")
    b.failed("gpu")
    b.failed("tpu")
    assert b.active() == {"gpu", "tpu"}
    b.forget("gpu")
    assert b.active() == {"tpu"}
    assert b.failed("gpu").duration == 300


def test_custom_limits(clock: ManualClock) -> None:
    b = Backoff(clock, initial=1, maximum=3, reset_after=10)
    assert [b.failed("g").duration for _ in range(4)] == [1, 2, 3, 3]
