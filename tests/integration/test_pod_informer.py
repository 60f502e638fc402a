"""The pod informer on a real API server: it lists, then follows every change of the Ray pods it
watches (and only those), tells which RayCluster changed, and lists again when the version it
would watch from has expired."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from rayscale.api.names import RAYCLUSTER
from rayscale.common import labels as L
from rayscale.common.tasks import cancel_and_wait
from rayscale.common.types import ClusterKey
from rayscale.kube import informer as informer_module
from rayscale.kube.by_cluster import ByCluster, by_spec
from rayscale.kube.client import make_api_client
from rayscale.kube.informer import Informer, Kind
from rayscale.kube.raycluster_index import RayClusterIndex
from tests.support.builders import example
from tests.support.polling import eventually

DEADLINE = 30.0
RAYCLUSTERS = Kind(RAYCLUSTER.plural, RAYCLUSTER.group, RAYCLUSTER.version)


def pod(name: str, cluster: str | None, *, group: str = "workers") -> dict[str, Any]:
    labels = {"ray.io/group": group, "ray.io/node-type": "worker"}
    if cluster is not None:
        labels["ray.io/cluster"] = cluster
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.9.0"}]}}  # fmt: skip


async def until(check: Callable[[], bool], what: str) -> None:
    await eventually(check, timeout=DEADLINE, interval=0.05, message=what)


@contextlib.asynccontextmanager
async def running(*informers: Informer) -> AsyncIterator[None]:
    """`informers` running and synced; stopped, and their client closed, on the way out."""
    tasks = [asyncio.create_task(inf.run()) for inf in informers]
    try:
        for inf in informers:
            await asyncio.wait_for(inf.synced.wait(), DEADLINE)
        yield
    finally:
        await cancel_and_wait(tasks)
        await informers[0].api.close()


@contextlib.asynccontextmanager
async def informing(
    cluster: testcluster.ClusterHandle, namespaces: list[str] | None
) -> AsyncIterator[tuple[Informer, ByCluster, list[Any]]]:
    changed: list[Any] = []
    index = ByCluster(changed.append)
    api = await make_api_client(str(cluster.kubeconfig), connections=0)
    inf = Informer(api, index, label_selector="ray.io/cluster", namespaces=namespaces, page=2)
    async with running(inf):
        yield inf, index, changed


def names(index: ByCluster, key: ClusterKey) -> set[str]:
    return {p["metadata"]["name"] for p in index.of(key)}


async def test_lists_then_follows_creates_changes_and_deletes(
    cluster: testcluster.ClusterHandle, api: client.ApiClient, namespace: str
) -> None:
    core: Any = client.CoreV1Api(api)
    for i in range(5):  # three pages of two
        await core.create_namespaced_pod(namespace, pod(f"a-{i}", "a"))
    await core.create_namespaced_pod(namespace, pod("not-ray", None))
    async with informing(cluster, [namespace]) as (_, index, changed):
        assert names(index, (namespace, "a")) == {f"a-{i}" for i in range(5)}
        assert len(index) == 5  # the unlabelled pod is not a Ray pod
        assert (namespace, "a") in changed
        changed.clear()

        await core.create_namespaced_pod(namespace, pod("b-0", "b"))
        await until(lambda: names(index, (namespace, "b")) == {"b-0"}, "b-0 indexed")
        assert (namespace, "b") in changed

        patch = {"metadata": {"annotations": {L.HASH_ANNOTATION: "h1"}}}
        await core.patch_namespaced_pod("b-0", namespace, patch)
        await until(
            lambda: (
                [p["metadata"].get("annotations") for p in index.of((namespace, "b"))]
                == [{L.HASH_ANNOTATION: "h1"}]
            ),
            "the annotation kept in the slim copy",
        )

        await core.delete_namespaced_pod("a-0", namespace, grace_period_seconds=0)
        await until(lambda: "a-0" not in names(index, (namespace, "a")), "a-0 gone")

        # Its ray.io/cluster label removed: no longer a Ray pod (the watch says DELETED).
        await core.patch_namespaced_pod("a-1", namespace, {"metadata": {"labels": {"ray.io/cluster": None}}})
        await until(lambda: "a-1" not in names(index, (namespace, "a")), "a-1 dropped")
        assert names(index, (namespace, "a")) == {"a-2", "a-3", "a-4"}


async def test_patterns_keep_only_the_pods_of_matching_namespaces(
    cluster: testcluster.ClusterHandle, api: client.ApiClient, namespace: str, other_namespace: str
) -> None:
    core: Any = client.CoreV1Api(api)
    await core.create_namespaced_pod(namespace, pod("mine", "c"))
    await core.create_namespaced_pod(other_namespace, pod("theirs", "c"))
    async with informing(cluster, [f"{namespace[:-1]}?", f"!{other_namespace}"]) as (inf, index, _):
        assert inf.streams == [None]  # one stream for every namespace, filtered here
        assert names(index, (namespace, "c")) == {"mine"}
        assert index.of((other_namespace, "c")) == []
        await core.create_namespaced_pod(other_namespace, pod("theirs-2", "c"))
        await core.create_namespaced_pod(namespace, pod("mine-2", "c"))
        await until(lambda: "mine-2" in names(index, (namespace, "c")), "mine-2 indexed")
        assert index.of((other_namespace, "c")) == []


async def test_a_broken_stream_lists_again_and_drops_what_went(
    cluster: testcluster.ClusterHandle, api: client.ApiClient, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch breaks (here: before its first event; a pod is deleted meanwhile, unseen): the
    informer lists again, the pod leaves the index and its RayCluster is told."""
    monkeypatch.setattr(informer_module, "BACKOFFS", (0.05,))
    core: Any = client.CoreV1Api(api)
    await core.create_namespaced_pod(namespace, pod("d-0", "d"))
    await core.create_namespaced_pod(namespace, pod("d-1", "d"))
    real_watch = Informer._watch
    broken: list[str] = []

    async def break_once(self: Informer, ns: str | None, version: str) -> str:
        if not broken:
            broken.append(version)
            await core.delete_namespaced_pod("d-0", namespace, grace_period_seconds=0)
            raise aiohttp.ClientPayloadError("cut off")
        return await real_watch(self, ns, version)

    monkeypatch.setattr(Informer, "_watch", break_once)
    async with informing(cluster, [namespace]) as (inf, index, changed):
        await until(lambda: inf.lists >= 2, "listed again after the stream broke")
        await until(lambda: names(index, (namespace, "d")) == {"d-1"}, "d-0 dropped by the relist")
        assert (namespace, "d") in changed
        assert inf.problem() is None


