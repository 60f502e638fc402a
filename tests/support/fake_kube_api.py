"""A fake Kubernetes API server for the `rayscale status` tests, on a thread of its own.

It answers the few reads the CLI makes (a Lease, pods by label, RayClusters, RayResourceRequests,
Events) from plain dicts the test fills in, and proxies
``/api/v1/namespaces/NS/pods/POD:PORT/proxy/...`` to the aiohttp app the test gave that pod (the
operator's real status server), as the API server's pod proxy does; a pod without one answers
503 like a pod that does not listen. Failures are Kubernetes ``Status`` objects. `kubeconfig`
writes a kubeconfig that points at it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import ClientSession, web

from rayscale.common.types import Manifest


def status(code: int, message: str, kind: str | None = None) -> web.Response:
    body: Manifest = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "code": code,
    }
    if kind:
        body["details"] = {"kind": kind}
    return web.json_response(body, status=code)


def _matches(obj: Mapping[str, Any], selector: str | None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


@dataclass
class FakeKube:
    """What the fake API server holds; tests change it between calls."""

    leases: dict[tuple[str, str], Manifest] = field(default_factory=dict)
    pods: list[Manifest] = field(default_factory=list)
    rayclusters: list[Manifest] = field(default_factory=list)
    requests: list[Manifest] | None = field(default_factory=list)  # None: their CRD is not installed
    events: list[Manifest] = field(default_factory=list)
    operators: dict[str, web.Application] = field(default_factory=dict)  # pod -> its status server
    forbidden: set[str] = field(default_factory=set)  # kinds answered 403: "leases", "proxy", ...
    asked: list[str] = field(default_factory=list)  # paths, in order
    url: str = ""
    _ports: dict[str, int] = field(default_factory=dict)

    def app(self) -> web.Application:
        app = web.Application()
        app.add_routes(
            [
                web.get("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}", self.lease),
                web.get("/api/v1/namespaces/{ns}/pods", self.list_pods),
                web.get("/api/v1/pods", self.list_pods),
                web.get("/api/v1/namespaces/{ns}/pods/{target}/proxy{tail:.*}", self.proxy),
                web.get("/apis/ray.io/v1/namespaces/{ns}/rayclusters/{name}", self.raycluster),
                web.get("/apis/ray.io/v1/namespaces/{ns}/rayclusters", self.list_rayclusters),
                web.get("/apis/ray.io/v1/rayclusters", self.list_rayclusters),
                web.get("/apis/rayscale.io/v1alpha1/namespaces/{ns}/rayresourcerequests", self.list_requests),
                web.get("/api/v1/namespaces/{ns}/events", self.list_events),
            ]
        )

        @web.middleware
        async def record(request: web.Request, handler: Any) -> web.StreamResponse:
            self.asked.append(request.path)
            response: web.StreamResponse = await handler(request)
            return response

        app.middlewares.append(record)
        return app

    def _in(self, items: list[Manifest], request: web.Request) -> list[Manifest]:
        ns = request.match_info.get("ns")
        return [
            o
            for o in items
            if (ns is None or o["metadata"].get("namespace") == ns)
            and _matches(o, request.query.get("labelSelector"))
        ]

    async def lease(self, request: web.Request) -> web.Response:
        if "leases" in self.forbidden:
            return status(403, 'leases.coordination.k8s.io "rayscale" is forbidden', "leases")
        found = self.leases.get((request.match_info["ns"], request.match_info["name"]))
        if found is None:
            return status(
                404, f'leases.coordination.k8s.io "{request.match_info["name"]}" not found', "leases"
            )
        return web.json_response(found)

    async def list_pods(self, request: web.Request) -> web.Response:
        return web.json_response({"kind": "PodList", "items": self._in(self.pods, request)})

    async def raycluster(self, request: web.Request) -> web.Response:
        for rc in self._in(self.rayclusters, request):
            if rc["metadata"]["name"] == request.match_info["name"]:
                return web.json_response(rc)
        return status(404, f'rayclusters.ray.io "{request.match_info["name"]}" not found', "rayclusters")

    async def list_rayclusters(self, request: web.Request) -> web.Response:
        return web.json_response({"items": self._in(self.rayclusters, request)})

    async def list_requests(self, request: web.Request) -> web.Response:
        if self.requests is None:
            return web.Response(status=404, text="404 page not found")
        return web.json_response({"items": self._in(self.requests, request)})

    async def list_events(self, request: web.Request) -> web.Response:
        wanted = dict(t.partition("=")[::2] for t in request.query.get("fieldSelector", "").split(",") if t)
        items = [
            e
            for e in self._in(self.events, request)
            if all(e["involvedObject"].get(k.partition(".")[2]) == v for k, v in wanted.items())
        ]
        return web.json_response({"items": items})

    async def proxy(self, request: web.Request) -> web.Response:
        if "proxy" in self.forbidden:
            return status(403, 'pods "x" is forbidden: cannot get resource "pods/proxy"', "pods")
        pod, _, _port = request.match_info["target"].partition(":")
        if not any(p["metadata"]["name"] == pod for p in self._in(self.pods, request)):
            return status(404, f'pods "{pod}" not found', "pods")
        port = self._ports.get(pod)
        if port is None:
            return status(503, f"error trying to reach service: dial tcp 10.0.0.9:{_port}: connect: refused")
        async with (
            ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}{request.match_info['tail']}") as answer,
        ):
            return web.Response(
                status=answer.status, body=await answer.read(), content_type=answer.content_type
            )

    async def _start(self) -> None:
        self._runners: list[web.AppRunner] = []
        for pod, app in self.operators.items():
            self._ports[pod] = await self._serve(app)
        self.url = f"http://127.0.0.1:{await self._serve(self.app())}"

    async def _serve(self, app: web.Application) -> int:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runners.append(runner)
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def _stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()

    def operator_url(self, pod: str) -> str:
        return f"http://127.0.0.1:{self._ports[pod]}"

    def kubeconfig(self, path: Path, namespace: str = "team-a") -> Path:
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "me", "user": {"token": "t0ken"}}],
                    "contexts": [
                        {
                            "name": "fake",
                            "context": {"cluster": "fake", "user": "me", "namespace": namespace},
                        },
                        {"name": "other", "context": {"cluster": "fake", "user": "me"}},
                    ],
                    "current-context": "fake",
                }
            )
        )
        return path


@contextlib.contextmanager
def running(kube: FakeKube) -> Iterator[FakeKube]:
    """Serve `kube` (and its operators) on a thread's event loop while in the context."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def call(coro: Any) -> Any:
        done: Future[Any] = asyncio.run_coroutine_threadsafe(coro, loop)
        return done.result(timeout=30)

    call(kube._start())
    try:
        yield kube
    finally:
        call(kube._stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
