"""At most N requests at the API server at once, a transition flow's never waiting for a place."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import client

from rayscale.kube import flow
from rayscale.kube.client import RayscaleApiClient
from rayscale.kube.inflight import InFlight

TRANSITION = flow.transition_flow("rayjob", ("ns", "a"))
CLUSTER = flow.cluster_flow(("ns", "c"))


async def _hold(gate: InFlight, key: object, entered: list[object], release: asyncio.Event) -> None:
    async with gate.slot(key):
        entered.append(key)
        await release.wait()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_third_request_waits_for_a_place_and_gets_it_when_one_is_done() -> None:
    gate, release = InFlight(2), asyncio.Event()
    entered: list[object] = []
    tasks = [asyncio.create_task(_hold(gate, CLUSTER, entered, release)) for _ in range(3)]
    await _settle()
    assert len(entered) == 2
    assert gate.waiting() == 1
    release.set()
    await asyncio.gather(*tasks)
    assert len(entered) == 3
    assert gate.waiting() == 0


async def test_a_transition_goes_at_once_while_every_place_is_taken() -> None:
    gate, release = InFlight(1), asyncio.Event()
    entered: list[object] = []
    busy = [asyncio.create_task(_hold(gate, CLUSTER, entered, release)) for _ in range(2)]
    await _settle()
    assert entered == [CLUSTER]
    done = asyncio.Event()
    transition = asyncio.create_task(_hold(gate, TRANSITION, entered, done))
    await _settle()
    assert entered == [CLUSTER, TRANSITION]  # past the one waiting for a place
    done.set()
    release.set()
    await asyncio.gather(transition, *busy)


async def test_no_limit_never_waits() -> None:
    gate, release = InFlight(0), asyncio.Event()
    entered: list[object] = []
    tasks = [asyncio.create_task(_hold(gate, CLUSTER, entered, release)) for _ in range(50)]
    await _settle()
    assert len(entered) == 50
    assert gate.waiting() == 0
    release.set()
    await asyncio.gather(*tasks)


async def test_a_cancelled_waiter_gives_up_its_turn() -> None:
    gate, release = InFlight(1), asyncio.Event()
    entered: list[object] = []
    first = asyncio.create_task(_hold(gate, CLUSTER, entered, release))
    second = asyncio.create_task(_hold(gate, ("other",), entered, release))
    third = asyncio.create_task(_hold(gate, ("third",), entered, release))
    await _settle()
    second.cancel()
    release.set()
    await asyncio.gather(first, third)
    assert entered == [CLUSTER, ("third",)]


async def test_the_api_client_holds_a_place_while_a_request_is_at_the_api_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two creates at the API server with one place: the second waits until the first answered;
    a transition's status write meanwhile is sent at once."""
    answer = asyncio.Event()
    sent: list[str] = []

    async def fake_request(self: Any, method: str, url: str, **_: Any) -> object:
        sent.append(url.rsplit("/", 1)[-1])
        if url.endswith("pods"):
            await answer.wait()
        return object()

    monkeypatch.setattr(client.ApiClient, "request", fake_request)
    api = RayscaleApiClient(client.Configuration(host="https://example.invalid"), inflight=InFlight(1))
    try:
        core: Any = client.CoreV1Api(api)
        creates = [
            asyncio.create_task(core.create_namespaced_pod("a", {}, _preload_content=False)) for _ in range(2)
        ]
        await _settle()
        assert sent == ["pods"]
        with flow.working_for(TRANSITION):
            await core.replace_namespaced_pod_status("p", "a", {}, _preload_content=False)
        assert sent == ["pods", "status"]
        answer.set()
        await asyncio.gather(*creates)
        assert sent == ["pods", "status", "pods"]
    finally:
        await api.close()
