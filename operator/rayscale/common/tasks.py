"""Ending asyncio tasks: cancel, then wait until each has ended."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel every task first (so that none waits on another still running), then wait for each to
    end; its CancelledError is swallowed, any other exception it ends with raised."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
