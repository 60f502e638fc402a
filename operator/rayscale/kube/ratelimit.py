"""Token buckets for the requests rayscale sends to the API server (client-go's QPS and burst).

A bucket holds up to `burst` tokens and gains `qps` tokens a second; a request takes one token,
and the sustained rate never exceeds `qps` however many tasks ask at once. Waiting never blocks
the event loop.

`TokenBucket` serves its waiters first come, first served: a waiter *reserves* the next token and
sleeps until it exists (client-go's limiter). `FairTokenBucket` has the same rate and burst but
serves the waiting *flows* in turn (`rayscale.common.flow`: the RayCluster a round works for),
one token each: a cluster with 500 creates queued and a cluster with 2 take turns, so the small
one waits for 2 tokens of the big one at most instead of 500.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Protocol

from rayscale.common import flow

__all__ = ["FairTokenBucket", "Limiter", "TokenBucket"]


class Limiter(Protocol):
    async def take(self) -> None: ...


class TokenBucket:
    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if qps <= 0:
            raise ValueError("qps must be positive (no bucket at all means no limit)")
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(self.burst)  # may go negative: tokens reserved by waiters
        self._updated = clock()

    def reserve(self) -> float:
        """Take a token now and return how many seconds to wait before using it (0: at once)."""
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def try_take(self) -> bool:
        """Take a token if one is there now; False (and nothing taken) when none is (client-go's
        passive ``TryAccept``)."""
        self._refill()
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    def give_back(self) -> None:
        """Return a token taken by `reserve` and not used (up to `burst`)."""
        self._tokens = min(float(self.burst), self._tokens + 1.0)

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.qps)
        self._updated = now

    async def take(self) -> None:
        """Wait for a token. A cancelled waiter still used its reservation (as in client-go)."""
        delay = self.reserve()
        if delay > 0:
            await self._sleep(delay)


class FairTokenBucket:
    """A `TokenBucket`'s tokens, with waiters served by flow in turn (round robin).

    A request takes a token at once while no one waits. Otherwise it queues under its flow
    (`flow_of()`, by default the running task's `rayscale.common.flow`), and one dispatcher task
    hands each token, when it exists, to the head of the next flow in line; that flow then goes
    to the back of the line. A cancelled waiter gives its turn to the next.
    """

    def __init__(self, bucket: TokenBucket, *, flow_of: Callable[[], Hashable] = flow.current) -> None:
        self._bucket = bucket
        self._flow_of = flow_of
        self._waiting: dict[Hashable, deque[asyncio.Future[None]]] = {}  # in turn order
        self._dispatcher: asyncio.Task[None] | None = None

    def waiting(self) -> int:
        """Requests waiting for a token now (cancelled ones included until their turn)."""
        return sum(len(queue) for queue in self._waiting.values())

    async def take(self) -> None:
        """Wait for a token, in the turn of the caller's flow."""
        if not self._waiting and self._bucket.try_take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(self._flow_of(), deque()).append(waiter)
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.create_task(self._dispatch(), name="rayscale-api-tokens")
        await waiter

    async def _dispatch(self) -> None:
        while self._waiting:
            await self._bucket.take()
            if not self._grant():
                self._bucket.give_back()  # every waiter left meanwhile

    def _grant(self) -> bool:
        """Wake the head of the next flow in line; False when no one waits any more."""
        while self._waiting:
            key = next(iter(self._waiting))
            queue = self._waiting.pop(key)
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    if queue:
                        self._waiting[key] = queue  # to the back of the line
                    return True
        return False
