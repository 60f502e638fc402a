"""DashboardClient against an in-process stand-in of Ray 2.60's job REST API (aiohttp).

The stand-in answers as the real dashboard does: its error bodies are the ones a Ray 2.60 head
sent (a second submit with one submission id is HTTP 500 with the job agent's traceback wrapped
in the head's; a malformed request 400; an unknown job 404 "Job <id> does not exist"; a missing
token 401, a wrong one 403). tests/integration/test_ray_jobs.py runs the client against a real head.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from rayscale.fence import Fenced, WriteFence
from rayscale.ray import dashboard as dashboard_module
from rayscale.ray.dashboard import (
    DashboardClient,
    DashboardError,
    DashboardUnavailable,
    SubmitRequest,
    ray_message,
)

TOKEN = "rayscale-test-token-0123456789abcdef"
SITE = "/work/main/.venv/lib/python3.11/site-packages/ray/dashboard/modules/job"
# What Ray 2.60's dashboard answered (HTTP 500) to a second submit of "rec-rest-minimal".
ALREADY = (
    "Traceback (most recent call last):\n"
    f'  File "{SITE}/job_head.py", line 419, in submit_job\n'
    "    resp = await job_agent_client.submit_job_internal(submit_request)\n"
    f'  File "{SITE}/job_head.py", line 134, in _raise_error\n'
    '    raise RuntimeError(f"Request failed with status code {status}: {error_text}.")\n'
    "RuntimeError: Request failed with status code 400: Traceback (most recent call last):\n"
    f'  File "{SITE}/job_manager.py", line 553, in submit_job\n'
    "    raise ValueError(\n"
    "ValueError: Job with submission_id {id} already exists. Please use a different submission_id.\n"
    ".\n"
)
BAD_RUNTIME_ENV = (
    "Traceback (most recent call last):\n"
    f'  File "{SITE}/common.py", line 498, in __post_init__\n'
    "    raise TypeError(\n"
    "TypeError: runtime_env must be a dict, got <class 'str'>\n"
)
NOT_TERMINAL = (
    "Traceback (most recent call last):\n"
    f'  File "{SITE}/job_manager.py", line 657, in delete_job\n'
    "    raise RuntimeError(\n"
    "RuntimeError: Attempted to delete job '{id}', but it is in a non-terminal state RUNNING.\n"
)


class FakeDashboard:
    """Jobs by submission id, their statuses, and what was asked."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token
        self.jobs: dict[str, dict[str, Any]] = {}
        self.status: dict[str, str] = {}
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.lose_next_answer = False  # take the next submit, then drop the connection unanswered
        self.answering = asyncio.Event()  # cleared: every request waits until it is set again
        self.answering.set()
        self._ids = itertools.count(1)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._record_and_auth])
        app.router.add_post("/api/jobs/", self.submit)
        app.router.add_post("/api/jobs/{id}/stop", self.stop)
        app.router.add_delete("/api/jobs/{id}", self.delete)
        return app

    @web.middleware
    async def _record_and_auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append((request.method, request.raw_path, dict(request.headers)))
        await self.answering.wait()
        if self.token is not None:
            header = request.headers.get("authorization", "")
            if not header:
                return web.Response(status=401, text="Unauthorized: Missing authentication token")
            if header != f"Bearer {self.token}":
                return web.Response(status=403, text="Forbidden: Invalid authentication token")
        response: web.StreamResponse = await handler(request)
        return response

    async def submit(self, request: web.Request) -> web.Response:
        body = await request.json()
        if not isinstance(body.get("runtime_env", {}), dict):
            return web.Response(status=400, text=BAD_RUNTIME_ENV)
        submission_id = body.get("submission_id") or f"raysubmit_{next(self._ids)}"
        if submission_id in self.jobs:
            return web.Response(status=500, text=ALREADY.replace("{id}", submission_id))
        self.jobs[submission_id] = body
        self.status[submission_id] = "RUNNING"
        if self.lose_next_answer:
            self.lose_next_answer = False
            assert request.transport is not None
            request.transport.close()  # the job is there; its answer never arrives
        answer = {"job_id": submission_id, "submission_id": submission_id}
        return web.Response(text=json.dumps(answer), content_type="application/json")

    async def stop(self, request: web.Request) -> web.Response:
        submission_id = request.match_info["id"]
        if submission_id not in self.jobs:
            return web.Response(status=404, text=f"Job {submission_id} does not exist")
        running = self.status[submission_id] == "RUNNING"
        if running:
            self.status[submission_id] = "STOPPED"
        return web.Response(text=json.dumps({"stopped": running}), content_type="application/json")

    async def delete(self, request: web.Request) -> web.Response:
        submission_id = request.match_info["id"]
        if submission_id not in self.jobs:
            return web.Response(status=404, text=f"Job {submission_id} does not exist")
        if self.status[submission_id] == "RUNNING":
            return web.Response(status=500, text=NOT_TERMINAL.replace("{id}", submission_id))
        del self.jobs[submission_id]
        return web.Response(text=json.dumps({"deleted": True}), content_type="application/json")


