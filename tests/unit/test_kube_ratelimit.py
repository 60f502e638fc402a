"""The client-side rate limit (--kube-api-qps / --kube-api-burst), on virtual time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import client

from rayscale.kube.client import RayscaleApiClient
from rayscale.kube.flow import EVENTS, cluster_flow, job_flow, report_flow, working_for
from rayscale.kube.ratelimit import TokenBucket


class VirtualTime:
    """A clock that moves only when the test says; sleeps are recorded, not slept."""

    def __init__(self) -> None:
        self.now = 0.0
        self.log: list[tuple[str, float]] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.log.append(("sleep", seconds))
        await asyncio.sleep(0)  # let the others run: a real sleep would


def bucket(qps: float, burst: int, vt: VirtualTime) -> TokenBucket:
    return TokenBucket(qps, burst, clock=vt.clock, sleep=vt.sleep)


def test_a_full_bucket_lets_a_burst_through_then_paces_at_qps() -> None:
    vt = VirtualTime()
    b = bucket(10, 3, vt)
    delays = [b.reserve() for _ in range(6)]
    assert delays[:3] == [0, 0, 0]
    assert delays[3:] == pytest.approx([0.1, 0.2, 0.3])


def test_tokens_refill_with_time_up_to_burst() -> None:
    vt = VirtualTime()
    b = bucket(2, 4, vt)
    for _ in range(4):
        assert b.reserve() == 0
    vt.now = 1.0  # 2 tokens back
    assert [b.reserve(), b.reserve()] == [0, 0]
    assert b.reserve() == pytest.approx(0.5)
    vt.now = 100.0  # a long idle time refills to burst, not beyond
    assert [b.reserve() for _ in range(4)] == [0, 0, 0, 0]
    assert b.reserve() == pytest.approx(0.5)


def test_burst_below_one_still_allows_one_request() -> None:
    b = bucket(1, 0, VirtualTime())
    assert b.reserve() == 0
    assert b.reserve() == pytest.approx(1.0)


def test_qps_must_be_positive() -> None:
    with pytest.raises(ValueError, match="qps"):
        TokenBucket(0, 10)


async def test_concurrent_takers_are_paced_in_order() -> None:
    vt = VirtualTime()
    b = bucket(4, 2, vt)

    async def one(i: int) -> None:
        await b.take()
        vt.log.append(("done", i))

    await asyncio.gather(*(one(i) for i in range(6)))
    # Two go at once; the others wait a quarter second more each, all at the same virtual instant.
    waits = [s for what, s in vt.log if what == "sleep"]
    assert waits == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert [i for what, i in vt.log if what == "done"] == [0, 1, 2, 3, 4, 5]


async def test_every_request_of_the_api_client_takes_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    vt = VirtualTime()

    async def fake_request(self: Any, method: str, url: str, **_: Any) -> object:
        vt.log.append((method, 0))
        return object()

    monkeypatch.setattr(client.ApiClient, "request", fake_request)
    cfg = client.Configuration(host="https://example.invalid")
    api = RayscaleApiClient(cfg, bucket=bucket(2, 1, vt))
    try:
        core: Any = client.CoreV1Api(api)  # untyped: the body is a plain dict, responses raw
        await asyncio.gather(
            core.list_namespaced_pod("a", _preload_content=False),
            core.delete_namespaced_pod("p", "a", _preload_content=False),
            core.create_namespaced_service("a", {}, _preload_content=False),
        )
    finally:
        await api.close()
    # The first request goes at once, each later one only after its wait.
    assert vt.log == [("GET", 0), ("sleep", 0.5), ("sleep", 1.0), ("DELETE", 0), ("POST", 0)]


# ----------------------------------------------------------------------------- Events' own bucket


async def test_the_event_flow_has_a_bucket_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    vt = VirtualTime()
    sent: list[str] = []

    async def fake_request(self: Any, method: str, url: str, **_: Any) -> object:
        sent.append(url.rsplit("/", 1)[-1])
        return object()

    monkeypatch.setattr(client.ApiClient, "request", fake_request)
    cfg = client.Configuration(host="https://example.invalid")
    main, events = bucket(1, 1, vt), TokenBucket(1, 1, clock=vt.clock, sleep=vt.sleep)
    api = RayscaleApiClient(cfg, bucket=main, flow_buckets={EVENTS: events})
    try:
        core: Any = client.CoreV1Api(api)
        await core.create_namespaced_pod("a", {}, _preload_content=False)  # the main bucket's token
        with working_for(EVENTS):
            await core.create_namespaced_event("a", {}, _preload_content=False)  # its own: no wait
    finally:
        await api.close()
    assert sent == ["pods", "events"]
    assert vt.log == []  # nobody waited


async def test_a_request_body_of_plain_json_is_sent_as_it_is_not_copied() -> None:
    cfg = client.Configuration(host="https://example.invalid")
    api = RayscaleApiClient(cfg)
    try:
        body = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}}
        assert api.sanitize_for_serialization(body) is body
        assert api.sanitize_for_serialization([body]) == [body]
        assert api.sanitize_for_serialization(("a", 1)) == ("a", 1)  # anything else as before
    finally:
        await api.close()


async def test_each_request_is_told_to_the_observer_with_its_kind_and_flow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def fake_request(self: Any, method: str, url: str, **_: Any) -> object:
        return object()

    monkeypatch.setattr(client.ApiClient, "request", fake_request)
    seen: list[tuple[str, str, str]] = []
    cfg = client.Configuration(host="https://example.invalid")
    api = RayscaleApiClient(cfg, observe=lambda verb, resource, flow, _: seen.append((verb, resource, flow)))
    try:
        core: Any = client.CoreV1Api(api)
        with working_for(cluster_flow(("a", "rc"))):
            await core.create_namespaced_pod("a", {}, _preload_content=False)
        with working_for(report_flow(("a", "rc"))):
            await core.patch_namespaced_pod_status("p", "a", {}, _preload_content=False)
        with working_for(job_flow("rayjob", ("a", "job"))):
            await core.create_namespaced_service("a", {}, _preload_content=False)
        await core.list_namespaced_pod("a", _preload_content=False)
    finally:
        await api.close()
    assert seen == [
        ("create", "pods", "cluster"),
        ("patch", "pods/status", "report"),
        ("create", "services", "rayjob"),
        ("list", "pods", "other"),
    ]
