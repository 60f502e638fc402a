"""How many of rayscale's requests may be at the API server at once: `InFlight`.

The rate limit (`rayscale.kube.fairbucket`) decides in which order requests go, but once sent they
are all the API server's: when it is short of CPU it serves the requests it holds side by side, and
each takes as long as all of them together. A RayJob status write that tells a new job status
(a transition flow, `rayscale.kube.flow.is_transition`) then waits behind every create sent before
it: measured at 1,000 RayJobs, such a write took up to 3 s when the API server was busy, against a
few milliseconds when it was not. With at most `limit` requests of the other flows at the API server
at once, the rest wait here, where the rate limit's order holds, and a transition's request never
waits: it joins at most `limit` others. While the API server answers quickly, `limit` requests at
once carry far more than the rate limit allows, so this changes nothing; when it is slow, it serves
no more requests a second for having more of them at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable

from rayscale.kube.flow import is_transition

__all__ = ["InFlight"]


class InFlight:
    """At most `limit` requests at once, a transition flow's aside; `limit` 0: no bound."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._slots = asyncio.Semaphore(limit) if limit > 0 else None

    @contextlib.asynccontextmanager
    async def slot(self, key: Hashable) -> AsyncIterator[None]:
        """Hold a place for a request of flow `key` while it is at the API server."""
        if self._slots is None or is_transition(key):
            yield
            return
        async with self._slots:
            yield

    def waiting(self) -> int:
        """Requests waiting for a place now."""
        slots = self._slots
        return 0 if slots is None else len(getattr(slots, "_waiters", None) or ())
