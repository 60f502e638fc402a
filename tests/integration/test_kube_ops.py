"""rayscale's raw API calls see the API server's errors (kubernetes-asyncio does not raise them
for unparsed replies, so ops checks the status itself)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from rayscale.api.names import RAYCLUSTER
from rayscale.kube import ops
from rayscale.kube.client import make_api_client


def service(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"clusterIP": "None", "ports": [{"port": 6379}]}}  # fmt: skip


async def test_conflicts_and_missing_objects_are_reported(api: client.ApiClient, namespace: str) -> None:
    assert await ops.create_service(api, namespace, service("svc")) is True
    assert await ops.create_service(api, namespace, service("svc")) is False  # 409: already exists
    assert await ops.delete_pod(api, namespace, "no-such-pod") is False  # 404
    assert await ops.patch_raycluster_status(api, namespace, "no-such-cluster", {"status": {}}) is False


async def test_a_rejected_create_raises_with_the_status(api: client.ApiClient, namespace: str) -> None:
    bad = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "bad-"},
        "spec": {"containers": []},
    }
    with pytest.raises(ops.KubeError) as err:
        await ops.create_pod(api, namespace, bad)
    assert err.value.status == 422
    assert "create pod" in str(err.value)


async def test_rayclusters_are_listed_in_pages_and_none_is_missed(
    api: client.ApiClient, namespace: str, raycluster_crd: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch-health check lists a fleet's RayClusters a page at a time, metadata only."""
    objects = client.CustomObjectsApi(api)
    names = {f"rc-{i:03d}" for i in range(23)}
    for name in sorted(names):
        body = {**RAYCLUSTER.type_meta(), "metadata": {"name": name},
                "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                    {"name": "ray-head", "image": "rayproject/ray:2.9.0"}]}}}}}  # fmt: skip
        await objects.create_namespaced_custom_object(*RAYCLUSTER.at(namespace), body)
    monkeypatch.setattr(ops, "LIST_PAGE", 5)  # 5 pages
    listed = await ops.list_rayclusters(api, namespace)
    assert sorted(o["metadata"]["name"] for o in listed) == sorted(names)  # each once
    assert all(set(o) == {"metadata"} and o["metadata"]["resourceVersion"] for o in listed)
    everywhere = await ops.list_rayclusters(api, None)
    assert names <= {o["metadata"]["name"] for o in everywhere if o["metadata"]["namespace"] == namespace}


async def test_calls_one_after_another_reuse_one_connection(
    cluster: testcluster.ClusterHandle, namespace: str
) -> None:
    """A write whose answer rayscale does not need still reads it: aiohttp closes the connection of
    an answer released unread, and each next call would open one (a TLS handshake each)."""
    api = await make_api_client(str(cluster.kubeconfig))
    opened: list[object] = []

    async def connected(*_: object) -> None:
        opened.append(_)

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(connected)
    old = api.rest_client.pool_manager
    connector = old.connector
    old.detach()
    api.rest_client.pool_manager = aiohttp.ClientSession(connector=connector, trace_configs=[trace])
    env = [{"name": f"VARIABLE_{i}", "value": "x" * 10_000} for i in range(80)]  # answers of 800 KB
    container = {"name": "c", "image": "rayproject/ray:2.9.0", "env": env}
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "big-"},
                "spec": {"containers": [container]}}  # fmt: skip
    core: Any = client.CoreV1Api(api)
    try:
        names = [(await core.create_namespaced_pod(namespace, manifest)).metadata.name for _ in range(4)]
        opened.clear()
        for name in names:
            assert await ops.delete_pod(api, namespace, name) is True
        assert await ops.delete_pod(api, namespace, "no-such-pod") is False
        assert len(opened) <= 1
    finally:
        await api.close()
