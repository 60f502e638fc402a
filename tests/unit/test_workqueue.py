"""The per-cluster work queue: one run per key at a time, marks coalesce, keys run in parallel, and a
key whose run failed waits out its backoff while other keys run."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Hashable

from tests.support.polling import eventually, turns, until

from rayscale.common.retry import Failed, RetryBackoff
from rayscale.common.workqueue import WorkQueue


async def test_marks_coalesce_and_a_key_never_runs_twice_at_once() -> None:
    running: set[str] = set()
    runs: list[str] = []
    overlap = False
    release = asyncio.Event()

    async def work(key: str) -> float | None:
        nonlocal overlap
        overlap = overlap or key in running
        running.add(key)
        runs.append(key)
        await release.wait()
        running.discard(key)
        return None

    queue: WorkQueue[str] = WorkQueue(work, concurrency=4)
    task = asyncio.create_task(queue.run())
    queue.mark("a")
    queue.mark("a")
    queue.mark("b")
    await until(lambda: len(runs) >= 2)
    assert sorted(runs) == ["a", "b"]  # a and b in parallel, the second mark of a coalesced
    queue.mark("a")  # a is running: it runs once more afterwards
    queue.mark("a")
    release.set()
    await until(lambda: len(runs) >= 3 and not running)
    await until(lambda: queue.depth == 0)
    task.cancel()
    assert runs == ["a", "b", "a"]
    assert not overlap


async def test_failures_and_delays_requeue() -> None:
    calls: list[int] = []
    third = asyncio.Event()

    async def work(key: str) -> float | None:
        calls.append(1)
        if len(calls) == 3:
            third.set()
        return 0.01 if len(calls) < 3 else None

    queue: WorkQueue[str] = WorkQueue(work, concurrency=1)
    task = asyncio.create_task(queue.run())
    queue.mark("a")
    async with asyncio.timeout(5):
        await third.wait()
    task.cancel()
    assert len(calls) == 3


class Observer:
    def __init__(self) -> None:
        self.delays: list[float | None] = []
        self.backing_off: list[int] = []

    def started(self) -> None:
        pass

    def finished(self, result: str | None, seconds: float) -> None:
        pass

    def backoff(self, delay: float | None, backing_off: int) -> None:
        self.delays.append(delay)
        self.backing_off.append(backing_off)


async def test_a_failing_key_waits_out_its_backoff_while_other_keys_run() -> None:
    runs: list[str] = []
    outcome: dict[str, float | Failed | None] = {
        "bad": Failed("create pod: 403 exceeded quota"),
        "good": None,
    }
    version: dict[str, Hashable] = {"bad": 1, "good": 1}
    observer = Observer()

    async def work(key: str) -> float | Failed | None:
        runs.append(key)
        if key == "boom":
            raise RuntimeError("bug")
        return outcome[key]

    # time stands still but for the jumps below: the backoff never ends by itself
    now = [0.0]
    backoff: RetryBackoff[str] = RetryBackoff(base=10.0, clock=lambda: now[0], rng=lambda: 0.0)
    queue: WorkQueue[str] = WorkQueue(
        work, concurrency=2, observer=observer, backoff=backoff, version=version.get
    )
    task = asyncio.create_task(queue.run())
    try:
        queue.mark("bad")
        await until(lambda: observer.delays == [10.0])
        for _ in range(5):  # watch events and resyncs: they wait for the backoff
            queue.mark("bad")
        queue.mark("good")
        await until(lambda: runs.count("good") == 1)
        await turns(200)
        assert runs == ["bad", "good"]
        version["good"] = 2  # versions matter only to failing keys
        queue.mark("good")
        await until(lambda: runs.count("good") == 2)

        now[0] = 9.0  # still backing off (10 s)
        version["bad"] = 2  # the spec was edited: retried at once, the failure count kept
        queue.mark("bad")
        await until(lambda: len(observer.delays) == 4)
        assert runs.count("bad") == 2
        assert observer.delays[-1] == 18.0  # the 2nd failure: 20 s, but at most twice the 9 s failing
        assert observer.backing_off[-1] == 1

        outcome["bad"] = Failed("429", retry_after=120.0)
        version["bad"] = 3
        queue.mark("bad")
        await until(lambda: len(observer.delays) == 5)
        assert observer.delays[-1] == 120.0

        outcome["bad"] = None  # fixed: one good run resets the backoff
        version["bad"] = 4
        queue.mark("bad")
        await until(lambda: len(observer.delays) == 6)
        assert observer.delays[-1] is None
        assert (observer.backing_off[-1], backoff.failures("bad")) == (0, 0)
        queue.mark("bad")  # no backoff left: runs at once
        await until(lambda: runs.count("bad") == 5)

        queue.mark("boom")  # an exception is a failure too
        await until(lambda: len(observer.delays) == 8)
        assert observer.delays[-1] == 10.0
        assert backoff.failures("boom") == 1
    finally:
        task.cancel()


async def test_the_backoff_timer_runs_the_key_again_by_itself() -> None:
    done = asyncio.Event()
    times: list[float] = []

    async def work(key: str) -> float | Failed | None:
        times.append(asyncio.get_running_loop().time())
        if len(times) == 4:
            done.set()
            return None
        return Failed("500")

    queue: WorkQueue[str] = WorkQueue(work, concurrency=1, backoff=RetryBackoff(base=0.01, jitter=0.0))
    task = asyncio.create_task(queue.run())
    queue.mark("a")
    try:
        async with asyncio.timeout(10):
            await done.wait()
    finally:
        task.cancel()
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(gap >= nominal - 0.005 for gap, nominal in zip(gaps, (0.01, 0.02, 0.04), strict=True)), gaps


Starts = dict[str, list[float]]  # when each key started each of its runs


def spaced(spacing: float | Callable[[str], float], *keys: str) -> tuple[WorkQueue[str], Starts]:
    """A queue of two workers with `spacing`, and when each of `keys` started each of its runs."""
    loop = asyncio.get_running_loop()
    starts: Starts = {key: [] for key in keys}

    async def work(key: str) -> float | None:
        starts[key].append(loop.time())
        return None

    return WorkQueue(work, concurrency=2, spacing=spacing), starts


async def test_with_spacing_a_key_runs_at_most_once_per_spacing_and_marks_between_coalesce() -> None:
    queue, starts = spaced(0.3, "a", "b")
    task = asyncio.create_task(queue.run())
    queue.mark("a")
    await until(lambda: len(starts["a"]) == 1)
    for _ in range(5):  # right after the run: they wait for the spacing, as one run
        queue.mark("a")
    queue.mark("b")  # another key is not held back by a's spacing
    await until(lambda: len(starts["b"]) == 1)
    assert len(starts["a"]) == 1
    await eventually(lambda: len(starts["a"]) == 2, timeout=10, interval=0.01)
    first, second = starts["a"]
    assert second - first >= 0.3 - 0.02  # the loop's timers may fire a little early
    assert starts["b"][0] < second
    queue.forget("a")  # a forgotten key starts afresh: no spacing
    queue.mark("a")
    await eventually(lambda: len(starts["a"]) == 3, timeout=10, interval=0.01)
    assert starts["a"][2] - second < 0.3
    task.cancel()
    assert len(starts["a"]) == 3


async def test_spacing_may_differ_by_key() -> None:
    queue, starts = spaced(lambda key: 0.3 if key == "slow" else 0.0, "slow", "fast")
    task = asyncio.create_task(queue.run())
    try:
        for key in ("slow", "fast"):
            runs = starts[key]
            queue.mark(key)
            await until(lambda: len(runs) == 1)  # noqa: B023 (awaited within the iteration)
            queue.mark(key)
            await eventually(lambda: len(runs) == 2, timeout=10, interval=0.01)  # noqa: B023
        assert starts["slow"][1] - starts["slow"][0] >= 0.3 - 0.02
        assert starts["fast"][1] - starts["fast"][0] < 0.3
    finally:
        task.cancel()
