"""Leader election on a ``coordination.k8s.io/v1`` Lease, the way controller-runtime does it.

One replica holds the Lease and acts; the others wait. The holder renews the Lease every retry
period (2 s); when it cannot renew for the renew deadline (10 s), or finds someone else holding
it, it has lost and must stop at once. A waiting replica takes the Lease when it is free (no
holder: released by a clean shutdown) or expired: unchanged for its ``leaseDurationSeconds`` (15 s)
as measured on the waiter's own monotonic clock since it last saw the Lease change, so clock skew
between machines does not matter. Every write is a replace guarded by ``resourceVersion``: of two
replicas that try at once, one gets a 409 and keeps waiting.

While it leads, the holder's writes are fenced (`rayscale.fence`): each renewal opens the fence
until the renewal's start plus the renew deadline, measured on the holder's clock before it even
read the Lease, so the fence closes at least a lease duration minus the renew deadline (5 s) before
any standby may take over; losing or releasing the Lease closes it at once.

The decision (`observe`, `can_take`) is pure; `LeaderElector` drives it against a `LeaseStore`
(`KubeLeaseStore` on the API server, a fake in the unit tests), with an injectable clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kubernetes_asyncio import client

from rayscale.fence import WriteFence
from rayscale.kube.ops import KubeError, send

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Timings:
    """controller-runtime's defaults."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("need 0 < retry_period < renew_deadline < lease_duration")


@dataclasses.dataclass(frozen=True)
class LeaseRecord:
    """The Lease's spec, and the resourceVersion it was read at ("" before it exists)."""

    holder: str = ""
    duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0
    resource_version: str = ""


@dataclasses.dataclass(frozen=True)
class Observation:
    """A Lease as last seen, and when (local monotonic time) it last changed."""

    record: LeaseRecord
    seen_at: float


def observe(previous: Observation | None, record: LeaseRecord, now: float) -> Observation:
    """The new observation: the clock restarts only when the Lease changed."""
    if previous is not None and previous.record.resource_version == record.resource_version:
        return previous
    return Observation(record, now)


def can_take(observed: Observation, identity: str, now: float) -> bool:
    """May `identity` write the Lease: it is free, ours, or expired by our own clock?"""
    record = observed.record
    if not record.holder or record.holder == identity:
        return True
    return now >= observed.seen_at + record.duration_seconds


def default_identity() -> str:
    """hostname (the pod name in a cluster) and a uuid: distinct for every process."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def micro_time() -> str:
    """Now, as a Kubernetes MicroTime (RFC 3339, microseconds, UTC)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Conflict(Exception):
    """Someone else wrote the Lease first (409), or it vanished under an update (404)."""


class LeaseStore(Protocol):
    name: str

    async def get(self) -> LeaseRecord | None: ...

    async def create(self, record: LeaseRecord) -> LeaseRecord: ...

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        """Replace the Lease if it is still at `record.resource_version`, else Conflict."""
        ...


