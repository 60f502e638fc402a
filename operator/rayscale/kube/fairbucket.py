"""A token bucket whose waiters are served by flow, the flow with the fewest waiting first.

`TokenBucket` serves waiters first come, first served, as client-go's limiter does: a 500-pod
scale-up that asked first holds the next tokens, and a new cluster's few requests wait behind all
of them. `FairTokenBucket` has the same rate and burst, but queues a waiter under the flow it works
for (`rayscale.kube.flow`: the controller's reconcile of one RayCluster is that cluster's flow) and
hands each token, as it refills, to the flow with the fewest requests waiting (among equals, the
one whose first request has waited longest): a new cluster's service, head and two workers go
before the next of a scale-up's many creates, which take the tokens nobody else is waiting for.
Turns in a circle were measured too: a small cluster's requests come one after the other (its
Service, then its pods, then its status), and each waited a whole round of every cluster's turn.

Transition flows (`rayscale.kube.flow.is_transition`: a RayJob status write that tells a new
job or deployment status) go before every other flow: a few per job's life, and what users and
queues wait on, while a fleet's creates are throughput that a token more or less does not change.

Report flows (`rayscale.kube.flow.is_report`: writes that only say what happened, such as
``status.autoscaler``) are served only while no other flow waits: a fleet's status writes never
delay an autoscaler's ``replicas`` patch or a controller's pod create.

No request waits for ever: one that has waited its patience (`PATIENCE` seconds, a report's
`REPORT_PATIENCE`) goes first, the one furthest past its patience first. While nobody waits, a
request takes a token at once.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable

from rayscale.kube.flow import is_report, is_transition
from rayscale.kube.ratelimit import TokenBucket

__all__ = ["PATIENCE", "REPORT_PATIENCE", "FairTokenBucket"]

#: Seconds a request may wait for its turn behind flows with fewer waiting; then it goes first.
PATIENCE = 5.0
#: ... a report's request, behind every other flow.
REPORT_PATIENCE = 30.0


class FairTokenBucket:
    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        patience: float = PATIENCE,
        report_patience: float = REPORT_PATIENCE,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._tokens = TokenBucket(qps, burst, clock=clock)
        self._patience = patience
        self._report_patience = report_patience
        self._clock = clock
        self._sleep = sleep
        # each flow's waiters, oldest first, with the time each began to wait
        self._waiting: dict[Hashable, deque[tuple[asyncio.Future[None], float]]] = {}
        self._pump: asyncio.Task[None] | None = None

    def waiters(self) -> int:
        return sum(len(q) for q in self._waiting.values())

    async def take(self, key: Hashable = None) -> None:
        """Wait for a token, in flow `key`'s turn. A cancelled waiter takes no token."""
        if not self._waiting and self._tokens.try_take():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (future, self._clock())
        self._waiting.setdefault(key, deque()).append(entry)
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._serve(), name="rayscale-fair-bucket")
        try:
            await future
        except asyncio.CancelledError:
            queue = self._waiting.get(key)
            if queue is not None and entry in queue:
                queue.remove(entry)
                if not queue:
                    del self._waiting[key]
            raise

    async def _serve(self) -> None:
        """Hand out tokens as they refill, while anybody waits."""
        while self._waiting:
            delay = self._tokens.wait_time()
            if delay > 0:
                await self._sleep(delay)
                continue
            if not self._tokens.try_take():
                continue
            future = self._next()
            if future is None:  # every waiter was cancelled meanwhile
                self._tokens.refund()
            else:
                future.set_result(None)

    def _next(self) -> asyncio.Future[None] | None:
        """The first live waiter of the flow whose turn it is, taken off its queue."""
        while self._waiting:
            key = self._turn()
            queue = self._waiting[key]
            future, _ = queue.popleft()
            if not queue:
                del self._waiting[key]
            if not future.done():  # a waiter cancelled, and not yet off its queue
                return future
        return None

    def _turn(self) -> Hashable:
        """The flow whose turn it is: the transition flow that has waited longest, else the one
        furthest past its patience, else among the flows that do not only report (else among
        those that do) the one with the fewest waiting."""
        transitions = [k for k in self._waiting if is_transition(k)]
        if transitions:
            return min(transitions, key=lambda k: self._waiting[k][0][1])
        now = self._clock()
        overdue = max(self._waiting, key=lambda k: now - self._waiting[k][0][1] - self._patience_of(k))
        if now - self._waiting[overdue][0][1] >= self._patience_of(overdue):
            return overdue
        working = [k for k in self._waiting if not is_report(k)] or list(self._waiting)
        return min(working, key=lambda k: (len(self._waiting[k]), self._waiting[k][0][1]))

    def _patience_of(self, key: Hashable) -> float:
        return self._report_patience if is_report(key) else self._patience
