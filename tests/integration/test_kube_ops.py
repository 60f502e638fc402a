"""rayscale's raw API calls see the API server's errors (kubernetes-asyncio does not raise them
for unparsed replies, so ops checks the status itself)."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from rayscale.kube import ops


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