class LeaderElector:
    def __init__(
        self,
        store: LeaseStore,
        identity: str,
        timings: Timings = Timings(),
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], str] = micro_time,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        fence: WriteFence | None = None,
    ) -> None:
        self.store = store
        self.fence = fence
        self.identity = identity
        self.timings = timings
        self._clock = clock
        self._wall = wall
        self._sleep = sleep
        self.observed: Observation | None = None
        self._renewed_at = 0.0

    @property
    def holder(self) -> str:
        return self.observed.record.holder if self.observed else ""

    @property
    def is_leader(self) -> bool:
        return self.holder == self.identity

    async def try_acquire_or_renew(self) -> bool:
        """One attempt: True when we hold the Lease now (created, taken over or renewed)."""
        now = self._clock()
        current = await self.store.get()
        stamp = self._wall()
        duration = int(self.timings.lease_duration)
        if current is None:
            record = LeaseRecord(self.identity, duration, stamp, stamp, 0)
            return await self._write(self.store.create, record, now)
        self.observed = observe(self.observed, current, now)
        if not can_take(self.observed, self.identity, now):
            return False
        mine = current.holder == self.identity
        record = dataclasses.replace(
            current,
            holder=self.identity,
            duration_seconds=duration,
            acquire_time=current.acquire_time if mine else stamp,
            renew_time=stamp,
            transitions=current.transitions if mine else current.transitions + 1,
        )
        return await self._write(self.store.update, record, now)

    async def _write(
        self, write: Callable[[LeaseRecord], Awaitable[LeaseRecord]], record: LeaseRecord, started: float
    ) -> bool:
        """Write the Lease; on success we hold it from `started` (when this attempt began, before
        the Lease was read) for the renew deadline."""
        try:
            written = await write(record)
        except Conflict:
            return False
        self.observed = Observation(written, self._clock())
        self._renewed_at = started
        if self.fence is not None:
            self.fence.open_until(started + self.timings.renew_deadline)
        return True

    def _lost(self) -> None:
        if self.fence is not None:
            self.fence.close()

    async def acquire(self) -> None:
        """Return once we hold the Lease; log who holds it meanwhile."""
        reported: str | None = None
        while True:
            try:
                async with asyncio.timeout(self.timings.renew_deadline):
                    acquired = await self.try_acquire_or_renew()
                if acquired:
                    log.info("became leader: Lease %s held by %s", self.store.name, self.identity)
                    return
            except Exception as exc:  # any failure is a failed attempt: retry
                log.warning("leader election: cannot read or write Lease %s: %r", self.store.name, exc)
            if self.holder != reported:
                reported = self.holder
                log.info(
                    "waiting for leadership of Lease %s held by %s", self.store.name, reported or "nobody"
                )
            await self._sleep(self.timings.retry_period)

    async def hold(self) -> None:
        """Renew until leadership is lost, then return: renewals failed for the renew deadline, or
        someone else holds the Lease. The caller must stop acting at once."""
        while True:
            await self._sleep(self.timings.retry_period)
            left = self.timings.renew_deadline - (self._clock() - self._renewed_at)
            if left <= 0:
                self._lost()
                log.error("lost leadership: Lease %s not renewed for %.0fs", self.store.name,
                          self.timings.renew_deadline)  # fmt: skip
                return
            try:
                async with asyncio.timeout(left):
                    if await self.try_acquire_or_renew():
                        continue
            except Exception as exc:  # a failed renewal; the deadline decides
                log.warning("leader election: cannot renew Lease %s: %r", self.store.name, exc)
            if self.holder and not self.is_leader:
                self._lost()
                log.error("lost leadership: Lease %s is held by %s", self.store.name, self.holder)
                return

    async def release(self) -> None:
        """On a clean shutdown: leave the Lease free (no holder, 1 s), so a standby takes it at its
        next retry instead of waiting for the lease duration. Never overwrites a new holder."""
        self._lost()  # nothing more is written as leader
        if self.observed is None or not self.is_leader:
            return
        stamp = self._wall()
        record = dataclasses.replace(
            self.observed.record, holder="", duration_seconds=1, acquire_time=stamp, renew_time=stamp
        )
        try:
            async with asyncio.timeout(self.timings.retry_period):
                released = await self.store.update(record)
            self.observed = Observation(released, self._clock())
            log.info("released Lease %s", self.store.name)
        except Exception as exc:  # the Lease then expires by itself
            log.warning("could not release Lease %s: %r", self.store.name, exc)


class KubeLeaseStore:
    """A Lease on the API server; plain JSON bodies (MicroTime strings are kept as written)."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str) -> None:
        self.api: Any = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.lease = name
        self.name = f"{namespace}/{name}"

    async def get(self) -> LeaseRecord | None:
        call = self.api.read_namespaced_lease(self.lease, self.namespace, _preload_content=False)
        try:
            return _record(await send(call, f"get lease {self.name}", body=True))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        call = self.api.create_namespaced_lease(self.namespace, self._body(record), _preload_content=False)
        return await self._write(call, "create")

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        call = self.api.replace_namespaced_lease(
            self.lease, self.namespace, self._body(record), _preload_content=False
        )
        return await self._write(call, "update")

    async def _write(self, call: Awaitable[Any], verb: str) -> LeaseRecord:
        try:
            return _record(await send(call, f"{verb} lease {self.name}", body=True))
        except KubeError as exc:
            if exc.status in (404, 409):
                raise Conflict(str(exc)) from exc
            raise

    def _body(self, record: LeaseRecord) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.lease, "namespace": self.namespace}
        if record.resource_version:
            meta["resourceVersion"] = record.resource_version
        spec: dict[str, Any] = {
            "leaseDurationSeconds": record.duration_seconds,
            "leaseTransitions": record.transitions,
            "acquireTime": record.acquire_time,
            "renewTime": record.renew_time,
        }
        if record.holder:
            spec["holderIdentity"] = record.holder
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}


def _record(lease: dict[str, Any]) -> LeaseRecord:
    spec = lease.get("spec") or {}
    return LeaseRecord(
        holder=spec.get("holderIdentity") or "",
        duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=spec.get("acquireTime"),
        renew_time=spec.get("renewTime"),
        transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=str((lease.get("metadata") or {}).get("resourceVersion") or ""),
    )
