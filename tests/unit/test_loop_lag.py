"""The event loop's lag: measured as a sleep's overshoot, logged at most once a minute."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry, Histogram

from rayscale import loop_lag
from rayscale.loop_lag import EVERY, LOG_EVERY, WARN_SECONDS, LagLog, watch_lag


def test_no_line_while_the_loop_keeps_up() -> None:
    lines = LagLog()
    assert [lines.saw(0.01, t) for t in range(10)] == [None] * 10


def test_the_first_late_measurement_is_logged_then_one_line_a_minute_with_the_worst() -> None:
    lines = LagLog()
    first = lines.saw(WARN_SECONDS + 0.5, 100.0)
    assert first is not None
    assert "1 measurement(s)" in first
    assert f"{WARN_SECONDS + 0.5:.1f} s" in first
    assert lines.saw(WARN_SECONDS + 3.0, 101.0) is None
    assert lines.saw(WARN_SECONDS + 1.0, 102.0) is None
    assert lines.saw(0.0, 100.0 + LOG_EVERY - 1) is None
    later = lines.saw(0.0, 100.0 + LOG_EVERY)
    assert later is not None
    assert "2 measurement(s)" in later
    assert f"{WARN_SECONDS + 3.0:.1f} s" in later
    assert lines.saw(0.0, 100.0 + 3 * LOG_EVERY) is None  # nothing late since: no line


def test_a_lag_just_under_the_threshold_is_not_logged() -> None:
    assert LagLog().saw(WARN_SECONDS - 0.01, 0.0) is None


async def test_watch_lag_observes_each_sleeps_overshoot_and_logs_a_late_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CollectorRegistry()
    histogram = Histogram("lag_seconds", "test", registry=registry, buckets=(0.1, 1.0, 10.0))
    now = [0.0]
    overshoots = iter([0.0, 0.05, WARN_SECONDS + 2.0])

    def clock() -> float:
        return now[0]

    async def sleep(seconds: float) -> None:
        assert seconds == EVERY
        try:
            now[0] += seconds + next(overshoots)
        except StopIteration:
            raise asyncio.CancelledError from None

    with caplog.at_level("WARNING", logger=loop_lag.__name__), pytest.raises(asyncio.CancelledError):
        await watch_lag(histogram, clock=clock, sleep=sleep)
    assert registry.get_sample_value("lag_seconds_count") == 3
    assert registry.get_sample_value("lag_seconds_bucket", {"le": "0.1"}) == 2
    assert registry.get_sample_value("lag_seconds_sum") == pytest.approx(WARN_SECONDS + 2.05)
    assert [r.getMessage() for r in caplog.records if "event loop" in r.getMessage()] != []
