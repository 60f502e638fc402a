"""kopf watches the custom resources: rayscale's kopf operator (`rayscale.handlers.registry`), run
by kopf in this process against the local control plane without the controller or the autoscaler,
keeps the RayClusters and RayResourceRequests in the indexes both halves read, says when they hold
every one that exists, and sees them go."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator
from typing import Any

import kopf
import pytest
from hack.localk8s import testcluster
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from rayscale import handlers
from rayscale.api.names import RAYCLUSTER, RAYRESOURCEREQUEST
from rayscale.controller.runner import ControllerConfig
from rayscale.kube.index_source import Indexes
from rayscale.metrics import Metrics
from tests.support.builders import example
from tests.support.polling import eventually

DEADLINE = 60.0


@contextlib.asynccontextmanager
async def kopf_running(runtime: handlers.Runtime, namespace: str) -> AsyncIterator[Indexes]:
    """kopf running rayscale's handlers on `namespace` until the block ends; its indexes once they
    hold every custom resource that exists (`Runtime.indexed`)."""
    stop = asyncio.Event()
    operator = asyncio.create_task(
        kopf.operator(
            registry=handlers.registry,
            namespaces=[namespace],
            standalone=True,
            memo=kopf.Memo(runtime=runtime),
            stop_flag=stop,
        )
    )
    try:
        await asyncio.wait_for(runtime.indexed.wait(), DEADLINE)
        assert runtime.indexes is not None
        yield runtime.indexes
    finally:
        stop.set()
        await asyncio.wait_for(operator, DEADLINE)
        gc.unfreeze()  # `handlers.configure` froze this test process's objects


async def test_kopf_indexes_the_custom_resources_and_sees_them_go(
    cluster: testcluster.ClusterHandle,
    api: client.ApiClient,
    namespace: str,
    raycluster_crd: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))  # kopf's login and rayscale's clients
    objects: Any = client.CustomObjectsApi(api)
    body = example("raycluster-basic.yaml")
    await objects.create_namespaced_custom_object(*RAYCLUSTER.at(namespace), body)
    key = (namespace, body["metadata"]["name"])
    metrics = Metrics(CollectorRegistry())
    runtime = handlers.Runtime(ControllerConfig(), [namespace], run_controller=False, metrics=metrics)
    async with kopf_running(runtime, namespace) as indexes:
        # Created before kopf started, in the index before the halves would start.
        kept = indexes.clusters.owned[key]
        assert "managedFields" not in kept["metadata"]
        assert (
            kept["spec"]["headGroupSpec"]["rayStartParams"] == body["spec"]["headGroupSpec"]["rayStartParams"]
        )
        request = {
            **RAYRESOURCEREQUEST.type_meta(),
            "metadata": {"name": "want"},
            "spec": {"clusterName": key[1], "bundles": [{"resources": {"CPU": "1"}}]},
        }
        await objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(namespace), request)
        await eventually(lambda: len(indexes.requests.of(key)) == 1, timeout=DEADLINE, message="the request")
        await objects.delete_namespaced_custom_object(*RAYRESOURCEREQUEST.at(namespace), "want")
        await eventually(lambda: not indexes.requests.of(key), timeout=DEADLINE, message="the request gone")
        await objects.delete_namespaced_custom_object(*RAYCLUSTER.at(namespace), key[1])
        await eventually(
            lambda: key not in indexes.clusters.owned, timeout=DEADLINE, message="the cluster gone"
        )
