"""Which kind of work a task does for the API client: the flow whose requests take tokens from a
bucket of their own.

The Event recorder's workers run as the `EVENTS` flow, which the API client gives a token bucket of
its own (`rayscale.kube.client`); everything else is the ``None`` flow and shares the main bucket.
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
    """The flow of the running task (None: the main bucket)."""
    return _FLOW.get()


@contextlib.contextmanager
def working_for(key: Hashable) -> Iterator[None]:
    """Run the block, and every task it starts, as flow `key`."""
    token = _FLOW.set(key)
    try:
        yield
    finally:
        _FLOW.reset(token)
