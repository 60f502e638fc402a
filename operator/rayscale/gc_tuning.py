"""Python's cyclic garbage collector, run on a clock instead of on allocations.

Every watch event decodes into a few hundred dicts and lists. With the interpreter's defaults (a
young-generation collection every 700 container allocations net of frees, an older one after ten
of those) the operator spent a large share of its CPU in the collector while a fleet was created:
a collection ran every few events, walked the decoded events still being handled, and each full
collection walked the hundreds of thousands of objects the imports leave behind (the Kubernetes
client's models, kopf, pydantic), about 100 ms apiece. Almost none of that garbage is cyclic;
reference counting frees it as soon as an event is handled.

So, once the operator has started, `settle()` collects once and moves everything alive out of the
collector's sight (`gc.freeze`: the imports and the start-up state are never freed anyway), and
`collect_on_a_clock()` turns the allocation-driven collections off and collects the young
generation every 5 s, the middle one too every 30 s and all of them every 5 minutes: the
collector's work follows the time that passed, not the events decoded (what a collection walks is
what is still alive then; the events already handled are not), and cyclic garbage lives seconds.
Measured in docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable

__all__ = ["MIDDLE_EVERY", "OLD_EVERY", "YOUNG_EVERY", "collect_on_a_clock", "generation_due", "settle"]

YOUNG_EVERY = 5.0  # seconds between collections of the young generation
MIDDLE_EVERY = 6  # young collections between collections of the middle generation too (30 s)
OLD_EVERY = 60  # young collections between full collections (5 min)


def settle() -> int:
    """Collect once and freeze what is alive; the number of objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def generation_due(tick: int) -> int:
    """The oldest generation the `tick`-th collection (from 1) collects."""
    if tick % OLD_EVERY == 0:
        return 2
    if tick % MIDDLE_EVERY == 0:
        return 1
    return 0


async def collect_on_a_clock(sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """Collect every YOUNG_EVERY seconds until cancelled, the allocation-driven collections off
    meanwhile (turned back on when cancelled)."""
    was_enabled = gc.isenabled()
    gc.disable()
    tick = 0
    try:
        while True:
            await sleep(YOUNG_EVERY)
            tick += 1
            gc.collect(generation_due(tick))
    finally:
        if was_enabled:
            gc.enable()
