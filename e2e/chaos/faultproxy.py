"""A fault-injecting reverse proxy in front of a kube-apiserver, for the chaos tests.

`rayscale run --kubeconfig <proxy.kubeconfig>` talks to the proxy on plain HTTP
(127.0.0.1, a free port, no auth); the proxy forwards every request to the API server of the
kubeconfig it was given (HTTPS, with that kubeconfig's client certificate or token), streaming
request bodies and responses both ways, long-lived watches included. A test changes the faults
while it runs::

    with FaultProxy.running(cluster.kubeconfig) as proxy:   # its own thread and event loop
        op = Operator(cluster, ns, extra=["--kubeconfig", str(proxy.kubeconfig)])
        proxy.set_rules([Rule(status=500, method="POST", path=r"/pods$", probability=0.3)])
        proxy.cut_watches()                 # every open watch response ends mid-stream
        proxy.refuse_connections(5)         # listener closed for 5 s: ECONNREFUSED
        proxy.black_hole(5)                 # requests accepted and never answered for 5 s
        proxy.counts()                      # {"500 POST /pods$": 7, "forwarded": 412, ...}

Inside a test's own event loop, ``async with FaultProxy.serving(kubeconfig)`` runs it there
instead; the methods are the same and may be called from any thread.

Rules (`Rule`) are tried in order for every request. A rule matches by method, a regex searched
in the URL path, and watch or not; a matching rule fires with its `probability`, at most `times`
times. Its action is one of:

- ``status``: answer with that code and a Kubernetes ``Status`` body (reason ``Conflict``,
  ``TooManyRequests``, ``InternalError``, ...; 429 and 503 carry ``Retry-After`` and
  ``details.retryAfterSeconds``). Nothing reaches the API server, unless ``lose_response``: then
  the request is forwarded (the write happens) and the client still gets the error, as when a
  response is lost on the way back.
- ``disconnect``: close the connection without an answer (the client sees the server
  disconnect, as when an API server restarts or a load balancer drops an idle connection just
  as it is reused); with ``lose_response``, after forwarding.
- ``delay``: wait that long, then go on to the next rules (delays add up).
- ``hang``: never answer (until the client gives up or the proxy stops).
- ``cut_after``: a watch it matches is cut that many seconds after it opens.

A request that no firing rule answers is forwarded. Counters: each rule's name counts its
firings; ``forwarded`` (requests sent to the API server), ``watches_cut``, ``black_holed``
(requests held by a black hole) and ``connections_dropped`` (client connections closed by
`refuse_connections` or at the end of a black hole).

Faults on connections, for a while:

- `refuse_connections(s)`: the listening socket is closed (new connections get ECONNREFUSED, as
  from a stopped API server) and every open connection is closed; the same port listens again
  after `s` seconds.
- `black_hole(s)`: requests are accepted and not answered, open responses (watches too) stop
  delivering; after `s` seconds every connection open during it is closed, as a network
  partition ends for clients whose connections timed out. New connections are served again.

`cut_watches(path=None, clean=False)` ends open watch responses now: by default the connection
is aborted mid-stream (the client sees an incomplete chunked body); ``clean=True`` ends the
response properly, as the API server does when a watch's ``timeoutSeconds`` is up.

Not supported: protocol upgrades (exec, attach, port-forward), and kubeconfigs whose user
authenticates with an ``exec`` or ``auth-provider`` plugin.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import json
import random
import re
import ssl
import tempfile
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import yaml
from aiohttp import web
from multidict import CIMultiDict

__all__ = ["FaultProxy", "Rule", "Upstream", "read_upstream", "status_body"]

T = TypeVar("T")
HOST = "127.0.0.1"
# Headers of one connection, not of the request (RFC 9110 7.6.1), and the ones we set ourselves.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "authorization",
    }
)
# The `reason` the API server gives with each code (k8s.io/apimachinery metav1.StatusReason).
REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass(frozen=True)
class Rule:
    """One fault: which requests it matches, how often it fires, and its one action."""

    # action (exactly one)
    status: int | None = None  # answer with this code and a Status body
    delay: float = 0.0  # seconds of latency added, then the next rules
    hang: bool = False  # never answer
    disconnect: bool = False  # close the connection without an answer
    cut_after: float | None = None  # cut a matching watch this many seconds after it opens
    # match
    method: str | None = None  # "POST"; None: any
    path: str | None = None  # regex searched in the URL path (no query); None: any
    watch: bool | None = None  # True: only watches; False: no watches; None: both
    # how often
    probability: float = 1.0
    times: int | None = None  # fire at most this many times; None: no limit
    # details
    retry_after: int = 1  # seconds, for 429 and 503
    lose_response: bool = False  # with status or disconnect: forward first, then fail anyway
    name: str = ""  # the counter's key; default: built from the fields above

    def __post_init__(self) -> None:
        actions = {
            "status": self.status is not None,
            "delay": self.delay > 0,
            "hang": self.hang,
            "disconnect": self.disconnect,
            "cut_after": self.cut_after is not None,
        }
        if sum(actions.values()) != 1:
            raise ValueError(f"a Rule needs exactly one of {', '.join(actions)}: {self!r}")
        if self.status is not None and not 400 <= self.status <= 599:
            raise ValueError(f"Rule.status must be an HTTP error code (400-599), got {self.status}")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"Rule.probability must be within [0, 1], got {self.probability}")
        if self.lose_response and self.status is None and not self.disconnect:
            raise ValueError("Rule.lose_response needs a status or disconnect")
        if self.path is not None:
            re.compile(self.path)
        if not self.name:
            if self.delay > 0:
                action = f"delay {self.delay:g}s"
            elif self.cut_after is not None:
                action = f"cut after {self.cut_after:g}s"
            else:
                action = (
                    str(self.status) if self.status is not None else "hang" if self.hang else "disconnect"
                )
                action += " after forwarding" if self.lose_response else ""
            parts = [action, self.method or "", self.path or "", "watch" if self.watch else ""]
            object.__setattr__(self, "name", " ".join(p for p in parts if p))

    def matches(self, method: str, path: str, watch: bool) -> bool:
        return (
            (self.method is None or self.method.upper() == method)
            and (self.watch is None or self.watch == watch)
            and (self.path is None or re.search(self.path, path) is not None)
        )


def status_body(code: int, message: str, retry_after: int | None = None) -> dict[str, Any]:
    """A Kubernetes `Status` as the API server writes it for an error `code`."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": REASONS.get(code, "InternalError" if code >= 500 else "BadRequest"),
        "code": code,
    }
    if retry_after is not None:
        body["details"] = {"retryAfterSeconds": retry_after}
    return body


