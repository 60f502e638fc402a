"""The garbage collector as the operator runs it once started (rayscale.gc_tuning)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from rayscale import gc_tuning


@pytest.fixture
def restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()


@pytest.mark.usefixtures("restored")
def test_settle_freezes_what_is_alive() -> None:
    frozen = gc_tuning.settle()
    assert frozen == gc.get_freeze_count() > 1000  # the test process's modules and classes at least


def test_the_young_generation_every_tick_the_middle_one_too_every_few_all_seldom() -> None:
    old, middle = gc_tuning.OLD_EVERY, gc_tuning.MIDDLE_EVERY
    assert old % middle == 0
    due = [gc_tuning.generation_due(tick) for tick in range(1, 2 * old + 1)]
    assert due.count(2) == 2
    assert due[old - 1] == due[2 * old - 1] == 2
    assert due.count(1) == 2 * old // middle - 2
    assert due[middle - 1] == 1
    assert due.count(0) == 2 * old - 2 * old // middle


class Node:
    other: object = None


@pytest.mark.usefixtures("restored")
async def test_on_a_clock_cyclic_garbage_is_collected_with_allocations_not_counted() -> None:
    slept = asyncio.Queue[float]()
    tick = asyncio.Event()

    async def sleep(seconds: float) -> None:
        slept.put_nowait(seconds)
        await tick.wait()
        tick.clear()

    task = asyncio.create_task(gc_tuning.collect_on_a_clock(sleep))
    assert await slept.get() == gc_tuning.YOUNG_EVERY
    assert not gc.isenabled()  # no collection however much is allocated
    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: reference counting alone never frees it
    gone = weakref.ref(a)
    del a, b
    junk = [[i] for i in range(50_000)]  # far more than the default threshold of 700
    del junk
    assert gone() is not None
    tick.set()  # the clock ticks: the young generation is collected, then it sleeps again
    assert await slept.get() == gc_tuning.YOUNG_EVERY
    assert gone() is None
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gc.isenabled()  # turned back on when stopped
