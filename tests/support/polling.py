"""Waiting in tests. Integration and e2e tests poll with a deadline (`eventually`), the only way they
wait; unit tests let the event loop run until something holds, without sleeping (`until`)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
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
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = check()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
            last = value
        except AssertionError as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise Timeout(f"not true after {timeout:.0f}s: {message or check!r}; last: {last!r}")
        await asyncio.sleep(interval)


async def until(predicate: Callable[[], bool], *, turns: int = 1000) -> None:
    """Yield to the loop until `predicate` holds (bounded: fails instead of hanging)."""
    for _ in range(turns):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")
