"""The test cluster itself works: nodes, scheduling, garbage collection, namespaces.

These run against whatever cluster the `cluster` fixture found (the local control
plane, or kind with the same kwok node pools), so every later test can trust it.
"""

from __future__ import annotations

import pytest
from hack.localk8s.testcluster import ClusterHandle
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.support.polling import eventually

POOL_LABEL = "rayscale.io/node-pool"


def pause_pod(
    name: str, limits: dict[str, str], owner: client.V1OwnerReference | None = None
) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, owner_references=[owner] if owner else None),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    resources=client.V1ResourceRequirements(limits=limits, requests=limits),
                )
            ],
            termination_grace_period_seconds=0,
        ),
    )


async def test_fake_node_pools_are_ready_with_their_capacity(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)

    async def pools() -> dict[str, list[client.V1Node]]:
        nodes = (await core.list_node(label_selector=POOL_LABEL)).items
        by_pool: dict[str, list[client.V1Node]] = {}
        for node in nodes:
            ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
            assert ready, f"node {node.metadata.name} is not Ready"
            by_pool.setdefault(node.metadata.labels[POOL_LABEL], []).append(node)
        return by_pool

    by_pool = await eventually(pools, timeout=60, message="fake nodes Ready")
    assert len(by_pool["cpu"]) == 4
    assert len(by_pool["gpu"]) == 2
    assert len(by_pool["tpu"]) == 4
    for node in by_pool["cpu"]:
        assert node.status.allocatable["cpu"] == "16"
        assert node.status.allocatable["memory"] == "64Gi"
        assert "nvidia.com/gpu" not in node.status.allocatable
    for node in by_pool["gpu"]:
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        assert node.status.allocatable["cpu"] == "32"
    for node in by_pool["tpu"]:
        assert node.status.allocatable["google.com/tpu"] == "4"
        assert node.metadata.labels["cloud.google.com/gke-tpu-accelerator"] == "tpu-v4-podslice"
        assert node.metadata.labels["cloud.google.com/gke-tpu-topology"] == "2x2x2"


async def test_gpu_pod_lands_on_a_gpu_node_and_runs(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod(namespace, pause_pod("gpu", {"cpu": "1", "nvidia.com/gpu": "1"}))

    async def running() -> client.V1Pod | None:
        pod = await core.read_namespaced_pod("gpu", namespace)
        return pod if pod.status.phase == "Running" else None

    pod = await eventually(running, timeout=60, message="GPU pod Running")
    node = await core.read_node(pod.spec.node_name)
    assert node.metadata.labels[POOL_LABEL] == "gpu"


async def test_pod_larger_than_any_node_stays_pending_unschedulable(
    api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod(namespace, pause_pod("huge", {"cpu": "1000", "nvidia.com/gpu": "64"}))

    async def unschedulable() -> bool:
        pod = await core.read_namespaced_pod("huge", namespace)
        cond = [c for c in pod.status.conditions or [] if c.type == "PodScheduled"]
        return bool(cond) and cond[0].status == "False" and cond[0].reason == "Unschedulable"

    await eventually(unschedulable, timeout=60, message="PodScheduled=False/Unschedulable")
    pod = await core.read_namespaced_pod("huge", namespace)
    assert pod.status.phase == "Pending"
    assert pod.spec.node_name is None


async def test_deleting_the_owner_garbage_collects_its_pod(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    owner = await core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    ref = client.V1OwnerReference(api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid)
    await core.create_namespaced_pod(namespace, pause_pod("dependent", {"cpu": "100m"}, owner=ref))
    await eventually(
        lambda: _phase(core, namespace, "dependent"), timeout=60, message="dependent pod exists and runs"
    )

    await core.delete_namespaced_config_map("owner", namespace, propagation_policy="Background")

    async def gone() -> bool:
        try:
            await core.read_namespaced_pod("dependent", namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    await eventually(gone, timeout=60, message="dependent pod garbage-collected")


async def test_namespace_deletion_completes(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    name = f"{namespace}-x"
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    await core.create_namespaced_config_map(
        name, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="data"))
    )
    await core.delete_namespace(name)

    async def gone() -> bool:
        try:
            await core.read_namespace(name)
        except ApiException as exc:
            return exc.status == 404
        return False

    await eventually(gone, timeout=90, message=f"namespace {name} deleted")


async def test_server_reports_the_pinned_version(cluster: ClusterHandle, api: client.ApiClient) -> None:
    if not cluster.local:
        pytest.skip("only the local control plane is pinned")
    info = await client.VersionApi(api).get_code()
    assert info.git_version.startswith("v1.36."), info.git_version
    assert info.major == "1"
    assert info.minor.startswith("36")


async def _phase(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    pod = await core.read_namespaced_pod(name, namespace)
    return str(pod.status.phase) if pod.status.phase == "Running" else None
