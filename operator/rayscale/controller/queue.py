"""A work queue of dirty keys: one worker per key at a time, keys in parallel up to a bound.

Marks coalesce: marking a key that is queued does nothing; marking a key that is being worked
on runs it once more afterwards. A worker may ask to run again after a delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, Protocol, TypeVar

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)
ERROR_DELAY = 5.0


class QueueObserver(Protocol):
    def started(self) -> None: ...
    def finished(self, result: str | None, seconds: float) -> None:
        """`result` is None when the run was cancelled (the operator stops)."""


def result_of(delay: float | None) -> str:
    """controller-runtime's name for what a run asked for."""
    if delay is None:
        return "success"
    return "requeue" if delay <= 0 else "requeue_after"


class WorkQueue(Generic[K]):
    def __init__(
        self,
        work: Callable[[K], Awaitable[float | None]],
        *,
        concurrency: int,
        observer: QueueObserver | None = None,
    ) -> None:
        self._work = work
        self._observer = observer
        self._concurrency = concurrency
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._again: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self.heartbeat = time.monotonic()

    def mark(self, key: K) -> None:
        if key in self._active:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def mark_after(self, key: K, delay: float) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        timer = self._timers.get(key)
        if timer is not None and not timer.cancelled() and timer.when() <= due:
            return
        if timer is not None:
            timer.cancel()
        self._timers[key] = loop.call_at(due, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.mark(key)

    def forget(self, key: K) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    async def run(self) -> None:
        workers = [asyncio.create_task(self._worker()) for _ in range(self._concurrency)]
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
            for w in workers:
                with contextlib.suppress(asyncio.CancelledError):
                    await w
            for timer in self._timers.values():
                timer.cancel()

    async def _worker(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            self._active.add(key)
            self.heartbeat = start = time.monotonic()
            if self._observer is not None:
                self._observer.started()
            delay: float | None
            result: str | None = "error"
            try:
                delay = await self._work(key)
                result = result_of(delay)
            except asyncio.CancelledError:
                result = None
                raise
            except Exception:
                log.exception("reconcile of %s failed; retrying in %.0fs", key, ERROR_DELAY)
                delay = ERROR_DELAY
            finally:
                self._active.discard(key)
                self.heartbeat = time.monotonic()
                if self._observer is not None:
                    self._observer.finished(result, self.heartbeat - start)
            if key in self._again:
                self._again.discard(key)
                self.mark(key)
            elif delay is not None:
                self.mark_after(key, delay)
