"""A configured kubernetes-asyncio ApiClient: in-cluster, or $KUBECONFIG / ~/.kube/config.

With ``qps > 0`` every request it sends first takes a token (``--kube-api-qps`` and
``--kube-api-burst``) from a FairTokenBucket, which serves the flows waiting for one in turn (a
RayCluster's reconcile is that cluster's flow, see `rayscale.kube.flow`). Events are written under a
bucket of their own of the same size, as client-go's event recorder has its own client (KubeRay's
operator included): a burst of pod creates and the Events that say so do not halve each other's
rate. kopf's own watches use kopf's session, not this client, and are not limited; kopf writes
nothing (rayscale's handlers only index and queue). The pod informer has a client of its own,
without a limit (`rayscale.handlers`).

With an `observe`, each request sent is told to it: its verb and resource (`request_kind`), its
flow's kind and how long it waited for its token (the operator's ``rayscale_kube_*`` metrics).

With a `fence`, every write (any method but GET, HEAD and OPTIONS) checks it twice: when the
request is made (before waiting for a rate-limit token) and again once it has its connection, just
before its first byte is sent, so a write that waited for a token or for a free connection while
the Lease was lost is never sent. See `rayscale.fence`.
"""

from __future__ import annotations

import os
import socket
import time
import types
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

from rayscale import __version__
from rayscale.fence import WriteFence
from rayscale.kube import flow
from rayscale.kube.fairbucket import FairTokenBucket
from rayscale.kube.ratelimit import Limiter, TokenBucket
from rayscale.kube.request_kind import request_kind

#: Told of each request sent: its verb, its resource, its flow's kind, seconds it waited for a token.
Observe = Callable[[str, str, str, float], None]

READS = frozenset({"GET", "HEAD", "OPTIONS"})


class RayscaleApiClient(client.ApiClient):
    """An ApiClient whose requests wait for a token of `bucket` (if any; of `flow_buckets[f]` when
    sent by a task of flow f, see `rayscale.kube.flow`), and whose writes are refused when `fence`
    (if any) is closed."""

    def __init__(
        self,
        configuration: client.Configuration,
        *,
        bucket: Limiter | None = None,
        flow_buckets: Mapping[Hashable, Limiter] | None = None,
        fence: WriteFence | None = None,
        observe: Observe | None = None,
    ) -> None:
        super().__init__(configuration=configuration)
        self.bucket = bucket
        self.flow_buckets = dict(flow_buckets or {})
        self.fence = fence
        self.observe = observe
        if fence is not None:
            _fence_connections(self.rest_client, fence)

    def sanitize_for_serialization(self, obj: Any) -> Any:
        """rayscale's requests carry plain JSON data (dicts, lists, strings, numbers), which
        kubernetes-asyncio would copy, every nested dict and list, on its way to `json.dumps`: a
        pod manifest's copy was 5% of the operator's CPU while it created pods."""
        if isinstance(obj, dict | list):
            return obj
        return super().sanitize_for_serialization(obj)

    async def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if self.fence is not None and method.upper() not in READS:
            self.fence.check(f"{method} {url}")
        key = flow.current()
        limiter = self.flow_buckets.get(key, self.bucket) if self.flow_buckets else self.bucket
        waited = 0.0
        if limiter is not None:
            asked = time.monotonic()
            await limiter.take(key)
            waited = time.monotonic() - asked
        if self.observe is not None:
            self.observe(*request_kind(method, url), flow.kind_of(key), waited)
        return await super().request(method, url, *args, **kwargs)


def _fence_connections(rest: Any, fence: WriteFence) -> None:
    """Give the rest client's aiohttp session a trace that checks `fence` for a write once the
    request has its connection (after any wait for the pool), just before it is sent."""

    async def started(_: aiohttp.ClientSession, ctx: types.SimpleNamespace, params: Any) -> None:
        ctx.write = f"{params.method} {params.url}" if params.method.upper() not in READS else ""

    async def connected(_: aiohttp.ClientSession, ctx: types.SimpleNamespace, __: Any) -> None:
        if getattr(ctx, "write", ""):
            fence.check(ctx.write)

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(started)
    trace.on_connection_create_end.append(connected)
    trace.on_connection_reuseconn.append(connected)
    old: aiohttp.ClientSession = rest.pool_manager
    connector = old.connector
    old.detach()  # the connector is handed over, not closed
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector, trust_env=_proxy_in_env(), read_bufsize=2**21, trace_configs=[trace]
    )


#: The variables through which aiohttp's ``trust_env`` takes a proxy from the environment.
PROXY_VARIABLES = ("https_proxy", "http_proxy", "all_proxy", "HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")


def _proxy_in_env() -> bool:
    """Whether the session should read the environment (``trust_env``): only when a proxy is set
    there. With ``trust_env`` aiohttp also looks for ~/.netrc on a thread for every request, a
    thread hop and a file lookup per API call that the API server's credentials never need."""
    return any(os.environ.get(name) for name in PROXY_VARIABLES)


async def make_api_client(
    kubeconfig: str | None = None,
    *,
    qps: float = 0.0,
    burst: int = 0,
    fence: WriteFence | None = None,
    connections: int = 64,
    observe: Observe | None = None,
) -> client.ApiClient:
    """The client; `qps` <= 0 means no client-side limit (`burst` is then ignored); at most
    `connections` requests at once (0: no limit); each request told to `observe`, if given."""
    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        await config.load_kube_config(config_file=path, client_configuration=cfg)
    cfg.connection_pool_maxsize = connections
    if qps > 0:
        bucket = FairTokenBucket(qps, burst)
        events: dict[Hashable, Limiter] = {flow.EVENTS: TokenBucket(qps, burst)}
        api = RayscaleApiClient(cfg, bucket=bucket, flow_buckets=events, fence=fence, observe=observe)
    else:
        api = RayscaleApiClient(cfg, fence=fence, observe=observe)
    api.user_agent = user_agent()
    return api


def user_agent() -> str:
    """``rayscale/<version> (<host>, pid <pid>)``: API server audit logs tell replicas apart."""
    return f"rayscale/{__version__} ({socket.gethostname()}, pid {os.getpid()})"
