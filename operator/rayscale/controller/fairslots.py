"""A fair semaphore: `capacity` slots shared by keys (RayClusters), each key's share shrinking as
more keys want slots.

A key may hold at most ``max(1, capacity // active)`` slots, where `active` counts the keys that
hold or wait for one; freed slots go round-robin to the next waiting key under its share. One
cluster alone gets every slot; a 500-pod scale-up beside fifteen new clusters gets a sixteenth of
them, so their few creates are not queued behind its many at the API server. A key over its share
keeps the slots it holds (nothing is taken back) and gets no more until it is under it again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncIterator, Hashable

__all__ = ["FairSlots"]


class FairSlots:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.in_use = 0
        self._held: Counter[Hashable] = Counter()
        self._waiting: OrderedDict[Hashable, deque[asyncio.Future[None]]] = OrderedDict()

    def waiters(self) -> int:
        return sum(len(q) for q in self._waiting.values())

    def held_by(self, key: Hashable) -> int:
        return self._held[key]

    def share(self) -> int:
        """How many slots one key may hold now."""
        active = len(self._held.keys() | self._waiting.keys())
        return max(1, self.capacity // max(1, active))

    async def acquire(self, key: Hashable) -> None:
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, deque()).append(granted)
        self._dispatch()
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release(key)  # handed a slot just as it was cancelled: pass it on
            else:
                self._forget(key, granted)
            raise

    def release(self, key: Hashable) -> None:
        self._held[key] -= 1
        if self._held[key] <= 0:
            del self._held[key]
        self.in_use -= 1
        self._dispatch()

    def _dispatch(self) -> None:
        """Grant free slots, in turn, to the waiting keys under their share."""
        while self.in_use < self.capacity and self._waiting:
            share = self.share()
            key = next((k for k in self._waiting if self._held[k] < share), None)
            if key is None:
                return
            queue = self._waiting.pop(key)
            granted = queue.popleft()
            if queue:
                self._waiting[key] = queue  # to the back of the rotation
            if granted.done():  # cancelled, its task not yet told
                continue
            self._held[key] += 1
            self.in_use += 1
            granted.set_result(None)

    def _forget(self, key: Hashable, granted: asyncio.Future[None]) -> None:
        queue = self._waiting.get(key)
        if queue is not None:
            with contextlib.suppress(ValueError):
                queue.remove(granted)
            if not queue:
                del self._waiting[key]
        self._dispatch()  # one waiter fewer may raise the others' share

    @contextlib.asynccontextmanager
    async def held(self, key: Hashable) -> AsyncIterator[None]:
        await self.acquire(key)
        try:
            yield
        finally:
            self.release(key)