# ------------------------------------------------------------------------------- the upstream


@dataclass(frozen=True)
class Upstream:
    """Where and how to reach the API server, from a kubeconfig's current context."""

    server: str  # https://host:port, no trailing slash
    tls: ssl.SSLContext | None  # None for a plain-HTTP server
    headers: Mapping[str, str] = field(default_factory=dict)  # Authorization, when a token
    server_hostname: str | None = None  # tls-server-name
    namespace: str | None = None  # the context's namespace


def read_upstream(kubeconfig: Path, workdir: Path) -> Upstream:
    """Read the current context of `kubeconfig`; inline certificates and keys are written to
    `workdir` (ssl can load a client certificate only from a file)."""
    doc: dict[str, Any] = yaml.safe_load(kubeconfig.read_text())

    def entry(kind: str, name: str) -> dict[str, Any]:
        for item in doc.get(kind + "s") or []:
            if item.get("name") == name:
                found: dict[str, Any] = item.get(kind) or {}
                return found
        raise ValueError(f"{kubeconfig}: no {kind} named {name!r}")

    context = entry("context", str(doc.get("current-context", "")))
    cluster = entry("cluster", context["cluster"])
    user = entry("user", context["user"]) if context.get("user") else {}
    if user.get("exec") or user.get("auth-provider"):
        raise ValueError(f"{kubeconfig}: exec and auth-provider credentials are not supported")

    def pem(section: dict[str, Any], key: str) -> Path | None:
        if section.get(key + "-data"):
            out = workdir / f"upstream-{key}.pem"
            out.touch(mode=0o600)
            out.write_bytes(base64.b64decode(section[key + "-data"]))
            return out
        if section.get(key):
            return kubeconfig.parent / str(section[key])  # an absolute path stays as it is
        return None

    server = str(cluster["server"]).rstrip("/")
    context_ssl: ssl.SSLContext | None = None
    if server.startswith("https://"):
        ca = pem(cluster, "certificate-authority")
        context_ssl = ssl.create_default_context(cafile=str(ca) if ca else None)
        if cluster.get("insecure-skip-tls-verify"):
            context_ssl.check_hostname = False
            context_ssl.verify_mode = ssl.CERT_NONE
        cert, key = pem(user, "client-certificate"), pem(user, "client-key")
        if cert and key:
            context_ssl.load_cert_chain(str(cert), str(key))
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = (kubeconfig.parent / str(user["tokenFile"])).read_text().strip()
    return Upstream(
        server=server,
        tls=context_ssl,
        headers={"Authorization": f"Bearer {token}"} if token else {},
        server_hostname=cluster.get("tls-server-name"),
        namespace=context.get("namespace"),
    )


