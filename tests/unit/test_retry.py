"""Failed runs back off per key: the schedule (1 s doubling to 5 min, jitter, Retry-After), and the
work queue holding a failing key back while other keys run, under a virtual clock."""

from __future__ import annotations

import itertools
import random

import pytest
from tests.support.fakes import ManualClock

from rayscale.common.retry import CAP_SECONDS, RetryBackoff, delay_after, spec_version
from rayscale.kube.ops import retry_after


def test_the_schedule_doubles_from_one_second_to_five_minutes() -> None:
    nominal = [delay_after(n, base=1.0, cap=CAP_SECONDS, jitter=0.2, draw=0.0) for n in range(1, 13)]
    assert nominal == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
    assert delay_after(10_000, base=1.0, cap=CAP_SECONDS, jitter=0.2, draw=0.0) == 300  # no overflow


def test_jitter_only_shortens_and_each_wait_is_longer_than_the_last() -> None:
    rng = random.Random(7)
    for _ in range(200):
        waits = [delay_after(n, base=1.0, cap=300.0, jitter=0.2, draw=rng.random()) for n in range(1, 10)]
        assert all(0.8 * 2 ** (n - 1) <= w <= 2 ** (n - 1) for n, w in enumerate(waits, 1))
        assert all(later > earlier for earlier, later in itertools.pairwise(waits))


def test_backoff_per_key_reset_on_success_and_retry_after_honoured() -> None:
    clock = ManualClock()
    backoff: RetryBackoff[str] = RetryBackoff(clock=clock, rng=lambda: 0.0)
    waits = []
    for _ in range(4):  # each run comes when its wait is over
        waits.append(backoff.failed("bad"))
        clock.now += waits[-1]
    assert waits == [1, 2, 4, 8]
    clock.now -= 8
    assert backoff.remaining("bad") == 8
    assert backoff.remaining("good") == 0
    clock.now += 5
    assert backoff.remaining("bad") == 3
    assert backoff.failed("bad", retry_after=60.0) == 60  # the server's Retry-After wins when longer
    clock.now += 20
    assert backoff.failed("bad", retry_after=1.0) == 32  # and never shortens the backoff
    assert len(backoff) == 1
    backoff.expire("bad")  # run now, the count kept
    assert backoff.remaining("bad") == 0
    assert backoff.failures("bad") == 6
    assert backoff.succeeded("bad") == 6
    assert backoff.failures("bad") == 0
    assert len(backoff) == 0
    assert backoff.failed("bad") == 1  # starts over
    with pytest.raises(ValueError, match="base <= cap"):
        RetryBackoff(base=10, cap=1)


def test_a_wait_is_never_longer_than_twice_the_time_the_key_has_been_failing() -> None:
    """Runs made at once (spec edits during a fault) add failures by the second: the wait after
    the fault stays bounded by how long the failures lasted, not by how many there were."""
    clock = ManualClock()
    backoff: RetryBackoff[str] = RetryBackoff(clock=clock, rng=lambda: 0.0)
    waits = []
    for _ in range(20):  # 20 s of a failing API server, a run every second (an edit each time)
        waits.append(backoff.failed("edited"))
        clock.now += 1.0
    assert backoff.failures("edited") == 20
    assert waits[:3] == [1, 2, 4]
    assert max(waits) <= 2 * 19  # not 2**19 capped to 300 s
    assert waits[-1] == 2 * 19
    clock.now += 200  # failing for minutes: the schedule's own cap again
    assert backoff.failed("edited") == CAP_SECONDS
    backoff.succeeded("edited")
    assert backoff.failed("edited") == 1  # a new streak starts from its own first failure


def test_retry_after_header() -> None:
    assert retry_after({"Retry-After": "3"}) == 3
    assert retry_after({"Retry-After": "-3"}) == 0
    assert retry_after({"Retry-After": "inf"}) is None
    assert retry_after({"Retry-After": "soon"}) is None
    assert retry_after(None) is None
    from datetime import UTC, datetime

    now = datetime(2015, 10, 21, 7, 27, 30, tzinfo=UTC)
    assert retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, now) == 30


def test_spec_version_is_generation_and_deletion() -> None:
    body = {"metadata": {"generation": 3}}
    assert spec_version(body) == (3, False)
    assert spec_version({"metadata": {"generation": 3, "deletionTimestamp": "x"}}) == (3, True)
    assert spec_version(None) is None
