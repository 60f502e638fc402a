"""A work queue of dirty keys: one worker per key at a time, keys in parallel up to a bound.

The controller runs one per operator (keys: RayClusters to reconcile), the autoscaler one (keys:
RayClusters to autoscale).

Marks coalesce: marking a key that is queued does nothing; marking a key that is being worked
on runs it once more afterwards. A worker may ask to run again after a delay, or report that it
failed (`Failed`, or an exception): the key then backs off (retry.py: 1 s doubling to 5 min, with
jitter, at least the server's Retry-After) and marks wait for the backoff to end, so a key that
keeps failing runs less and less often while other keys run as usual. The first run that does not
fail resets the key's backoff. A mark while the key's `version` differs from the one it failed at
(a spec edit, a deletion) runs it at once (after the spacing, below, if any).

With a `spacing` (seconds, or seconds for each key), a key's runs start at least that far apart: a
mark that comes sooner after its last run started waits for the rest (the marks meanwhile
coalesce into that one run). The controller's reconcile of a RayCluster reads all its pods, and a
scale-up sends several watch events per pod; spaced, a cluster is reconciled a few times a second
at most instead of back to back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, Protocol, TypeVar

from rayscale.common.retry import Failed, RetryBackoff
from rayscale.common.tasks import cancel_and_wait

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)
TOLERANCE = 0.01  # seconds of backoff left that count as over (timers may fire a little early)


class QueueObserver(Protocol):
    def started(self) -> None: ...
    def finished(self, result: str | None, seconds: float) -> None:
        """`result` is None when the run was cancelled (the operator stops)."""

    def backoff(self, delay: float | None, backing_off: int) -> None:
        """After each run: the key's backoff (None: it did not fail), and how many keys back off."""


def result_of(delay: float | Failed | None) -> str:
    """controller-runtime's name for what a run asked for."""
    if isinstance(delay, Failed):
        return "error"
    if delay is None:
        return "success"
    return "requeue" if delay <= 0 else "requeue_after"


def show(key: Hashable) -> str:
    """A (namespace, name) key as namespace/name."""
    return "/".join(map(str, key)) if isinstance(key, tuple) else str(key)


class WorkQueue(Generic[K]):
    def __init__(
        self,
        work: Callable[[K], Awaitable[float | Failed | None]],
        *,
        concurrency: int,
        observer: QueueObserver | None = None,
        name: str = "run of",
        backoff: RetryBackoff[K] | None = None,
        version: Callable[[K], Hashable] | None = None,
        spacing: float | Callable[[K], float] = 0.0,
    ) -> None:
        self._work = work
        self.spacing = spacing  # seconds from one run's start of a key to the next's, at least
        self._started: dict[K, float] = {}  # when each key's last run started (loop time)
        self._observer = observer
        self._concurrency = concurrency
        self.name = name
        self.backoff: RetryBackoff[K] = backoff if backoff is not None else RetryBackoff()
        self._version = version
        self._failed_at: dict[K, Hashable] = {}  # the key's version when it last failed
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._again: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self.heartbeat = time.monotonic()

    def mark(self, key: K) -> None:
        """Run `key` soon: now, or when its backoff ends."""
        wait = self.backoff.remaining(key)
        if wait > TOLERANCE and self._changed(key):
            log.info("%s %s: changed while backing off; retrying now", self.name, show(key))
            self.backoff.expire(key)
            wait = 0.0
        if self.spacing and key in self._started and key not in self._active and key not in self._queued:
            spacing = self.spacing(key) if callable(self.spacing) else self.spacing
            wait = max(wait, self._started[key] + spacing - asyncio.get_running_loop().time())
        if wait > TOLERANCE:
            self.mark_after(key, wait)
        elif key in self._active:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def _changed(self, key: K) -> bool:
        return (
            self._version is not None
            and key in self._failed_at
            and self._version(key) != self._failed_at[key]
        )

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
        self.backoff.succeeded(key)
        self._failed_at.pop(key, None)
        self._started.pop(key, None)

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    async def run(self) -> None:
        workers = [asyncio.create_task(self._worker()) for _ in range(self._concurrency)]
        try:
            await asyncio.gather(*workers)
        finally:
            await cancel_and_wait(workers)
            for timer in self._timers.values():
                timer.cancel()

    async def _worker(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            self._active.add(key)
            self.heartbeat = start = time.monotonic()
            if self.spacing:
                self._started[key] = asyncio.get_running_loop().time()
            version = self._version(key) if self._version is not None else None  # what this run saw
            if self._observer is not None:
                self._observer.started()
            outcome: float | Failed | None
            result: str | None = "error"
            try:
                outcome = await self._work(key)
                result = result_of(outcome)
            except asyncio.CancelledError:
                result = None
                raise
            except Exception as exc:
                log.exception("%s %s raised", self.name, show(key))
                outcome = Failed(f"{type(exc).__name__}: {exc}")
            finally:
                self._active.discard(key)
                self.heartbeat = time.monotonic()
                if self._observer is not None:
                    self._observer.finished(result, self.heartbeat - start)
            delay = self._after(key, outcome, version)
            if key in self._again:
                self._again.discard(key)
                self.mark(key)
            elif delay is not None:
                self.mark_after(key, delay)

    def _after(self, key: K, outcome: float | Failed | None, version: Hashable) -> float | None:
        """Record how the run went; when to run the key again (None: only when marked)."""
        if not isinstance(outcome, Failed):
            self._failed_at.pop(key, None)
            failures = self.backoff.succeeded(key)
            if failures:
                log.info("%s %s succeeded after %d failures; backoff reset", self.name, show(key), failures)
            if self._observer is not None:
                self._observer.backoff(None, len(self.backoff))
            return outcome
        delay = self.backoff.failed(key, outcome.retry_after)
        if self._version is not None:
            self._failed_at[key] = version
        log.warning("%s %s failed (%d in a row): %s; retrying in %.1fs", self.name, show(key),
                    self.backoff.failures(key), outcome.reason, delay)  # fmt: skip
        if self._observer is not None:
            self._observer.backoff(delay, len(self.backoff))
        return delay
