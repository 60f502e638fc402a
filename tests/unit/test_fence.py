"""The write fence: closed, no write leaves the process; reads always do.

The client tests run a real HTTP server on 127.0.0.1 and count what reaches it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client
from tests.support.fakes import ManualClock

from rayscale.fence import Fenced, WriteFence
from rayscale.kube.client import RayscaleApiClient


def test_a_fence_starts_open_closes_and_opens_until_a_deadline() -> None:
    clock = ManualClock(100.0)
    fence = WriteFence(clock)
    fence.check("anything")  # open: no leader election
    fence.close()
    with pytest.raises(Fenced, match="create pod: not sent"):
        fence.check("create pod")
    fence.open_until(110.0)
    fence.check("create pod")
    clock.now = 109.9
    assert fence.is_open
    clock.now = 110.0
    assert not fence.is_open


class Server:
    """Counts requests by method."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(request.method)
        return web.json_response({"kind": "Status", "metadata": {"name": "x"}})


@pytest.fixture
async def server() -> AsyncIterator[tuple[Server, str]]:
    srv = Server()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", srv.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield srv, f"http://127.0.0.1:{port}"
    await runner.cleanup()


def api_client(host: str, fence: WriteFence) -> RayscaleApiClient:
    cfg = client.Configuration(host=host)
    return RayscaleApiClient(cfg, fence=fence)


async def test_a_closed_fence_sends_reads_but_no_write(server: tuple[Server, str]) -> None:
    srv, host = server
    fence = WriteFence()
    api = api_client(host, fence)
    core: Any = client.CoreV1Api(api)  # untyped: bodies are plain dicts, responses raw
    try:
        await core.create_namespaced_pod("ns", {}, _preload_content=False)
        fence.close()
        with pytest.raises(Fenced):
            await core.create_namespaced_pod("ns", {}, _preload_content=False)
        with pytest.raises(Fenced):
            await core.patch_namespaced_pod("p", "ns", {}, _preload_content=False)
        with pytest.raises(Fenced):
            await core.delete_namespaced_pod("p", "ns", _preload_content=False)
        await core.list_namespaced_pod("ns", _preload_content=False)
    finally:
        await api.close()
    assert srv.seen == ["POST", "GET"]


async def test_a_write_is_checked_again_once_it_has_its_connection(server: tuple[Server, str]) -> None:
    """The fence is open when the write is made and closed by the time it has a connection (as
    after a wait for a rate-limit token or a free connection): it is not sent."""
    srv, host = server
    ticks = iter(range(1, 100))
    fence = WriteFence(clock=lambda: float(next(ticks)))
    fence.open_until(1.5)  # the first check (t=1) passes, the second (t=2) does not
    api = api_client(host, fence)
    core: Any = client.CoreV1Api(api)  # untyped: the body is a plain dict, the response raw
    try:
        with pytest.raises(Fenced):
            await core.create_namespaced_pod("ns", {}, _preload_content=False)
    finally:
        await api.close()
    assert srv.seen == []
