"""Events are aggregated and rate-limited per object (client-go's EventCorrelator), and sent per
object round-robin: a noisy object never delays another's Events. Virtual clock, no sleeps."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from tests.support.fakes import ManualClock
from tests.support.polling import until

from rayscale.api.names import RAYCLUSTER
from rayscale.kube import ops
from rayscale.kube.correlator import COMBINED, EventCorrelator
from rayscale.kube.events import EventRecorder
from rayscale.kube.fairqueue import FairQueue

START = 1_700_000_000.0  # the clock's time at the start of each test


def event(
    name: str = "demo", reason: str = "FailedToCreateWorkerPod", message: str = "quota"
) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns"},
        "involvedObject": {
            **RAYCLUSTER.type_meta(),
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
        },
        "type": "Warning",
        "reason": reason,
        "message": message,
        "source": {"component": "rayscale"},
        "reportingComponent": "rayscale",
        "reportingInstance": "op-0",
    }


def test_identical_events_become_one_event_with_a_count_patched() -> None:
    clock = ManualClock(START)
    correlator = EventCorrelator(clock=clock)
    first = correlator.correlate(event())
    assert first is not None
    assert first.patch is None  # created
    assert first.event["count"] == 1
    assert first.name.startswith("demo.")
    assert first.event["firstTimestamp"] == first.event["lastTimestamp"] == "2023-11-14T22:13:20Z"
    clock.now += 65
    second = correlator.correlate(event())
    assert second is not None
    assert second.name == first.name
    assert second.patch == {"count": 2, "lastTimestamp": "2023-11-14T22:14:25Z", "message": "quota"}
    assert second.event["firstTimestamp"] == "2023-11-14T22:13:20Z"
    other = correlator.correlate(event(name="other"))
    assert other is not None
    assert other.patch is None  # another object: its own Event
    assert other.name != first.name
    warning = correlator.correlate(event(reason="ReconcileError"))
    assert warning is not None
    assert warning.patch is None  # another reason: its own Event


def test_similar_events_from_the_tenth_message_on_are_combined_into_one() -> None:
    clock = ManualClock(START)
    correlator = EventCorrelator(clock=clock)
    names = set()
    for i in range(20):
        clock.now += 10
        found = correlator.correlate(event(message=f"pod demo-worker-{i} refused"))
        assert found is not None
        names.add(found.name)
        if i < 9:
            assert found.event["message"] == f"pod demo-worker-{i} refused"
        else:
            assert found.event["message"] == f"{COMBINED}pod demo-worker-{i} refused"
            assert found.event["count"] == i - 8  # the combined Event counts on
    assert len(names) == 10  # nine Events, then the combined one


def test_similar_events_further_apart_than_the_window_are_not_combined() -> None:
    clock = ManualClock(START)
    correlator = EventCorrelator(clock=clock)
    for i in range(15):
        clock.now += 601
        found = correlator.correlate(event(message=f"m{i}"))
        assert found is not None
        assert not found.event["message"].startswith(COMBINED)


def test_each_object_may_post_25_then_one_per_five_minutes() -> None:
    clock = ManualClock(START)
    correlator = EventCorrelator(clock=clock)
    posted = [correlator.correlate(event(message="same")) for _ in range(30)]
    assert sum(p is not None for p in posted) == 25
    assert correlator.correlate(event(name="quiet")) is not None  # another object's bucket is full
    clock.now += 299
    assert correlator.correlate(event(message="same")) is None
    clock.now += 1
    refilled = correlator.correlate(event(message="same"))
    assert refilled is not None
    assert refilled.patch is not None
    assert refilled.patch["count"] == 32  # the dropped ones are counted


def test_fair_queue_serves_keys_round_robin_one_at_a_time_and_drops_a_keys_oldest() -> None:
    async def scenario() -> None:
        queue: FairQueue[str, str] = FairQueue(per_key=3)
        keep: Callable[[str, str], str] = lambda old, new: f"{old}+{new}"  # noqa: E731
        for i in range(5):
            dropped = queue.put("noisy", i, f"n{i}", keep)
            assert dropped == (f"n{i - 3}" if i >= 3 else None)
        queue.put("quiet", "q", "q0", keep)
        queue.put("noisy", 4, "again", keep)  # merged in place
        key, item = await queue.get()
        assert (key, item) == ("noisy", "n2")
        key2, item2 = await queue.get()  # noisy is busy: the other key goes
        assert (key2, item2) == ("quiet", "q0")
        assert queue._ready.empty()
        queue.done("quiet")
        queue.done("noisy")
        assert await queue.get() == ("noisy", "n3")
        queue.done("noisy")
        assert await queue.get() == ("noisy", "n4+again")
        queue.done("noisy")
        assert len(queue) == 0

    asyncio.run(scenario())


class Writer:
    """Records what is sent; the noisy object's calls hang until released."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.release = asyncio.Event()
        self.gone: set[str] = set()

    async def _wait(self, obj: str) -> None:
        if obj == "noisy":
            await self.release.wait()

    async def create(self, event: dict[str, Any]) -> bool:
        await self._wait(event["involvedObject"]["name"])
        self.calls.append(("create", event["metadata"]["name"], event["count"]))
        return True

    async def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        await self._wait(name.split(".")[0])
        self.calls.append(("patch", name, patch["count"]))
        return name not in self.gone


