"""Items queued per key and served round-robin, one item per key at a time.

Each key (the object an Event is about) has its own bounded queue; when it is full the oldest item
is dropped, never another key's. Workers take the next key that has items and is not being served,
one item from it, and the key goes to the back of the line: a key with a long backlog (a noisy
cluster) takes one worker at most and never delays the other keys. An item put under an id that is
still queued replaces it in place (merged), so updates of one Event coalesce.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["FairQueue"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class FairQueue(Generic[K, V]):
    def __init__(self, per_key: int) -> None:
        if per_key < 1:
            raise ValueError("per_key must be at least 1")
        self._per_key = per_key
        self._pending: dict[K, OrderedDict[Hashable, V]] = {}
        self._ready: asyncio.Queue[K] = asyncio.Queue()  # keys with items, not being served
        self._listed: set[K] = set()  # the keys in _ready
        self._busy: set[K] = set()

    def put(self, key: K, item_id: Hashable, item: V, merge: Callable[[V, V], V]) -> V | None:
        """Queue `item` for `key`; the item dropped to make room, if any."""
        items = self._pending.setdefault(key, OrderedDict())
        dropped = None
        if item_id in items:
            items[item_id] = merge(items[item_id], item)
        else:
            if len(items) >= self._per_key:
                _, dropped = items.popitem(last=False)
            items[item_id] = item
        self._list(key)
        return dropped

    async def get(self) -> tuple[K, V]:
        """The next item, round-robin over keys; call `done(key)` when it is handled."""
        key = await self._ready.get()
        self._listed.discard(key)
        items = self._pending[key]
        _, item = items.popitem(last=False)
        if not items:
            del self._pending[key]
        self._busy.add(key)
        return key, item

    def done(self, key: K) -> None:
        """The item of `key` taken by `get` is handled: the key's next item may go."""
        self._busy.discard(key)
        self._list(key)

    def pending(self, key: K) -> int:
        return len(self._pending.get(key, ()))

    def __len__(self) -> int:
        return sum(len(items) for items in self._pending.values())

    def _list(self, key: K) -> None:
        if key in self._pending and key not in self._busy and key not in self._listed:
            self._listed.add(key)
            self._ready.put_nowait(key)