async def test_a_failing_stream_is_retried_and_reported_once_stuck(
    cluster: testcluster.ClusterHandle, api: client.ApiClient, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream that cannot list (here: a namespace the client may not read, faked by a label
    selector the API server refuses) retries with backoff; the probe fails once it is stuck."""
    monkeypatch.setattr(informer_module, "BACKOFFS", (0.05,))
    monkeypatch.setattr(informer_module, "STUCK_SECONDS", 0.0)
    index = ByCluster(lambda key: None)
    api2 = await make_api_client(str(cluster.kubeconfig), connections=0)
    inf = Informer(api2, index, label_selector="ray.io/cluster in (", namespaces=[namespace])
    task = asyncio.create_task(inf.run())
    try:
        await until(lambda: inf.problem() is not None, "the stuck stream reported")
        assert namespace in (inf.problem() or "")
        assert not inf.synced.is_set()
    finally:
        await cancel_and_wait([task])
        await api2.close()


async def test_a_custom_resource_informer_follows_rayclusters_and_a_kind_not_served_is_none(
    cluster: testcluster.ClusterHandle, api: client.ApiClient, namespace: str, raycluster_crd: None
) -> None:
    """The RayCluster informer's path: CustomObjectsApi LIST and WATCH, each event decoded whole
    (a custom resource's fields come sorted by name). A kind whose CRD is not installed is listed
    as none: the informer is synced, and its stream is not failing."""
    seen: list[tuple[ClusterKey, bool]] = []
    clusters = RayClusterIndex(lambda body: True, lambda key, body: seen.append((key, body is not None)))
    absent = ByCluster(lambda key: None, cluster_of=by_spec("clusterName"))
    watch_api = await make_api_client(str(cluster.kubeconfig), connections=0)
    informers = [
        Informer(watch_api, clusters, kind=RAYCLUSTERS, namespaces=[namespace]),
        Informer(
            watch_api, absent, kind=Kind("nonesuches", "rayscale.io", "v1alpha1"), namespaces=[namespace]
        ),
    ]
    async with running(*informers):
        objects: Any = client.CustomObjectsApi(api)
        body = example("raycluster-basic.yaml")
        await objects.create_namespaced_custom_object(*RAYCLUSTER.at(namespace), body)
        key = (namespace, body["metadata"]["name"])
        await until(lambda: key in clusters.owned, "the RayCluster in the index")
        kept = clusters.owned[key]
        assert "managedFields" not in kept["metadata"]
        assert (
            kept["spec"]["headGroupSpec"]["rayStartParams"] == body["spec"]["headGroupSpec"]["rayStartParams"]
        )
        await objects.delete_namespaced_custom_object(*RAYCLUSTER.at(namespace), key[1])
        await until(lambda: key not in clusters.owned, "the RayCluster gone from the index")
        assert seen[0] == (key, True)
        assert seen[-1] == (key, False)
        assert len(absent) == 0
        assert all(inf.problem() is None for inf in informers)
        assert not informers[1]._failing  # not served is not failing