async def serve(fake: FakeDashboard) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(fake.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeDashboard, str]]:
    dashboard = FakeDashboard()
    runner, address = await serve(dashboard)
    try:
        yield dashboard, address
    finally:
        dashboard.answering.set()
        await runner.cleanup()


REQUEST = SubmitRequest(
    entrypoint="python train.py",
    submission_id="rayjob-sample-x7k2p",
    runtime_env={"pip": ["requests==2.26.0"]},
    metadata={"owner": "rayscale"},
    entrypoint_num_cpus=1,
)


async def test_submit_posts_rays_request(fake: tuple[FakeDashboard, str]) -> None:
    dashboard, address = fake
    async with DashboardClient(address) as client:
        assert await client.submit(REQUEST) == "rayjob-sample-x7k2p"
        assert await client.submit(SubmitRequest("echo hi")) == "raysubmit_1"  # Ray names it
    assert dashboard.jobs["rayjob-sample-x7k2p"] == REQUEST.to_json()
    assert dashboard.jobs["raysubmit_1"] == {"entrypoint": "echo hi"}
    [(method, path, headers), _] = dashboard.requests
    assert (method, path) == ("POST", "/api/jobs/")
    assert headers["Content-Type"] == "application/json"
    assert "authorization" not in {h.lower() for h in headers}  # no token, no header


async def test_a_second_submit_of_one_id_is_the_same_job(fake: tuple[FakeDashboard, str]) -> None:
    dashboard, address = fake
    async with DashboardClient(address) as client:
        assert await client.submit(REQUEST) == REQUEST.submission_id
        assert await client.submit(REQUEST) == REQUEST.submission_id  # Ray's 500 "already exists"
    assert list(dashboard.jobs) == [REQUEST.submission_id]


async def test_a_submit_whose_answer_was_lost_is_retried_safely(fake: tuple[FakeDashboard, str]) -> None:
    dashboard, address = fake
    dashboard.lose_next_answer = True
    async with DashboardClient(address) as client:
        with pytest.raises(DashboardUnavailable) as lost:
            await client.submit(REQUEST)
        assert lost.value.status == 0
        assert REQUEST.submission_id in dashboard.jobs  # it did take effect
        assert await client.submit(REQUEST) == REQUEST.submission_id  # the caller's retry
    assert list(dashboard.jobs) == [REQUEST.submission_id]
    assert len(dashboard.requests) == 2


async def test_errors_carry_the_status_and_rays_reason(fake: tuple[FakeDashboard, str]) -> None:
    dashboard, address = fake
    bad = SubmitRequest("echo", submission_id="bad", runtime_env="pip: [x]")  # type: ignore[arg-type]
    async with DashboardClient(address) as client:
        with pytest.raises(DashboardError) as refused:
            await client.submit(bad)
        assert refused.value.status == 400
        assert refused.value.message == "TypeError: runtime_env must be a dict, got <class 'str'>"
        assert refused.value.body == BAD_RUNTIME_ENV
        assert str(refused.value) == (
            f"Ray dashboard {address}: submit failed: HTTP 400: "
            "TypeError: runtime_env must be a dict, got <class 'str'>"
        )
        await client.submit(REQUEST)
        with pytest.raises(DashboardError, match="non-terminal state RUNNING") as live:
            await client.delete(REQUEST.submission_id or "")
        assert live.value.status == 500
    assert "bad" not in dashboard.jobs