@contextlib.asynccontextmanager
async def recording(writer: Writer, workers: int = 1) -> AsyncIterator[EventRecorder]:
    """A started recorder writing to `writer`; stopped on the way out."""
    correlator = EventCorrelator(clock=ManualClock(START))
    recorder = EventRecorder(writer=writer, correlator=correlator, workers=workers)
    recorder.start()
    try:
        yield recorder
    finally:
        await recorder.stop()


def body(name: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": name}
    return {**RAYCLUSTER.type_meta(), "metadata": meta}


async def test_a_noisy_objects_backlog_never_delays_another_objects_events() -> None:
    writer = Writer()
    async with recording(writer, workers=2) as recorder:
        for i in range(40):  # distinct messages: 9 Events, then the combined one, then dropped
            recorder.post(body("noisy"), "Warning", "FailedToCreateWorkerPod", f"refused {i}")
        recorder.post(body("quiet"), "Normal", "CreatedWorkerPod", "created")
        await until(lambda: [c for c in writer.calls if c[1].startswith("quiet.")] != [])
        assert writer.calls == [("create", writer.calls[0][1], 1)]  # quiet's, while noisy's hang
        writer.release.set()
        await until(lambda: len(writer.calls) == 11)
        noisy = [c for c in writer.calls if c[1].startswith("noisy.")]
        assert len({name for _, name, _ in noisy}) == 10
        assert noisy[-1][0] == "create"  # the combined Event: created once, its count merged while queued
        assert noisy[-1][2] == 25 - 9


async def test_an_event_that_expired_is_created_again_with_its_count() -> None:
    writer = Writer()
    async with recording(writer) as recorder:
        recorder.post(body("quiet"), "Warning", "FailedToCreateWorkerPod", "quota")
        await until(lambda: len(writer.calls) == 1)
        name = writer.calls[0][1]
        writer.gone.add(name)
        recorder.post(body("quiet"), "Warning", "FailedToCreateWorkerPod", "quota")
        await until(lambda: len(writer.calls) == 3)
        assert writer.calls[1:] == [("patch", name, 2), ("create", name, 2)]


def test_a_recorder_needs_somewhere_to_write() -> None:
    with pytest.raises(ValueError, match="api client or a writer"):
        EventRecorder()


class Breaking(Writer):
    """Every create fails with an error no one foresaw, until `fixed`."""

    def __init__(self) -> None:
        super().__init__()
        self.fixed = False
        self.failed = 0

    async def create(self, event: dict[str, Any]) -> bool:
        if not self.fixed:
            self.failed += 1
            raise RuntimeError("Server disconnected")
        return await super().create(event)


async def test_a_worker_that_saw_an_unforeseen_error_goes_on_and_stops_cleanly() -> None:
    writer = Breaking()
    async with recording(writer) as recorder:  # stops without re-raising
        recorder.post(body("a"), "Normal", "CreatedWorkerPod", "lost")
        await until(lambda: writer.failed == 1)
        writer.fixed = True
        recorder.post(body("b"), "Normal", "CreatedWorkerPod", "sent")
        await until(lambda: len(writer.calls) == 1)  # the one worker is still there


async def test_a_broken_connection_is_a_failed_call() -> None:
    async def disconnected() -> None:
        raise aiohttp.ServerDisconnectedError()

    with pytest.raises(ops.KubeError, match="create pod: ServerDisconnectedError") as caught:
        await ops.send(disconnected(), "create pod")
    assert caught.value.status == 0
