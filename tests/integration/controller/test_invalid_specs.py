"""Every bad RayCluster and RayResourceRequest input explained, on a real API server with `rayscale
run --mode all` running (the bad specs are tests/invalid_specs.py, shared with the unit tests).

Each invalid RayCluster gets SpecValid=False and a Warning Event whose message names the field,
nothing is created for it, and a valid RayCluster created beside it gets its pods. One operator
serves the whole module (one namespace), so the bad clusters of earlier cases are still there, and
still must not slow the valid ones of later cases, until the module ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from hack.localk8s import testcluster
from kubernetes_asyncio import client, watch

from rayscale.api.names import RAYRESOURCEREQUEST
from tests.support.builders import example
from tests.support.invalid_specs import CASES, BadSpec
from tests.support.kube import Kube
from tests.support.operators import Operator, running
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
PROMPTLY = 60  # seconds a valid cluster may take to get its pods (generous: the machine is shared)
OUT_OF_RANGE = "is out of range: quantities are limited to ±9223372036854775807 (2^63-1)"


def cluster_body(name: str, replicas: int = 1, *, autoscaling: bool = False) -> dict[str, Any]:
    body = example("raycluster-basic.yaml")
    body["metadata"]["name"] = name
    body["spec"]["enableInTreeAutoscaling"] = autoscaling
    worker = body["spec"]["workerGroupSpecs"][0]
    worker.update({"replicas": replicas, "maxReplicas": 10})
    return body


@pytest.fixture(scope="module")
async def shared_namespace(api: client.ApiClient) -> AsyncIterator[str]:
    core = client.CoreV1Api(api)
    name = f"t-invalid-specs-{uuid.uuid4().hex[:5]}"
    labels = {"rayscale.io/test": "true"}
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))

    async def default_sa() -> bool:
        return any(
            sa.metadata.name == "default" for sa in (await core.list_namespaced_service_account(name)).items
        )

    await eventually(default_sa, timeout=30, message=f"ServiceAccount default in {name}")
    yield name
    await core.delete_namespace(name)


@pytest.fixture(scope="module")
def module_operator(
    cluster: testcluster.ClusterHandle,
    shared_namespace: str,
    raycluster_crd: None,
    request: pytest.FixtureRequest,
) -> Iterator[Operator]:
    """`rayscale run --mode all` (controller and autoscaler, rounds every second) for the module."""
    op = Operator(cluster, shared_namespace, mode="all", extra=("--autoscaler-interval", "1"))
    yield from running(op, request)


@pytest.fixture
def operator(module_operator: Operator, request: pytest.FixtureRequest) -> Iterator[Operator]:
    """The module's operator; its log is printed after a failing test."""
    yield module_operator
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(f"--- rayscale log ({module_operator.log}) ---\n{module_operator.output()}")


@pytest.fixture
def kube(api: client.ApiClient, shared_namespace: str) -> Kube:
    return Kube(api, shared_namespace)


async def warnings(kube: Kube, reason: str, name: str, kind: str = "RayCluster") -> list[Any]:
    return [
        e
        for e in await kube.events(reason)
        if e.involved_object.name == name and e.involved_object.kind == kind and e.type == "Warning"
    ]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_invalid_spec_is_explained_and_slows_no_other_cluster(
    case: BadSpec, kube: Kube, operator: Operator
) -> None:
    bad, good = f"bad-{CASES.index(case)}", f"good-{CASES.index(case)}"
    await kube.create(case.apply(cluster_body(bad)))
    await kube.create(cluster_body(good))

    async def spec_invalid() -> dict[str, Any] | None:
        cond = await kube.condition(bad, "SpecValid")
        return cond if cond is not None and cond["status"] == "False" else None

    cond = await eventually(spec_invalid, timeout=30, message=f"SpecValid=False on {bad}")
    assert (cond["reason"], cond["message"]) == ("InvalidRayClusterSpec", case.message)
    (event,) = await eventually(lambda: warnings(kube, "InvalidRayClusterSpec", bad), timeout=30)
    assert event.message == case.message
    await eventually(
        lambda: kube.running_workers(good, 1), timeout=PROMPTLY, message=f"the valid cluster {good}'s worker"
    )
    assert await kube.pods(bad) == []
    assert await kube.services(bad) == []
    assert await kube.condition(good, "SpecValid") is None