async def test_stop_and_delete(fake: tuple[FakeDashboard, str]) -> None:
    dashboard, address = fake
    async with DashboardClient(address) as client:
        await client.submit(SubmitRequest("sleep 600", submission_id="a/b c"))
        assert await client.stop("a/b c") is True
        assert await client.stop("a/b c") is False  # no longer running
        assert await client.stop("unknown") is False  # Ray's 404
        assert await client.delete("a/b c") is True
        assert await client.delete("a/b c") is False  # gone: 404
    paths = [(m, p) for m, p, _ in dashboard.requests]
    assert paths[1:3] == [("POST", "/api/jobs/a%2Fb%20c/stop")] * 2
    assert paths[4] == ("DELETE", "/api/jobs/a%2Fb%20c")


async def test_the_token_goes_as_rays_own_client_sends_it() -> None:
    dashboard = FakeDashboard(token=TOKEN)
    runner, address = await serve(dashboard)
    try:
        async with DashboardClient(address) as anonymous:
            with pytest.raises(DashboardError) as missing:
                await anonymous.submit(REQUEST)
            assert (missing.value.status, missing.value.message) == (
                401,
                "Unauthorized: Missing authentication token",
            )
        async with DashboardClient(address, token="wrong") as wrong:
            with pytest.raises(DashboardError, match="HTTP 403: Forbidden"):
                await wrong.stop("x")
        async with DashboardClient(address.removeprefix("http://"), token=f" {TOKEN}\n") as client:
            assert await client.submit(REQUEST) == REQUEST.submission_id
        assert dashboard.requests[-1][2]["Authorization"] == f"Bearer {TOKEN}"
    finally:
        await runner.cleanup()


async def test_no_answer_in_time_is_unavailable(fake: tuple[FakeDashboard, str]) -> None:
    dashboard, address = fake
    dashboard.answering.clear()
    async with DashboardClient(address, timeout=0.2) as client:
        with pytest.raises(DashboardUnavailable, match=r"stop failed: no answer: no answer within 0.2s"):
            await client.stop("x")


async def test_nothing_listening_is_unavailable() -> None:
    runner, address = await serve(FakeDashboard())
    await runner.cleanup()  # the port is free again
    async with DashboardClient(address, timeout=5) as client:
        with pytest.raises(DashboardUnavailable) as refused:
            await client.delete("x")
    assert refused.value.status == 0
    assert refused.value.operation == "delete"


async def test_a_closed_write_fence_sends_nothing(
    fake: tuple[FakeDashboard, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dashboard, address = fake
    fence = WriteFence()
    fence.close()
    monkeypatch.setattr(dashboard_module, "WRITE_FENCE", fence)
    async with DashboardClient(address) as client:
        with pytest.raises(Fenced, match="submit"):
            await client.submit(REQUEST)
        with pytest.raises(Fenced, match="stop"):
            await client.stop("x")
        with pytest.raises(Fenced, match="delete"):
            await client.delete("x")
    assert dashboard.requests == []


def test_ray_message() -> None:
    assert ray_message(ALREADY.replace("{id}", "j")) == (
        "ValueError: Job with submission_id j already exists. Please use a different submission_id."
    )
    assert ray_message("Job x does not exist") == "Job x does not exist"
    assert ray_message("  Unauthorized: Missing authentication token\n") == (
        "Unauthorized: Missing authentication token"
    )
    assert ray_message("x" * 5000) == "x" * 2000


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="timeout"):
        DashboardClient("http://x", timeout=0)
    assert DashboardClient("head:8265/").address == "http://head:8265"
