"""Which RayCluster a task is working for: the flow the API request limiter shares its tokens by.

The work queues run each key's round inside `working_for(key)`; the requests that round sends,
and the tasks it starts, carry the key. `rayscale.kube.ratelimit.FairTokenBucket` hands its tokens
to the waiting flows in turn, so a cluster creating 500 pods does not hold back a small cluster's
two. Work outside any round (leader election, watches) is the ``None`` flow; the Event
recorder's workers are the `EVENTS` flow, which the API client gives a token bucket of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator
from contextvars import ContextVar

__all__ = ["EVENTS", "current", "working_for"]

#: The flow of the Event recorder's writes.
EVENTS = "rayscale.events"

_FLOW: ContextVar[Hashable] = ContextVar("rayscale_flow", default=None)


def current() -> Hashable:
    """The flow of the running task (None outside any cluster's round)."""
    return _FLOW.get()


@contextlib.contextmanager
def working_for(key: Hashable) -> Iterator[None]:
    """Run the block, and every task it starts, as work for `key`."""
    token = _FLOW.set(key)
    try:
        yield
    finally:
        _FLOW.reset(token)