async def test_a_deleted_cluster_gets_no_more_pods(
    api: client.ApiClient, cluster: testcluster.ClusterHandle, namespace: str, raycluster_crd: None,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    """A cluster creating hundreds of pods (slowly: 20 requests a second) is deleted once its first
    pods exist: no pod of it is created after the watch has seen the deletion (3 s of slack)."""
    op = Operator(cluster, namespace, extra=("--kube-api-qps", "20", "--kube-api-burst", "20"))
    with contextlib.contextmanager(running)(op, request):
        kube = Kube(api, namespace)
        body = cluster_body("doomed", 300)
        body["spec"]["workerGroupSpecs"][0]["maxReplicas"] = 300
        added: dict[str, float] = {}  # pod -> when the test's watch saw it added
        seen = asyncio.create_task(_watch_added(kube, "doomed", added))
        try:
            await kube.create(body)
            await eventually(lambda: len(added) >= 20, timeout=60, message="the first 20 pods")
            deleted_at = time.monotonic()
            await kube.delete_cluster("doomed")

            async def quiet() -> bool:
                # gone, and no pod added for 3 s: nothing is on its way any more
                gone = not await kube.pods("doomed")
                return gone and time.monotonic() - max(added.values()) > 3

            await eventually(quiet, timeout=90, interval=0.5, message="every pod gone, none added for 3 s")
        finally:
            seen.cancel()
        late = sorted(round(t - deleted_at, 1) for t in added.values() if t > deleted_at + 3)
        assert late == [], f"{len(late)} of {len(added)} pods created after the deletion (s after it: {late})"
        assert len(added) < 300


async def _watch_added(kube: Kube, cluster: str, added: dict[str, float]) -> None:
    selector = f"ray.io/cluster={cluster},ray.io/node-type=worker"
    while True:
        async with watch.Watch().stream(
            kube.core.list_namespaced_pod, kube.ns, label_selector=selector, timeout_seconds=60
        ) as stream:
            async for event in stream:
                if event["type"] == "ADDED":
                    added.setdefault(event["object"].metadata.name, time.monotonic())


def resource_request(name: str, cluster: str, bundles: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        **RAYRESOURCEREQUEST.type_meta(),
        "metadata": {"name": name},
        "spec": {"clusterName": cluster, "bundles": copy.deepcopy(bundles)},
    }


# name -> (bundles, the reason it is refused with)
BAD_REQUESTS: dict[str, tuple[list[dict[str, Any]], str]] = {
    "huge-memory": ([{"resources": {"memory": "1e999999"}}],
                    f"spec.bundles[0].resources.memory: '1e999999' {OUT_OF_RANGE}"),
    "over-the-cap": ([{"resources": {"CPU": 1}}, {"resources": {"CPU": "1e19"}}],
                     f"spec.bundles[1].resources.CPU: '1e19' {OUT_OF_RANGE}"),
    "negative": ([{"resources": {"CPU": "-1"}}], "spec.bundles[0].resources.CPU: must be >= 0"),
    "huge-count": ([{"resources": {"CPU": 1}, "count": 2**31 - 1}],
                   "spec.bundles[0].count: 2147483647 bundles in all is over the limit of 100000 per"
                   " RayResourceRequest"),
}  # fmt: skip


async def test_bad_resource_requests_are_refused_and_the_cluster_keeps_scaling(
    kube: Kube, operator: Operator
) -> None:
    await kube.create(cluster_body("auto", 0, autoscaling=True))
    for name, (bundles, _) in BAD_REQUESTS.items():
        await kube.objects.create_namespaced_custom_object(
            *RAYRESOURCEREQUEST.at(kube.ns), resource_request(name, "auto", bundles)
        )
    good = resource_request("good", "auto", [{"resources": {"CPU": 1}, "count": 2}])
    await kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(kube.ns), good)

    async def status(name: str) -> dict[str, Any]:
        body = await kube.objects.get_namespaced_custom_object(*RAYRESOURCEREQUEST.at(kube.ns), name)
        found: dict[str, Any] = body.get("status") or {}
        return found

    for name, (_, message) in BAD_REQUESTS.items():
        expected = ("Unsatisfiable", "InvalidBundles", f"a bundle cannot be read: {message}")

        async def refused(name: str = name, expected: tuple[str, ...] = expected) -> bool:
            got = await status(name)
            return (got.get("phase"), got.get("reason"), got.get("message")) == expected

        await eventually(refused, timeout=30, message=f"{name} Unsatisfiable (InvalidBundles)")

        async def refused_event(name: str = name) -> list[Any]:
            return await warnings(kube, "InvalidBundles", name, kind="RayResourceRequest")

        (event,) = await eventually(refused_event, timeout=30)
        assert event.message == expected[2]
    await eventually(lambda: kube.running_workers("auto", 2), timeout=PROMPTLY, message="2 workers for good")

    async def satisfied() -> bool:
        return (await status("good")).get("phase") == "Satisfied"

    await eventually(satisfied, timeout=PROMPTLY, message="the good request Satisfied")
    replicas = (await kube.get("auto"))["spec"]["workerGroupSpecs"][0]["replicas"]
    assert replicas == 2
