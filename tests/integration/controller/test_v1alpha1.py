"""A RayCluster written as ray.io/v1alpha1, the older version KubeRay's CRD still serves: the API
server prunes it to v1alpha1's schema, stores it as v1 and serves it under both versions; the
controller, which watches v1, runs it like any other."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from kubernetes_asyncio import client

from rayscale.api.names import RAYCLUSTER
from tests.support.builders import example
from tests.support.kube import Kube
from tests.support.operators import Operator
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
V1ALPHA1 = dataclasses.replace(RAYCLUSTER, version="v1alpha1")  # the older version, served beside v1
NAME = "raycluster-basic"


def v1alpha1_cluster() -> dict[str, Any]:
    body = example("raycluster-basic.yaml")
    body["apiVersion"] = V1ALPHA1.api_version
    # numOfHosts is a v1 field v1alpha1 does not know: pruned, so the group gets v1's default (1).
    body["spec"]["workerGroupSpecs"][0].update({"replicas": 1, "numOfHosts": 2})
    return body


async def test_a_v1alpha1_raycluster_gets_its_pods_and_is_served_as_both_versions(
    api: client.ApiClient, namespace: str, operator: Operator
) -> None:
    kube = Kube(api, namespace)
    created = await kube.objects.create_namespaced_custom_object(*V1ALPHA1.at(namespace), v1alpha1_cluster())
    assert created["apiVersion"] == V1ALPHA1.api_version
    assert "numOfHosts" not in created["spec"]["workerGroupSpecs"][0]

    head = await eventually(lambda: kube.pods(NAME, group="headgroup"), timeout=60, message="head pod")
    assert head[0].metadata.labels["ray.io/node-type"] == "head"
    (owner,) = head[0].metadata.owner_references
    assert (owner.api_version, owner.kind, owner.uid) == (
        RAYCLUSTER.api_version,
        "RayCluster",
        created["metadata"]["uid"],
    )
    # One worker: the group's v1 numOfHosts is the default, not the pruned 2.
    await eventually(lambda: kube.running_workers(NAME, 1), timeout=60, message="1 running worker")

    async def ready() -> dict[str, Any] | None:
        body = await kube.get(NAME)
        return body if (body.get("status") or {}).get("state") == "ready" else None

    as_v1 = await eventually(ready, timeout=60, message="state ready, read as v1")
    assert as_v1["apiVersion"] == RAYCLUSTER.api_version
    assert as_v1["spec"]["workerGroupSpecs"][0]["numOfHosts"] == 1
    assert {c["type"] for c in as_v1["status"]["conditions"]} >= {"HeadPodReady", "RayClusterProvisioned"}

    as_v1alpha1 = await kube.objects.get_namespaced_custom_object(*V1ALPHA1.at(namespace), NAME)
    assert as_v1alpha1["apiVersion"] == V1ALPHA1.api_version
    assert as_v1alpha1["metadata"]["uid"] == created["metadata"]["uid"]
    status = as_v1alpha1["status"]
    assert (status["state"], status["availableWorkerReplicas"]) == ("ready", 1)
    assert "conditions" not in status  # not in v1alpha1's schema: pruned when served as v1alpha1

    # Deleted through v1alpha1: its pods go with it.
    await kube.objects.delete_namespaced_custom_object(*V1ALPHA1.at(namespace), NAME)

    async def gone() -> bool:
        return not await kube.pods(NAME, live=True)

    await eventually(gone, timeout=60, message="the cluster's pods deleted with it")


async def test_v1alpha1_requires_ray_start_params_as_in_kuberay(
    api: client.ApiClient, namespace: str, raycluster_crd: None
) -> None:
    body = v1alpha1_cluster()
    del body["spec"]["headGroupSpec"]["rayStartParams"]
    objects: Any = client.CustomObjectsApi(api)
    with pytest.raises(client.ApiException) as refused:
        await objects.create_namespaced_custom_object(*V1ALPHA1.at(namespace), body)
    assert refused.value.status == 422
    assert "spec.headGroupSpec.rayStartParams: Required value" in str(refused.value.body)
    body["apiVersion"] = RAYCLUSTER.api_version  # optional in v1
    await objects.create_namespaced_custom_object(*RAYCLUSTER.at(namespace), body)