def proxy_kubeconfig(url: str, namespace: str | None) -> dict[str, Any]:
    context: dict[str, Any] = {"cluster": "faultproxy", "user": "faultproxy"}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "faultproxy", "cluster": {"server": url}}],
        "users": [{"name": "faultproxy", "user": {}}],
        "contexts": [{"name": "faultproxy", "context": context}],
        "current-context": "faultproxy",
    }


# ------------------------------------------------------------------------------- the proxy


@dataclass
class _Armed:
    """A rule as set, with how many firings it has left."""

    rule: Rule
    left: int | None


@dataclass
class _Plan:
    """What the rules decided for one request."""

    delay: float = 0.0
    answer: Rule | None = None  # the status, hang or disconnect rule that fired
    cut_after: float | None = None


@dataclass(eq=False)
class _Watch:
    """An open watch response: its pump copies the API server's stream to the client."""

    path: str
    pump: asyncio.Task[None]
    clean: bool = False  # set when cut with clean=True


class FaultProxy:
    """The proxy; make one with `running` (own thread) or `serving` (the current event loop)."""

    def __init__(self, upstream: Upstream, workdir: Path, *, seed: int | None = None) -> None:
        self.upstream = upstream
        self.kubeconfig = workdir / "kubeconfig"
        self.port = 0
        self._loop = asyncio.get_running_loop()
        self._random = random.Random(seed)
        self._rules: list[_Armed] = []
        self._counts: Counter[str] = Counter()
        self._watches: set[_Watch] = set()
        self._hole: asyncio.Event | None = None  # set while a black hole lasts
        self._timers: list[asyncio.TimerHandle] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._listener: asyncio.Server | None = None
        self._closing = False
        self._server = web.Server(self._handle, handler_cancellation=True, access_log=None)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=upstream.tls or False, limit=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            auto_decompress=False,
        )

    # -------------------------------------------------------------------- lifecycle

    @classmethod
    @contextlib.asynccontextmanager
    async def serving(cls, kubeconfig: Path, *, seed: int | None = None) -> AsyncIterator[FaultProxy]:
        """The proxy on the running event loop, stopped on exit."""
        with tempfile.TemporaryDirectory(prefix="faultproxy-") as tmp:
            workdir = Path(tmp)
            proxy = cls(read_upstream(kubeconfig, workdir), workdir, seed=seed)
            try:
                await proxy._listen()
                proxy.kubeconfig.write_text(
                    json.dumps(proxy_kubeconfig(proxy.url, proxy.upstream.namespace), indent=2)
                )
                yield proxy
            finally:
                await proxy._close()

    @classmethod
    @contextlib.contextmanager
    def running(cls, kubeconfig: Path, *, seed: int | None = None) -> Iterator[FaultProxy]:
        """The proxy in a thread with its own event loop (stalls of the caller's loop do not
        stall it), stopped on exit."""
        ready: concurrent.futures.Future[tuple[FaultProxy, asyncio.Future[None]]] = (
            concurrent.futures.Future()
        )

        async def serve() -> None:
            async with cls.serving(kubeconfig, seed=seed) as proxy:
                stop = asyncio.get_running_loop().create_future()
                ready.set_result((proxy, stop))
                await stop

        def main() -> None:
            try:
                asyncio.run(serve())
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                raise

        thread = threading.Thread(target=main, name="faultproxy", daemon=True)
        thread.start()
        proxy, stop = ready.result(timeout=30)
        try:
            yield proxy
        finally:
            proxy._loop.call_soon_threadsafe(stop.set_result, None)
            thread.join(timeout=30)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    async def _listen(self) -> None:
        if self._closing or self._listener is not None:
            return
        self._listener = await self._loop.create_server(self._server, HOST, self.port, reuse_address=True)
        self.port = self._listener.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        self._closing = True
        self._heal()
        if self._listener is not None:
            self._listener.close()
        self._drop_connections()
        await self._server.shutdown(timeout=1)
        await self._session.close()

    # -------------------------------------------------------------------- the API (any thread)

    def set_rules(self, rules: Sequence[Rule]) -> None:
        """Replace the rules (an empty list: no more rules). Counters are kept."""
        armed = [_Armed(r, r.times) for r in rules]
        self._call(lambda: setattr(self, "_rules", armed))

    def cut_watches(self, path: str | None = None, *, clean: bool = False) -> int:
        """End every open watch whose URL path `path` (a regex) is found in; how many."""
        return self._call(lambda: self._cut_watches(path, clean))

    def refuse_connections(self, seconds: float) -> None:
        """Close the listener and every connection; listen again after `seconds`."""
        self._call(lambda: self._refuse(seconds))

    def black_hole(self, seconds: float) -> None:
        """Answer nothing for `seconds`, then close every connection open during it."""
        self._call(lambda: self._black_hole(seconds))

    def heal(self) -> None:
        """End a refusal or black hole now and remove every rule."""
        self._call(self._heal)

    def counts(self) -> dict[str, int]:
        """What was injected: firings per rule name, and the proxy's own counters."""
        return self._call(lambda: dict(self._counts))

    def open_watches(self, path: str | None = None) -> int:
        """How many watch responses are open (whose URL path `path` is found in)."""
        return self._call(lambda: len(self._select(path)))

    def _call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the proxy's loop and return its result, from whichever thread calls."""
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is self._loop:
            return fn()
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except Exception as exc:
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return done.result(timeout=10)

    # -------------------------------------------------------------------- faults (proxy loop)

    def _select(self, path: str | None) -> list[_Watch]:
        return [w for w in self._watches if path is None or re.search(path, w.path)]

    def _cut_watches(self, path: str | None, clean: bool) -> int:
        chosen = self._select(path)
        for w in chosen:
            self._cut(w, clean)
        return len(chosen)

    def _cut(self, w: _Watch, clean: bool) -> None:
        if w in self._watches and not w.pump.done():
            self._watches.discard(w)
            w.clean = clean
            w.pump.cancel()
            self._counts["watches_cut"] += 1

    def _refuse(self, seconds: float) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            self._later(seconds, self._relisten)
        self._drop_connections()

    def _black_hole(self, seconds: float) -> None:
        if self._hole is None:
            self._hole = asyncio.Event()
            self._later(seconds, self._end_black_hole)

    def _end_black_hole(self) -> None:
        if self._hole is not None:
            self._hole.set()
            self._hole = None
            self._drop_connections()

    def _heal(self) -> None:
        self._rules = []
        for timer in self._timers:
            timer.cancel()
        self._timers = []
        self._end_black_hole()
        if self._listener is None and self.port:
            self._relisten()

    def _relisten(self) -> None:
        task = self._loop.create_task(self._listen())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _later(self, seconds: float, fn: Callable[[], object]) -> None:
        def fire() -> None:
            self._timers.remove(timer)
            fn()

        timer = self._loop.call_later(seconds, fire)
        self._timers.append(timer)

    def _drop_connections(self) -> None:
        for conn in self._server.connections:
            self._counts["connections_dropped"] += 1
            conn.force_close()

    def _plan(self, method: str, path: str, watch: bool) -> _Plan:
        plan = _Plan()
        for armed in self._rules:
            rule = armed.rule
            if armed.left == 0 or not rule.matches(method, path, watch):
                continue
            if rule.probability < 1.0 and self._random.random() >= rule.probability:
                continue
            if armed.left is not None:
                armed.left -= 1
            self._counts[rule.name] += 1
            if rule.delay > 0:
                plan.delay += rule.delay
            elif rule.cut_after is not None:
                if plan.cut_after is None:
                    plan.cut_after = rule.cut_after
            else:
                plan.answer = rule
                break
        return plan

    # -------------------------------------------------------------------- requests (proxy loop)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if self._hole is not None:
            self._counts["black_holed"] += 1
            await self._hole.wait()  # its end closes this connection
            return await _drop(request)
        # the API server reads the parameter with Go's strconv.ParseBool; kubernetes-asyncio sends "True"
        watch = request.query.get("watch", "").lower() in ("1", "t", "true") or "/watch/" in request.path
        plan = self._plan(request.method, request.path, watch)
        if plan.delay:
            await asyncio.sleep(plan.delay)
        rule = plan.answer
        if rule is not None and rule.hang:
            await asyncio.Event().wait()  # until the client goes or the proxy stops
        if rule is not None and not rule.lose_response:
            return await _drop(request, reset=False) if rule.disconnect else _error(rule)
        try:
            return await self._forward(request, watch, plan)
        except (aiohttp.ClientError, OSError):
            return await _drop(request)  # the API server went away: so does the connection

    async def _forward(self, request: web.BaseRequest, watch: bool, plan: _Plan) -> web.StreamResponse:
        headers = CIMultiDict((k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP)
        headers.update(self.upstream.headers)
        self._counts["forwarded"] += 1
        async with self._session.request(
            request.method,
            self.upstream.server + str(request.rel_url),
            headers=headers,
            data=request.content if request.body_exists else None,
            allow_redirects=False,
            skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"),
            server_hostname=self.upstream.server_hostname,
        ) as upstream:
            if plan.answer is not None:  # lose_response: the request took effect, the answer is lost
                await upstream.read()
                return await _drop(request, reset=False) if plan.answer.disconnect else _error(plan.answer)
            response = web.StreamResponse(
                status=upstream.status,
                reason=upstream.reason,
                headers=CIMultiDict(
                    (k, v) for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP
                ),
            )
            await response.prepare(request)
            pump = asyncio.create_task(self._pump(upstream, response))
            w = _Watch(request.path, pump)
            if watch:
                self._watches.add(w)
                if plan.cut_after is not None:
                    self._later(plan.cut_after, lambda: self._cut(w, clean=False))
            try:
                await asyncio.wait({pump})
            finally:
                self._watches.discard(w)
                pump.cancel()
            if pump.cancelled() and not w.clean:
                return await _drop(request)
            if not pump.cancelled():
                pump.result()  # an error from the API server's side drops the connection
            await response.write_eof()
            return response

    async def _pump(self, upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> None:
        async for chunk in upstream.content.iter_any():
            while self._hole is not None:
                await self._hole.wait()
            await response.write(chunk)


def _error(rule: Rule) -> web.Response:
    assert rule.status is not None
    retry_after = rule.retry_after if rule.status in (429, 503) else None
    body = status_body(rule.status, f"injected by the fault proxy (rule {rule.name!r})", retry_after)
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return web.json_response(body, status=rule.status, headers=headers)


async def _drop(request: web.BaseRequest, *, reset: bool = True) -> web.StreamResponse:
    """Abort (`reset`) or close the client's connection; aiohttp then cancels this handler."""
    if request.transport is not None and reset:
        request.transport.abort()
    elif request.transport is not None:
        request.transport.close()
    await asyncio.Event().wait()
    raise AssertionError("unreachable: the connection is gone")
