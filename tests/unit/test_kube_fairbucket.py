"""The rate limit's fair share: waiting flows are served in turn, on virtual time."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Sequence

import pytest
from tests.support.polling import until

from rayscale.kube.fairbucket import FairTokenBucket
from rayscale.kube.flow import kind_of, report_flow, transition_flow


class Clock:
    """Virtual time that a sleep moves forward (one sleeper at a time: the bucket's pump)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)  # the waiters served before the sleep run at its start
        self.now += seconds


def fair(qps: float, burst: int, clock: Clock) -> FairTokenBucket:
    return FairTokenBucket(qps, burst, clock=clock, sleep=clock.sleep)


async def served(
    bucket: FairTokenBucket, clock: Clock, asks: Sequence[Hashable]
) -> list[tuple[Hashable, float]]:
    """Ask for one token per entry of `asks` (its flow), all at once; who got one, when."""
    order: list[tuple[Hashable, float]] = []

    async def one(key: Hashable) -> None:
        await bucket.take(key)
        order.append((key, clock.now))

    await asyncio.gather(*(one(k) for k in asks))
    return order


async def test_without_waiters_a_burst_goes_at_once() -> None:
    clock = Clock()
    order = await served(fair(10, 3, clock), clock, ["a", "a", "a"])
    assert [t for _, t in order] == [0, 0, 0]


async def test_a_small_flow_is_not_queued_behind_a_big_one() -> None:
    """The big flow asked for 20 first; the small one's 2 go with the next two tokens."""
    clock = Clock()
    bucket = fair(10, 1, clock)
    order = await served(bucket, clock, ["big"] * 20 + ["small"] * 2)
    # The burst's one token went to the first big request; then the flow with fewer waiting.
    assert [k for k, _ in order[:4]] == ["big", "small", "small", "big"]
    assert [t for k, t in order if k == "small"] == pytest.approx([0.1, 0.2])
    # First come, first served would have served them at 2.0 and 2.1 s.
    assert max(t for _, t in order) == pytest.approx(2.1)  # the rate holds: 22 tokens, 1 + 21 / 10
    assert bucket.waiters() == 0


async def test_among_equal_flows_the_longest_waiting_goes_first() -> None:
    clock = Clock()
    bucket = fair(10, 1, clock)
    await bucket.take("x")  # the burst: the others wait
    order = await served(bucket, clock, ["a", "b", "c"])
    assert [k for k, _ in order] == ["a", "b", "c"]


async def test_a_request_waits_no_longer_than_its_patience_behind_smaller_flows() -> None:
    """A steady stream of one-request flows would starve the big flow; its patience ends that."""
    clock = Clock()
    bucket = FairTokenBucket(10, 1, patience=1.0, clock=clock, sleep=clock.sleep)
    await bucket.take("x")
    order = await served(bucket, clock, ["big"] * 3 + [f"small-{i}" for i in range(40)])
    # 10 tokens a second: nine one-request flows went first, then the big flow's first request,
    # which asked first, when its patience ran out, though flows with fewer waiting were queued.
    assert [k for k, _ in order[:9]] == [f"small-{i}" for i in range(9)]
    assert order[9][0] == "big"
    assert order[9][1] == pytest.approx(1.0)


async def test_the_rate_never_exceeds_qps() -> None:
    clock = Clock()
    order = await served(fair(50, 5, clock), clock, [i % 7 for i in range(200)])
    times = [t for _, t in order]
    for i, t in enumerate(times):
        assert i < 5 or t >= (i - 5 + 1) / 50 - 1e-9


async def test_a_cancelled_waiter_takes_no_token_and_leaves_its_flow_alone() -> None:
    clock = Clock()
    tick = asyncio.Event()

    async def held_sleep(seconds: float) -> None:  # the pump sleeps until the test lets it go
        await tick.wait()
        clock.now += seconds

    bucket = FairTokenBucket(1, 1, clock=clock, sleep=held_sleep)
    await bucket.take("x")  # the burst
    loop = asyncio.get_running_loop()
    gone = loop.create_task(bucket.take("x"))
    kept = loop.create_task(bucket.take("y"))
    await until(lambda: bucket.waiters() == 2)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    assert bucket.waiters() == 1
    tick.set()
    await kept
    assert clock.now == pytest.approx(1.0)  # the next token went to y, the one left waiting
    assert bucket.waiters() == 0


async def test_reports_wait_while_other_flows_wait() -> None:
    """A report flow with fewer waiting still goes after every flow that does more than report."""
    clock = Clock()
    bucket = fair(10, 1, clock)
    await bucket.take("x")
    report = report_flow(("ns", "a"))
    order = await served(bucket, clock, [report] + ["big"] * 5 + ["small"])
    assert [k for k, _ in order] == ["small"] + ["big"] * 5 + [report]


async def test_a_report_waits_no_longer_than_its_own_patience() -> None:
    clock = Clock()
    bucket = FairTokenBucket(10, 1, patience=100.0, report_patience=2.0, clock=clock, sleep=clock.sleep)
    await bucket.take("x")
    report = report_flow(("ns", "a"))
    order = await served(bucket, clock, [report] + [f"f-{i}" for i in range(40)])
    served_at = dict(order)
    # the others, never past their patience, went first until the report's patience ran out
    assert served_at[report] == pytest.approx(2.0)
    assert [k for k, _ in order[:19]] == [f"f-{i}" for i in range(19)]


async def test_past_their_patience_the_furthest_past_goes_first() -> None:
    """Under a backlog every request is past its patience, and a report goes only when it is further
    past its own than the others are past theirs: here, after every request that asked with it
    (each waits 1 s longer past its patience than the report)."""
    clock = Clock()
    bucket = FairTokenBucket(10, 1, patience=1.0, report_patience=2.0, clock=clock, sleep=clock.sleep)
    await bucket.take("x")
    report = report_flow(("ns", "a"))
    order = await served(bucket, clock, [report] + ["big"] * 40)
    served_at = dict(order)
    assert served_at[report] == pytest.approx(4.1)


async def test_a_transition_goes_before_every_other_flow_even_past_their_patience() -> None:
    """A status write that tells a new state (a RayJob's RUNNING) goes with the next token, before
    smaller flows and before requests past their patience; transitions among themselves go oldest
    first."""
    clock = Clock()
    bucket = FairTokenBucket(10, 1, patience=0.5, clock=clock, sleep=clock.sleep)
    await bucket.take("x")
    first, second = transition_flow("rayjob", ("ns", "a")), transition_flow("rayjob", ("ns", "b"))
    order = await served(bucket, clock, ["big"] * 20 + ["small", first, second])
    assert [k for k, _ in order[:3]] == [first, second, "small"]
    assert dict(order)[second] == pytest.approx(0.2)
    assert kind_of(first) == "transition"
