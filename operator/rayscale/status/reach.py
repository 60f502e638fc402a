"""How the CLI reaches the operator's read-only API (docs/status-cli.md).

With ``--endpoint URL`` it asks that URL (a local operator, a port-forward). Otherwise it goes
through the Kubernetes API server's proxy to an operator pod
(``/api/v1/namespaces/NS/pods/POD:PORT/proxy/...``): the pod that holds the leader-election Lease
(its ``holderIdentity`` is ``<pod name>_<uuid>``, see rayscale.kube.leader), or, without leader
election (no Lease), the first running pod with the chart's label. A standby that answers
``503 {"error": "not the leader", "leader": HOLDER}`` names the holder, which is asked instead.

Every failure to get an answer is `Unreachable`, with a one-line reason; an answer of 404 with the
operator's ``{"error": ...}`` (no such cluster, no such decision) is `NotServed`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp
from kubernetes_asyncio import client

from rayscale.kube.ops import KubeError, send
from rayscale.status.args import OperatorOptions

__all__ = [
    "API",
    "Answer",
    "EndpointTransport",
    "NotServed",
    "OperatorClient",
    "ProxyTransport",
    "Unreachable",
    "cluster_path",
    "fleet_path",
    "holder_pod",
    "proxy_path",
    "scenario_path",
]

API = "/api/v1"
TIMEOUT = 10.0  # seconds, per request
NOT_LEADER = "not the leader"


class Unreachable(Exception):
    """The operator could not be asked, or did not answer; the message says why, in one line."""


class NotServed(Exception):
    """The operator answered 404 with its own error: no such cluster, or no such decision."""


# ---------------------------------------------------------------------------- paths (pure)


def _segment(text: str) -> str:
    return quote(text, safe="")


def fleet_path() -> str:
    return f"{API}/clusters"


def cluster_path(namespace: str, name: str) -> str:
    return f"{API}/clusters/{_segment(namespace)}/{_segment(name)}"


def scenario_path(namespace: str, name: str, index: int) -> str:
    return f"{cluster_path(namespace, name)}/decisions/{index}/scenario"


def proxy_path(namespace: str, pod: str, port: int, path: str) -> str:
    """The API server's path that proxies `path` to `port` of `pod`."""
    return f"/api/v1/namespaces/{_segment(namespace)}/pods/{_segment(pod)}:{port}/proxy{path}"


def holder_pod(identity: str) -> str:
    """The pod of a Lease holder: its identity is ``<hostname>_<uuid>``, the hostname a pod's name
    (pod names never hold ``_``)."""
    return identity.partition("_")[0]


# ---------------------------------------------------------------------------- transports


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: Any  # the parsed JSON, or the text when it is not JSON


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _why(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError):  # "Cannot connect to host ... ssl:default [...]"
        return str(exc.os_error)
    return str(exc) or type(exc).__name__


class Transport(Protocol):
    via: str

    async def get(self, path: str) -> Answer: ...

    async def close(self) -> None: ...


class EndpointTransport:
    """The operator's API at a URL."""

    def __init__(self, url: str) -> None:
        self.base = url.rstrip("/")
        self.via = self.base
        self._session: aiohttp.ClientSession | None = None

    async def get(self, path: str) -> Answer:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT))
        try:
            async with self._session.get(self.base + path, headers={"Accept": "application/json"}) as resp:
                return Answer(resp.status, _parse(await resp.text()))
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Unreachable(f"cannot reach the operator at {self.base}: {_why(exc)}") from exc

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class ProxyTransport:
    """An operator pod, through the API server's pod proxy (needs get on pods/proxy)."""

    def __init__(self, api: client.ApiClient, namespace: str, pod: str, port: int) -> None:
        self.api = api
        self.namespace = namespace
        self.pod = pod
        self.port = port
        self.via = f"pod {namespace}/{pod}"

    async def get(self, path: str) -> Answer:
        where = proxy_path(self.namespace, self.pod, self.port, path)
        try:
            resp = await self.api.call_api(
                where,
                "GET",
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=TIMEOUT,
            )
            try:
                status, text = resp.status, await resp.text()
            finally:
                resp.release()
        except (aiohttp.ClientError, TimeoutError, client.ApiException) as exc:
            raise Unreachable(f"cannot reach the API server's proxy to {self.via}: {_why(exc)}") from exc
        body = _parse(text)
        if isinstance(body, dict) and body.get("kind") == "Status":  # the API server's own answer
            raise Unreachable(self._failure(status, body))
        return Answer(status, body)

    def _failure(self, status: int, body: dict[str, Any]) -> str:
        message = str(body.get("message") or body.get("reason") or status)
        if status == 403:
            return (
                f"not allowed to proxy to {self.via} (needs get on pods/proxy in {self.namespace}): {message}"
            )
        if status == 404 and (body.get("details") or {}).get("kind") == "pods":
            return f"the operator pod {self.namespace}/{self.pod} does not exist"
        return f"the API server could not reach {self.via} on port {self.port}: {message}"

    async def close(self) -> None:
        return None


