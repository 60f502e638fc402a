"""Waiting in tests: the only way the tests, e2e and their helpers wait.

Integration and e2e tests poll with a deadline: `eventually` (async) or `eventually_sync` (where there
is no event loop: a thread, /proc, a subprocess); `holds` polls that something keeps holding for a
while (what must not happen, doesn't). Unit tests let the event loop run until something holds,
without sleeping (`until`), or for a number of turns before they say what has not happened
(`turns`)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Literal, TypeVar, overload

T = TypeVar("T")


class Timeout(AssertionError):
    pass


# `check` returns what it waits for, or something falsy (None, False) until then.
@overload
async def eventually(
    check: Callable[[], Awaitable[T | Literal[False] | None]],
    *,
    timeout: float = ...,  # noqa: ASYNC109
    interval: float = ...,
    message: str = ...,
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T | Literal[False] | None],
    *,
    timeout: float = ...,  # noqa: ASYNC109
    interval: float = ...,
    message: str = ...,
) -> T: ...


async def eventually(
    check: Callable[[], object],
    *,
    timeout: float = 30,  # noqa: ASYNC109 (a deadline per call is the point)
    interval: float = 0.2,
    message: str = "",
) -> object:
    """Call `check` until it returns something truthy (and does not raise AssertionError).

    Returns that value. On timeout, raises with `message` and the last value or error,
    so a failing test says what it was waiting for and what it saw instead.
    """
    for turn in _turns(check, timeout, message):
        try:
            value = check()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
            turn.last = value
        except AssertionError as exc:
            turn.last = exc
        await asyncio.sleep(interval)
    raise AssertionError("unreachable")  # _turns raises Timeout at the deadline


def eventually_sync(
    check: Callable[[], T | Literal[False] | None],
    *,
    timeout: float = 30,
    interval: float = 0.2,
    message: str = "",
) -> T:
    """`eventually` for code without an event loop (a thread, /proc, a subprocess): blocks."""
    for turn in _turns(check, timeout, message):
        try:
            value = check()
            if value:
                return value
            turn.last = value
        except AssertionError as exc:
            turn.last = exc
        time.sleep(interval)
    raise AssertionError("unreachable")


async def holds(
    check: Callable[[], Awaitable[object] | object],
    *,
    seconds: float,
    interval: float = 0.5,
    message: str = "",
) -> None:
    """`check` stays truthy (and raises no AssertionError) for `seconds`, polled every `interval`:
    what must not happen, doesn't. Fails at the first poll that sees it happen."""
    until_ = time.monotonic() + seconds
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if not value:
            raise AssertionError(f"no longer true: {message or check!r}; saw {value!r}")
        if time.monotonic() >= until_:
            return
        await asyncio.sleep(interval)


class _Turn:
    last: object = None


def _turns(check: object, timeout: float, message: str) -> Iterator[_Turn]:
    """One turn per try until the deadline; then Timeout, with the last value or error seen."""
    deadline = time.monotonic() + timeout
    turn = _Turn()
    while True:
        yield turn
        if time.monotonic() >= deadline:
            raise Timeout(f"not true after {timeout:.0f}s: {message or check!r}; last: {turn.last!r}")


async def turns(count: int = 20) -> None:
    """Let the loop run `count` turns: what a unit test then says has not happened was given the
    chance to (no sleep, no clock)."""
    for _ in range(count):
        await asyncio.sleep(0)


async def until(predicate: Callable[[], bool], *, turns: int = 1000) -> None:
    """Yield to the loop until `predicate` holds (bounded: fails instead of hanging)."""
    for _ in range(turns):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")
