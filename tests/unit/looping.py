"""Waiting inside unit tests without sleeping: let the event loop run until something holds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(predicate: Callable[[], bool], *, turns: int = 1000) -> None:
    """Yield to the loop until `predicate` holds (bounded: fails instead of hanging)."""
    for _ in range(turns):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")
