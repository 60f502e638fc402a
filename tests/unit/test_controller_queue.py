"""The per-cluster work queue: one run per key at a time, marks coalesce, keys run in parallel."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rayscale.controller.queue import WorkQueue


async def _until(predicate: Callable[[], bool]) -> None:
    """Let the loop run until `predicate` holds (bounded: fails instead of hanging)."""
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def test_marks_coalesce_and_a_key_never_runs_twice_at_once() -> None:
    running: set[str] = set()
    runs: list[str] = []
    overlap = False
    release = asyncio.Event()

    async def work(key: str) -> float | None:
        nonlocal overlap
        overlap = overlap or key in running
        running.add(key)
        runs.append(key)
        await release.wait()
        running.discard(key)
        return None

    queue: WorkQueue[str] = WorkQueue(work, concurrency=4)
    task = asyncio.create_task(queue.run())
    queue.mark("a")
    queue.mark("a")
    queue.mark("b")
    await _until(lambda: len(runs) >= 2)
    assert sorted(runs) == ["a", "b"]  # a and b in parallel, the second mark of a coalesced
    queue.mark("a")  # a is running: it runs once more afterwards
    queue.mark("a")
    release.set()
    await _until(lambda: len(runs) >= 3 and not running)
    await _until(lambda: queue.depth == 0)
    task.cancel()
    assert runs == ["a", "b", "a"]
    assert not overlap


async def test_failures_and_delays_requeue() -> None:
    calls: list[int] = []
    third = asyncio.Event()

    async def work(key: str) -> float | None:
        calls.append(1)
        if len(calls) == 3:
            third.set()
        return 0.01 if len(calls) < 3 else None

    queue: WorkQueue[str] = WorkQueue(work, concurrency=1)
    task = asyncio.create_task(queue.run())
    queue.mark("a")
    async with asyncio.timeout(5):
        await third.wait()
    task.cancel()
    assert len(calls) == 3
