"""Event aggregation and spam filtering, as client-go's ``EventCorrelator`` (tools/record) does it.

Every Event passes three steps, in client-go's order:

1. **Similar events are combined.** Events about one object with the same type and reason but
   different messages are similar. From the `max_similar`-th distinct message on (10), while no more
   than `similar_window` (10 min) passes between two of them, they become one Event whose message is
   ``(combined from similar events): <the latest message>``.
2. **Identical events are counted.** An Event seen before (same object, type, reason and message,
   or the same combined Event) is not written again: the one already written gets ``count`` + 1, the
   new ``lastTimestamp`` and the latest message, by a PATCH; ``firstTimestamp`` and the name stay.
3. **Each object has a token bucket.** `burst` Events (25) at once, then one per `refill_seconds`
   (5 min); what finds the bucket empty is dropped (the caller logs it). Counting goes on in step 2,
   so the next Event that gets through carries the full count.

The caches are LRU of `cache_size` keys (4096), as client-go's. Time comes from an injectable clock
(seconds since the epoch), so tests run without sleeping. Pure: no Kubernetes client here.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from rayscale.common.types import Manifest
from rayscale.kube.ratelimit import TokenBucket

__all__ = ["COMBINED", "Correlated", "EventCorrelator", "object_key"]

COMBINED = "(combined from similar events): "
MAX_SIMILAR = 10
SIMILAR_WINDOW_SECONDS = 600.0
BURST = 25
REFILL_SECONDS = 300.0
CACHE_SIZE = 4096
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Event = Manifest  # a core v1 Event, as the recorder creates and patches it


@dataclasses.dataclass(frozen=True)
class Correlated:
    """What to write: `event` (the whole Event, its name set) and, when it was written before,
    `patch` (its new ``count``, ``lastTimestamp`` and ``message``)."""

    event: Event
    patch: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return str(self.event["metadata"]["name"])


@dataclasses.dataclass
class _Similar:
    messages: set[str]
    last: float


@dataclasses.dataclass(frozen=True)
class _Seen:
    count: int
    first: str
    name: str


class _Lru(Generic[K, V]):
    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


def object_key(event: Event) -> tuple[str, ...]:
    """The object an Event is about, and who reports it (client-go's spam key)."""
    source = event.get("source") or {}
    ref = event.get("involvedObject") or {}
    return (
        str(source.get("component", "")),
        str(source.get("host", "")),
        *(str(ref.get(k, "")) for k in ("kind", "namespace", "name", "uid", "apiVersion")),
    )


def _similar_key(event: Event) -> tuple[str, ...]:
    """client-go's ``EventAggregatorByReasonFunc``: all but the message."""
    return (*object_key(event), *(str(event.get(k, "")) for k in ("type", "reason", "reportingComponent",
                                                                  "reportingInstance")))  # fmt: skip


def _identity(event: Event) -> tuple[str, ...]:
    """client-go's ``getEventKey``: the object, type, reason and message."""
    field_path = str((event.get("involvedObject") or {}).get("fieldPath", ""))
    return (*object_key(event), field_path, *(str(event.get(k, "")) for k in ("type", "reason", "message")))


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventCorrelator:
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        max_similar: int = MAX_SIMILAR,
        similar_window: float = SIMILAR_WINDOW_SECONDS,
        burst: int = BURST,
        refill_seconds: float = REFILL_SECONDS,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        self._clock = clock
        self._max_similar = max_similar
        self._window = similar_window
        self._burst = burst
        self._qps = 1.0 / refill_seconds
        self._similar: _Lru[tuple[str, ...], _Similar] = _Lru(cache_size)
        self._seen: _Lru[tuple[str, ...], _Seen] = _Lru(cache_size)
        self._buckets: _Lru[tuple[str, ...], TokenBucket] = _Lru(cache_size)
        self._last_name = 0

    def correlate(self, event: Event) -> Correlated | None:
        """What to write for `event` (an Event without name, timestamps or count); None when the
        object's bucket is empty and it must be dropped."""
        now = self._clock()
        event, key = self._combine(copy.deepcopy(event), now)
        correlated = self._count(event, key, now)
        if not self._bucket(event).try_take():
            return None
        return correlated

    def _combine(self, event: Event, now: float) -> tuple[Event, tuple[str, ...]]:
        """Step 1: the Event to count, and the key it is counted under."""
        key = _similar_key(event)
        record = self._similar.get(key)
        if record is None or now - record.last > self._window:
            record = _Similar(set(), now)
        record.messages.add(str(event.get("message", "")))
        record.last = now
        self._similar.put(key, record)
        if len(record.messages) < self._max_similar:
            return event, ("identical", *_identity(event))
        record.messages.pop()  # keep the set at its bound, as client-go does
        event["message"] = (COMBINED + str(event.get("message", "")))[:1024]
        return event, ("combined", *key)

    def _count(self, event: Event, key: tuple[str, ...], now: float) -> Correlated:
        """Step 2: name, count and timestamps; a patch when the Event was written before."""
        stamp = _timestamp(now)
        seen = self._seen.get(key)
        if seen is None:
            seen = _Seen(1, stamp, self._new_name(event, now))
        else:
            seen = _Seen(seen.count + 1, seen.first, seen.name)
        self._seen.put(key, seen)
        event["metadata"] = {**(event.get("metadata") or {}), "name": seen.name}
        event["metadata"].pop("generateName", None)
        event.update(count=seen.count, firstTimestamp=seen.first, lastTimestamp=stamp)
        if seen.count == 1:
            return Correlated(event)
        return Correlated(
            event, {"count": seen.count, "lastTimestamp": stamp, "message": event.get("message")}
        )

    def _new_name(self, event: Event, now: float) -> str:
        """client-go's ``<object>.<nanoseconds in hex>``, never the same twice."""
        nanos = max(int(now * 1e9), self._last_name + 1)
        self._last_name = nanos
        return f"{(event.get('involvedObject') or {}).get('name', 'event')}.{nanos:x}"

    def _bucket(self, event: Event) -> TokenBucket:
        """Step 3: the object's token bucket."""
        key = object_key(event)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = TokenBucket(self._qps, self._burst, clock=self._clock)
            self._buckets.put(key, bucket)
        return bucket
