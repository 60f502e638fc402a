"""FairSlots: a key alone gets every slot; each key's share shrinks as more keys want slots, and
freed slots go round-robin to the waiting keys under their share, so one key's long queue does not
delay another key's single waiter; cancelled waiters give their place (or their slot) away."""

from __future__ import annotations

import asyncio

import pytest
from tests.support.polling import until

from rayscale.controller.fairslots import FairSlots


async def test_one_key_alone_gets_every_slot() -> None:
    slots = FairSlots(3)
    for _ in range(3):
        await slots.acquire("big")
    assert slots.in_use == 3
    waiter = asyncio.create_task(slots.acquire("big"))
    await until(lambda: slots.waiters() == 1)
    assert not waiter.done()
    slots.release("big")
    await waiter
    assert slots.held_by("big") == 3
    for _ in range(3):
        slots.release("big")
    assert slots.in_use == 0


async def test_a_key_gets_no_more_than_its_share_while_others_want_slots() -> None:
    slots = FairSlots(8)
    for _ in range(8):
        await slots.acquire("big")  # alone: all of them
    big = [asyncio.create_task(slots.acquire("big")) for _ in range(10)]
    small = [asyncio.create_task(slots.acquire(f"small-{i}")) for i in range(3)]
    await until(lambda: slots.waiters() == 13)
    assert slots.share() == 2  # 8 slots, 4 keys
    for _ in range(6):  # big drops from 8 to 2 held: every freed slot goes to a small one or waits
        slots.release("big")
    await asyncio.gather(*small)
    assert slots.held_by("big") == 2
    assert slots.in_use == 5  # big is at its share: the three free slots wait for another key
    assert sum(t.done() for t in big) == 0
    for i in range(3):
        slots.release(f"small-{i}")  # big alone again: its share is every slot
    await until(lambda: sum(t.done() for t in big) == 6)
    assert slots.in_use == 8


async def test_freed_slots_go_round_robin_by_key() -> None:
    slots = FairSlots(1)
    await slots.acquire("big")
    order: list[str] = []

    async def one(key: str) -> None:
        async with slots.held(key):
            order.append(key)

    big = [asyncio.create_task(one("big")) for _ in range(5)]  # the large scale-up asked first
    await until(lambda: slots.waiters() == 5)
    small = [asyncio.create_task(one(f"small-{i}")) for i in range(2)]
    await until(lambda: slots.waiters() == 7)
    slots.release("big")
    await asyncio.gather(*big, *small)
    # first come, first served would run all five big ones before either small one
    assert order[:4] == ["big", "small-0", "small-1", "big"]
    assert sorted(order) == ["big"] * 5 + ["small-0", "small-1"]
    assert slots.in_use == 0


async def _a_holds_while_b_and_c_wait() -> tuple[FairSlots, asyncio.Task[None], asyncio.Task[None]]:
    slots = FairSlots(1)
    await slots.acquire("a")
    b = asyncio.create_task(slots.acquire("b"))
    c = asyncio.create_task(slots.acquire("c"))
    await until(lambda: slots.waiters() == 2)
    return slots, b, c


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    slots, gone, stays = await _a_holds_while_b_and_c_wait()
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert slots.waiters() == 1
    slots.release("a")
    await stays
    assert slots.held_by("c") == 1
    slots.release("c")
    assert slots.in_use == 0


async def test_a_waiter_cancelled_after_its_slot_was_handed_over_passes_it_on() -> None:
    slots, handed, nxt = await _a_holds_while_b_and_c_wait()
    slots.release("a")  # b is handed the slot ...
    handed.cancel()  # ... but is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await handed
    await nxt  # the slot went on to c, not lost
    assert (slots.in_use, slots.held_by("b")) == (1, 0)


async def test_a_cancelled_waiter_is_skipped_when_slots_are_handed_out() -> None:
    slots, gone, stays = await _a_holds_while_b_and_c_wait()
    gone.cancel()  # b's future is cancelled now; its task runs its handler later
    slots.release("a")
    await stays
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert (slots.in_use, slots.held_by("c")) == (1, 1)


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity"):
        FairSlots(0)
