"""The tests' one way to wait (tests/support/polling.py): what it returns, and how it fails."""

from __future__ import annotations

import itertools

import pytest
from tests.support.polling import Timeout, eventually, eventually_sync, holds


def test_eventually_sync_returns_the_first_truthy_value() -> None:
    counter = itertools.count()
    assert eventually_sync(lambda: next(counter) >= 3 and "done", timeout=5, interval=0) == "done"


def test_eventually_sync_times_out_with_the_last_value_and_the_message() -> None:
    with pytest.raises(Timeout, match=r"not true after 0s: 'the thing'; last: 0"):
        eventually_sync(lambda: 0, timeout=0, interval=0, message="the thing")


def test_eventually_sync_retries_an_assertion_and_reports_it() -> None:
    def check() -> bool:
        raise AssertionError("not yet")

    with pytest.raises(Timeout, match="not yet"):
        eventually_sync(check, timeout=0, interval=0)


async def test_eventually_awaits_a_coroutine_check() -> None:
    counter = itertools.count()

    async def check() -> int | None:
        n = next(counter)
        return n if n >= 2 else None

    assert await eventually(check, timeout=5, interval=0) == 2


async def test_holds_passes_while_the_check_stays_true() -> None:
    calls = itertools.count()
    await holds(lambda: next(calls) >= 0, seconds=0, interval=0)


async def test_holds_fails_at_the_first_poll_that_sees_it_change() -> None:
    values = iter([True, True, False])

    async def check() -> bool:
        return next(values)

    with pytest.raises(AssertionError, match="no longer true: 'nothing launches'; saw False"):
        await holds(check, seconds=60, interval=0, message="nothing launches")