# ---------------------------------------------------------------------------- the client


class OperatorClient:
    """Asks the operator's API. Where it is is found on first use and again after any failure (the
    leader may have changed meanwhile)."""

    def __init__(self, api: client.ApiClient | None, options: OperatorOptions) -> None:
        self.api = api
        self.options = options
        self._transport: Transport | None = None

    @property
    def via(self) -> str | None:
        """Where the latest answer came from."""
        return None if self._transport is None else self._transport.via

    async def close(self) -> None:
        if self._transport is not None:
            await self._transport.close()
            self._transport = None

    async def get(self, path: str) -> Any:
        """The operator's JSON answer to `path`; NotServed (its 404), Unreachable (anything else)."""
        try:
            if self._transport is None:
                self._transport = await self._locate()
            answer = await self._transport.get(path)
            leader = _not_leader(answer)
            if leader and not self.options.endpoint and self.api is not None:
                await self._transport.close()  # a standby: ask the leader it names, once
                self._transport = self._proxy(holder_pod(leader))
                answer = await self._transport.get(path)
            return self._body(answer, self._transport.via)
        except Unreachable:
            await self.close()
            raise

    def _body(self, answer: Answer, via: str) -> Any:
        body = answer.body
        error = body.get("error") if isinstance(body, dict) else None
        if answer.status == 200 and isinstance(body, dict):
            return body
        if answer.status == 404 and error:
            raise NotServed(str(error))
        leader = _not_leader(answer)
        if leader is not None:
            raise Unreachable(
                f"{via} is a standby, not the leader (the Lease is held by {leader or 'nobody'})"
            )
        detail = str(error or body)[:200].strip() or "(no body)"
        if answer.status == 404:
            detail = f"does not serve the status API (an older operator, or another port): {detail}"
            raise Unreachable(f"{via} {detail}")
        raise Unreachable(f"{via} answered {answer.status}: {detail}")

    def _proxy(self, pod: str) -> ProxyTransport:
        assert self.api is not None
        return ProxyTransport(self.api, self.options.namespace, pod, self.options.port)

    async def _locate(self) -> Transport:
        if self.options.endpoint:
            return EndpointTransport(self.options.endpoint)
        if self.api is None:
            raise Unreachable("no Kubernetes API to find the operator through (give --endpoint)")
        holder = await self._holder()
        if holder:
            return self._proxy(holder_pod(holder))
        pod = await self._labelled_pod()
        if pod:
            return self._proxy(pod)
        ns, lease, selector = self.options.namespace, self.options.lease, self.options.selector
        raise Unreachable(
            f"no operator found: nobody holds the Lease {ns}/{lease} and no running pod in {ns} "
            f"is labelled {selector} (see --operator-namespace, --endpoint)"
        )

    async def _holder(self) -> str | None:
        """The Lease's holder; None when there is no Lease or it is free."""
        ns, name = self.options.namespace, self.options.lease
        assert self.api is not None
        call = client.CoordinationV1Api(self.api).read_namespaced_lease(
            name, ns, _preload_content=False, _request_timeout=TIMEOUT
        )
        try:
            lease = await send(call, f"get Lease {ns}/{name}", body=True)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise Unreachable(f"cannot read the operator's Lease: {exc}") from exc
        holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
        return str(holder) if holder else None

    async def _labelled_pod(self) -> str | None:
        ns, selector = self.options.namespace, self.options.selector
        assert self.api is not None
        call = client.CoreV1Api(self.api).list_namespaced_pod(
            ns, label_selector=selector, _preload_content=False, _request_timeout=TIMEOUT
        )
        try:
            listed = await send(call, f"list pods {selector} in {ns}", body=True)
        except KubeError as exc:
            raise Unreachable(f"cannot look for the operator's pods: {exc}") from exc
        running = sorted(
            (p for p in listed.get("items") or [] if _running(p)),
            key=lambda p: (not _ready(p), str(p["metadata"]["name"])),
        )
        return str(running[0]["metadata"]["name"]) if running else None


def _not_leader(answer: Answer) -> str | None:
    """The holder a standby's 503 names ("" when it names none); None for any other answer."""
    body = answer.body
    if answer.status == 503 and isinstance(body, dict) and body.get("error") == NOT_LEADER:
        return str(body.get("leader") or "")
    return None


def _running(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get(
        "deletionTimestamp"
    )


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
