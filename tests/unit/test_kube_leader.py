"""Leader election on a Lease: the decisions, and the elector against an in-memory Lease on virtual time
(tests/support/fakes.py's ManualClock, from 0: a sleep moves it on)."""

from __future__ import annotations

import dataclasses
import logging

import pytest
from tests.support.fakes import ManualClock

from rayscale.fence import WriteFence
from rayscale.kube.leader import (
    Conflict,
    LeaderElector,
    LeaseRecord,
    Observation,
    Timings,
    can_take,
    observe,
)


class Stop(Exception):
    """Ends a loop that would otherwise run forever."""


class FakeLease:
    """One Lease, with the API server's resourceVersion check; `down` makes every call fail."""

    name = "ns/rayscale"

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.version = 0
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise OSError("connection refused")

    def _store(self, record: LeaseRecord) -> LeaseRecord:
        self.version += 1
        self.record = dataclasses.replace(record, resource_version=str(self.version))
        return self.record

    async def get(self) -> LeaseRecord | None:
        self._check()
        return self.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        if self.record is not None:
            raise Conflict("exists")
        return self._store(record)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        if self.record is None or record.resource_version != self.record.resource_version:
            raise Conflict("modified")
        return self._store(record)


def elector(lease: FakeLease, identity: str, clock: ManualClock) -> LeaderElector:
    return LeaderElector(lease, identity, clock=clock, wall=lambda: f"t={clock.now}", sleep=clock.sleep)


def rec(holder: str, duration: int = 15, rv: str = "1") -> LeaseRecord:
    return LeaseRecord(holder=holder, duration_seconds=duration, resource_version=rv)


def test_a_free_lease_or_our_own_can_be_taken() -> None:
    assert can_take(Observation(rec(""), seen_at=0), "me", now=0)
    assert can_take(Observation(rec("me"), seen_at=0), "me", now=0)


def test_someone_elses_lease_only_once_unchanged_for_its_duration() -> None:
    seen = Observation(rec("other", duration=15), seen_at=100)
    assert not can_take(seen, "me", now=100)
    assert not can_take(seen, "me", now=114.9)
    assert can_take(seen, "me", now=115)


def test_the_expiry_clock_restarts_only_when_the_lease_changes() -> None:
    first = observe(None, rec("other", rv="1"), now=10)
    assert observe(first, rec("other", rv="1"), now=20) is first  # unchanged: still seen at 10
    renewed = observe(first, rec("other", rv="2"), now=20)
    assert renewed.seen_at == 20


def test_timings_must_be_ordered() -> None:
    Timings()
    with pytest.raises(ValueError, match="retry_period"):
        Timings(lease_duration=10, renew_deadline=10, retry_period=2)


async def test_one_holder_at_a_time_and_takeover_after_expiry() -> None:
    lease, clock = FakeLease(), ManualClock(0.0)
    a, b = elector(lease, "a", clock), elector(lease, "b", clock)
    assert await a.try_acquire_or_renew()
    assert lease.record is not None
    assert (lease.record.holder, lease.record.duration_seconds, lease.record.transitions) == ("a", 15, 0)
    assert not await b.try_acquire_or_renew()
    assert b.holder == "a"
    for _ in range(10):  # a renews every 2 s: b never sees it expire
        clock.now += 2
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
    acquired = lease.record.acquire_time
    assert lease.record.renew_time == f"t={clock.now}"
    assert acquired == "t=0.0"  # a renewal keeps the acquire time
    # a dies: b sees no change for 15 s on its own clock, then takes over
    clock.now += 14
    assert not await b.try_acquire_or_renew()
    clock.now += 1
    assert await b.try_acquire_or_renew()
    assert (lease.record.holder, lease.record.transitions) == ("b", 1)
    assert lease.record.acquire_time == f"t={clock.now}"
    # a comes back (a stale leader): it finds b holding the Lease and does not write
    assert not await a.try_acquire_or_renew()
    assert not a.is_leader
    assert lease.record.holder == "b"


async def test_two_candidates_racing_for_a_new_lease_get_one_winner() -> None:
    lease, clock = FakeLease(), ManualClock(0.0)
    a, b = elector(lease, "a", clock), elector(lease, "b", clock)
    # Both read "no Lease"; a creates first, b's create conflicts.
    original_get = lease.get

    async def stale_get() -> LeaseRecord | None:
        return None

    lease.get = stale_get  # type: ignore[method-assign]
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    lease.get = original_get  # type: ignore[method-assign]
    assert lease.record is not None
    assert lease.record.holder == "a"


