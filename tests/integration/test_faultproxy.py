"""The chaos suite's fault proxy (e2e/chaos/faultproxy.py) in front of the real API server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from e2e.chaos.faultproxy import FaultProxy, Rule
from hack.localk8s import testcluster
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.support.polling import eventually

CONFIGMAPS = r"/configmaps$"


@pytest.fixture
def proxy(cluster: testcluster.ClusterHandle) -> Iterator[FaultProxy]:
    with FaultProxy.running(cluster.kubeconfig, seed=1) as p:
        yield p


@pytest.fixture
async def core(proxy: FaultProxy) -> AsyncIterator[client.CoreV1Api]:
    """A kubernetes-asyncio client that goes through the proxy."""
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(proxy.kubeconfig), client_configuration=cfg)
    async with client.ApiClient(configuration=cfg) as api:
        yield client.CoreV1Api(api)


def body_of(exc: ApiException) -> dict[str, Any]:
    """The Status the error came with."""
    assert exc.body is not None
    body: dict[str, Any] = json.loads(exc.body)
    return body


def configmap(name: str) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"k": "v"})


async def test_kubectl_and_kubernetes_asyncio_list_create_and_watch_through_it(
    cluster: testcluster.ClusterHandle, proxy: FaultProxy, core: client.CoreV1Api, namespace: str
) -> None:
    out = await asyncio.to_thread(
        subprocess.run,
        [cluster.kubectl, "--kubeconfig", str(proxy.kubeconfig), "get", "namespace", namespace, "-o", "name"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == f"namespace/{namespace}"

    seen: list[str] = []

    async def watch_one() -> None:
        w = watch.Watch()
        async with w.stream(core.list_namespaced_config_map, namespace, timeout_seconds=30) as events:
            async for event in events:
                name = event["object"].metadata.name
                if name in ("a", "b"):  # not the namespace's kube-root-ca.crt
                    seen.append(f"{event['type']} {name}")
                if name == "b":
                    return

    watcher = asyncio.create_task(watch_one())
    await eventually(lambda: proxy.open_watches(CONFIGMAPS) == 1, timeout=10, message="the watch is open")
    await core.create_namespaced_config_map(namespace, configmap("a"))
    await core.create_namespaced_config_map(namespace, configmap("b"))
    await asyncio.wait_for(watcher, timeout=20)
    assert seen == ["ADDED a", "ADDED b"]
    listed = await core.list_namespaced_config_map(namespace)
    assert {"a", "b"} <= {c.metadata.name for c in listed.items}
    assert proxy.counts()["forwarded"] >= 5


async def test_a_500_rule_fails_only_the_matching_calls(
    proxy: FaultProxy, core: client.CoreV1Api, namespace: str
) -> None:
    proxy.set_rules([Rule(status=500, method="POST", path=CONFIGMAPS, name="configmap creates")])
    with pytest.raises(ApiException) as failed:
        await core.create_namespaced_config_map(namespace, configmap("a"))
    assert failed.value.status == 500
    body = body_of(failed.value)
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "InternalError", 500)
    await core.list_namespaced_config_map(namespace)  # a GET of the same path passes
    await core.create_namespaced_secret(namespace, client.V1Secret(metadata=client.V1ObjectMeta(name="s")))
    assert proxy.counts()["configmap creates"] == 1
    proxy.set_rules([])
    await core.create_namespaced_config_map(namespace, configmap("a"))


async def test_times_probability_and_delay(proxy: FaultProxy, core: client.CoreV1Api, namespace: str) -> None:
    proxy.set_rules([Rule(status=409, method="POST", path=CONFIGMAPS, times=2)])
    for _ in range(2):
        with pytest.raises(ApiException) as failed:
            await core.create_namespaced_config_map(namespace, configmap("a"))
        assert (failed.value.status, body_of(failed.value)["reason"]) == (409, "Conflict")
    await core.create_namespaced_config_map(namespace, configmap("a"))

    proxy.set_rules([Rule(status=503, method="GET", path=CONFIGMAPS, probability=0.5, name="half")])
    statuses = [await list_status(core, namespace) for _ in range(40)]
    assert set(statuses) == {200, 503}
    assert statuses.count(503) == proxy.counts()["half"]

    proxy.set_rules([Rule(delay=0.5, path=CONFIGMAPS)])
    start = time.monotonic()
    await core.list_namespaced_config_map(namespace)
    assert time.monotonic() - start >= 0.5


async def list_status(core: client.CoreV1Api, namespace: str) -> int:
    try:
        await core.list_namespaced_config_map(namespace)
    except ApiException as exc:
        return int(exc.status)
    return 200


async def test_a_429_carries_retry_after(proxy: FaultProxy, core: client.CoreV1Api, namespace: str) -> None:
    proxy.set_rules([Rule(status=429, retry_after=7)])
    with pytest.raises(ApiException) as failed:
        await core.list_namespaced_config_map(namespace)
    assert failed.value.status == 429
    assert failed.value.headers is not None
    assert failed.value.headers["Retry-After"] == "7"
    body = body_of(failed.value)
    assert (body["reason"], body["details"]) == ("TooManyRequests", {"retryAfterSeconds": 7})


async def test_a_lost_response_fails_a_create_that_happened(
    proxy: FaultProxy, core: client.CoreV1Api, namespace: str
) -> None:
    proxy.set_rules([Rule(status=500, method="POST", path=CONFIGMAPS, lose_response=True)])
    with pytest.raises(ApiException) as failed:
        await core.create_namespaced_config_map(namespace, configmap("a"))
    assert failed.value.status == 500
    proxy.set_rules([])
    assert (await core.read_namespaced_config_map("a", namespace)).data == {"k": "v"}


async def test_disconnect_closes_without_an_answer(
    proxy: FaultProxy, core: client.CoreV1Api, namespace: str
) -> None:
    proxy.set_rules([Rule(disconnect=True, method="POST", path=CONFIGMAPS, times=1)])
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await core.create_namespaced_config_map(namespace, configmap("a"))
    proxy.set_rules([Rule(disconnect=True, method="POST", path=CONFIGMAPS, lose_response=True, times=1)])
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await core.create_namespaced_config_map(namespace, configmap("b"))
    names = {c.metadata.name for c in (await core.list_namespaced_config_map(namespace)).items}
    assert "a" not in names
    assert "b" in names


async def open_watch(
    session: aiohttp.ClientSession, proxy: FaultProxy, namespace: str
) -> aiohttp.ClientResponse:
    resp = await session.get(
        f"{proxy.url}/api/v1/namespaces/{namespace}/configmaps", params={"watch": "true"}
    )
    assert resp.status == 200
    await eventually(lambda: proxy.open_watches(CONFIGMAPS) == 1, timeout=10, message="the watch is open")
    return resp


async def test_cut_watches_ends_open_watches(proxy: FaultProxy, namespace: str) -> None:
    async with aiohttp.ClientSession() as session:
        resp = await open_watch(session, proxy, namespace)
        assert proxy.cut_watches(r"/pods$") == 0
        assert proxy.cut_watches(CONFIGMAPS) == 1
        with pytest.raises(aiohttp.ClientPayloadError):  # aborted mid-stream
            await asyncio.wait_for(resp.read(), timeout=10)

        resp = await open_watch(session, proxy, namespace)
        assert proxy.cut_watches(clean=True) == 1
        await asyncio.wait_for(resp.read(), timeout=10)  # a complete body, as at timeoutSeconds

        proxy.set_rules([Rule(cut_after=0.3, watch=True)])
        resp = await open_watch(session, proxy, namespace)
        with pytest.raises(aiohttp.ClientPayloadError):
            await asyncio.wait_for(resp.read(), timeout=10)
    assert proxy.counts()["watches_cut"] == 3


async def test_refused_then_back(proxy: FaultProxy, core: client.CoreV1Api, namespace: str) -> None:
    await core.list_namespaced_config_map(namespace)
    proxy.refuse_connections(1.0)
    async with aiohttp.ClientSession() as session:  # a new connection, not one of core's pool
        with pytest.raises(aiohttp.ClientConnectorError):
            await session.get(f"{proxy.url}/version")

    async def served() -> bool:
        try:
            await core.list_namespaced_config_map(namespace)
        except aiohttp.ClientError:  # refused, or a pooled connection the proxy closed
            return False
        return True

    await eventually(served, timeout=10, message="listening again")
    assert proxy.counts()["connections_dropped"] >= 1


async def test_black_hole_answers_nothing_then_drops(proxy: FaultProxy, namespace: str) -> None:
    url = f"{proxy.url}/api/v1/namespaces/{namespace}/configmaps"
    async with aiohttp.ClientSession() as session:
        watching = await open_watch(session, proxy, namespace)
        proxy.black_hole(1.5)
        with pytest.raises(TimeoutError):
            await session.get(url, timeout=aiohttp.ClientTimeout(total=0.5))
        # the held watch is closed when the hole ends
        with pytest.raises(aiohttp.ClientPayloadError):
            await asyncio.wait_for(watching.read(), timeout=10)

        async def served() -> bool:
            try:
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as resp:
                    return resp.status == 200
            except (TimeoutError, aiohttp.ClientError):
                return False

        await eventually(served, timeout=10, message="answering again")
    assert proxy.counts()["black_holed"] >= 1


def test_rules_are_checked() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Rule(status=500, delay=1.0)
    with pytest.raises(ValueError, match="exactly one"):
        Rule()
    with pytest.raises(ValueError, match="probability"):
        Rule(status=500, probability=2.0)
    assert Rule(status=500, method="POST", path="/pods$").name == "500 POST /pods$"
