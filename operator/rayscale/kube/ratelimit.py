"""A token bucket for the requests rayscale sends to the API server (client-go's QPS and burst).

A bucket holds up to `burst` tokens and gains `qps` tokens a second; a request takes one token,
and the sustained rate never exceeds `qps` however many tasks ask at once. Waiting never blocks
the event loop.

`TokenBucket` serves its waiters first come, first served: a waiter *reserves* the next token and
sleeps until it exists (client-go's limiter).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Protocol

__all__ = ["Limiter", "TokenBucket"]

#: A token short by less than this is there: after a sleep of exactly the time a token takes, the
#: float sum of the refill can fall short by a rounding error, and a wait of that much would not
#: move the clock.
ROUNDING = 1e-9


class Limiter(Protocol):
    async def take(self, key: Hashable = None) -> None:
        """Wait for a token; `key` is the flow asking (`rayscale.kube.flow`)."""


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
        if self._tokens < 1.0 - ROUNDING:
            return False
        self._tokens -= 1.0
        return True

    def wait_time(self) -> float:
        """Seconds until a token is there (0: one is there now); nothing is taken."""
        self._refill()
        return 0.0 if self._tokens >= 1.0 - ROUNDING else (1.0 - self._tokens) / self.qps

    def refund(self) -> None:
        """Give back a token taken and not used."""
        self._tokens = min(float(self.burst), self._tokens + 1.0)

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.qps)
        self._updated = now

    async def take(self, key: Hashable = None) -> None:
        """Wait for a token, whatever the flow (`key`). A cancelled waiter still used its
        reservation (as in client-go)."""
        delay = self.reserve()
        if delay > 0:
            await self._sleep(delay)