async def test_release_frees_the_lease_for_the_standby_at_once() -> None:
    lease, clock = FakeLease(), ManualClock(0.0)
    a, b = elector(lease, "a", clock), elector(lease, "b", clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    await a.release()
    assert lease.record is not None
    assert (lease.record.holder, lease.record.duration_seconds) == ("", 1)
    assert await b.try_acquire_or_renew()  # no wait for the lease duration


async def test_release_never_overwrites_a_new_holder() -> None:
    lease, clock = FakeLease(), ManualClock(0.0)
    a, b = elector(lease, "a", clock), elector(lease, "b", clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.now += 15
    assert await b.try_acquire_or_renew()  # a stalled; it still believes it leads
    await a.release()
    assert lease.record is not None
    assert lease.record.holder == "b"


async def test_hold_returns_when_renewals_fail_for_the_renew_deadline() -> None:
    lease, clock = FakeLease(), ManualClock(0.0)
    a = elector(lease, "a", clock)
    assert await a.try_acquire_or_renew()
    lease.down = True
    await a.hold()
    assert clock.now == 10  # the renew deadline, well inside the 15 s a standby waits


async def test_hold_survives_a_short_outage() -> None:
    lease, clock = FakeLease(), ManualClock(0.0)
    a = elector(lease, "a", clock)
    assert await a.try_acquire_or_renew()
    lease.down = True
    clock.call_at(5, lambda: setattr(lease, "down", False))  # renewals at t=2 and t=4 fail, t=6 works

    def stop() -> None:
        raise Stop

    clock.call_at(7, stop)
    with pytest.raises(Stop):
        await a.hold()
    assert lease.record is not None
    assert lease.record.renew_time == "t=6.0"
    assert a.is_leader


async def test_hold_returns_at_once_when_someone_else_holds_the_lease() -> None:
    lease, clock = FakeLease(), ManualClock(0.0)
    a = elector(lease, "a", clock)
    assert await a.try_acquire_or_renew()
    assert lease.record is not None
    lease.record = dataclasses.replace(lease.record, holder="intruder", resource_version="99")
    await a.hold()
    assert clock.now == 2  # the first renewal found it
    assert a.holder == "intruder"


async def test_acquire_waits_and_says_for_whom(caplog: pytest.LogCaptureFixture) -> None:
    lease, clock = FakeLease(), ManualClock(0.0)
    a, b = elector(lease, "a", clock), elector(lease, "b", clock)
    assert await a.try_acquire_or_renew()
    with caplog.at_level(logging.INFO, logger="rayscale.kube.leader"):
        await b.acquire()  # a never renews: b gets it once 15 s passed
    assert clock.now == 16  # polled every 2 s
    assert b.is_leader
    waiting = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]
    assert waiting == ["waiting for leadership of Lease ns/rayscale held by a"]  # said once, not every poll


class SlowLease(FakeLease):
    """Each read takes `delay` seconds of virtual time: the renewal is stamped when it began."""

    def __init__(self, clock: ManualClock, delay: float) -> None:
        super().__init__()
        self.clock, self.delay = clock, delay

    async def get(self) -> LeaseRecord | None:
        self.clock.now += self.delay
        return await super().get()


async def test_the_fence_opens_from_the_start_of_each_renewal_for_the_renew_deadline() -> None:
    clock = ManualClock(0.0)
    lease = SlowLease(clock, delay=1.5)
    fence = WriteFence(clock)
    fence.close()
    a = LeaderElector(lease, "a", clock=clock, wall=lambda: "t", sleep=clock.sleep, fence=fence)
    assert await a.try_acquire_or_renew()  # began at t=0, written at t=1.5
    assert clock.now == 1.5
    assert fence.is_open
    clock.now = 9.99
    assert fence.is_open
    clock.now = 10.0  # 10 s after the attempt began, not after it ended
    assert not fence.is_open
    assert await a.try_acquire_or_renew()  # began at 10, written at 11.5
    clock.now = 19.99
    assert fence.is_open


async def test_the_fence_closes_when_the_lease_is_lost_or_released() -> None:
    lease, clock = FakeLease(), ManualClock(0.0)
    fence = WriteFence(clock)
    a = LeaderElector(lease, "a", clock=clock, wall=lambda: "t", sleep=clock.sleep, fence=fence)
    assert await a.try_acquire_or_renew()
    assert lease.record is not None
    lease.record = dataclasses.replace(lease.record, holder="intruder", resource_version="99")
    await a.hold()
    assert clock.now == 2
    assert not fence.is_open

    b = LeaderElector(lease, "b", clock=clock, wall=lambda: "t", sleep=clock.sleep, fence=fence)
    lease.record = dataclasses.replace(lease.record, holder="", resource_version="100")
    assert await b.try_acquire_or_renew()
    assert fence.is_open
    await b.release()
    assert not fence.is_open


async def test_a_renewal_that_fails_leaves_the_fence_to_close_at_the_deadline() -> None:
    lease, clock = FakeLease(), ManualClock(0.0)
    fence = WriteFence(clock)
    a = LeaderElector(lease, "a", clock=clock, wall=lambda: "t", sleep=clock.sleep, fence=fence)
    assert await a.try_acquire_or_renew()
    lease.down = True
    clock.now = 9.9
    assert fence.is_open
    clock.now = 10.0
    assert not fence.is_open  # before hold() has even noticed
