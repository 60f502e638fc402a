"""Worker pods whose Ray node is missing or dead, on the local control plane, with a fake GCS.

The GCS is served from this test process (gRPC, ``GetClusterResourceState`` only): it reports the
head's raylet alive, a fixed session, and for the workers only what the test says (no node by
default, or a DEAD node for the pods in `dead`). The cluster's ``rayscale.io/max-node-provision-
seconds: "5"`` is what the old rule measured from the pod's creation: a worker running for 5 s
without a Ray node was removed as a failed launch and its group backed off. Now it boots for
``maxNodeBootSeconds`` (an hour) from when rayscale first saw it without a node; once Ray says its
node died it is replaced, without backoff.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.support.builders import example
from tests.support.fakes import FakeGcsServer
from tests.support.grpcserve import serving
from tests.support.kube import Kube, names
from tests.support.operators import Operator
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
NAME = "raycluster-basic"
GROUP = "cpu"


@pytest.fixture
async def gcs() -> AsyncIterator[FakeGcsServer]:
    fake = FakeGcsServer(NAME)
    async with serving(fake.service()) as fake.address:
        yield fake


def one_worker_cluster(gcs_address: str) -> dict[str, Any]:
    body = example("raycluster-basic.yaml")
    body["metadata"]["annotations"] = {
        "rayscale.io/gcs-address": gcs_address,
        "rayscale.io/max-node-provision-seconds": "5",
    }
    body["spec"]["enableInTreeAutoscaling"] = True
    group = body["spec"]["workerGroupSpecs"][0]
    assert group["groupName"] == GROUP
    group.update({"replicas": 1, "minReplicas": 1, "maxReplicas": 3})
    return body


async def _group(kube: Kube) -> dict[str, Any]:
    spec: dict[str, Any] = (await kube.get(NAME))["spec"]["workerGroupSpecs"][0]
    return spec


async def test_a_running_worker_without_a_ray_node_is_kept_and_a_dead_one_replaced_without_backoff(
    api: client.ApiClient, namespace: str, gcs: FakeGcsServer, autoscaling_operator: Operator
) -> None:
    kube = Kube(api, namespace)
    await kube.create(one_worker_cluster(gcs.address))
    (worker,) = names(
        await eventually(lambda: kube.running_workers(NAME, 1), timeout=60, message="the worker Running")
    )
    running = time.monotonic()

    # Rounds keep reading the GCS well past the 5 s the old rule allowed from the pod's creation.
    await eventually(
        lambda: gcs.calls_since(running + 8) >= 3,
        timeout=60,
        message="3 autoscaling rounds 8 s after Running",
    )
    assert [e.message for e in await kube.events("BackingOff")] == []
    assert [e.message for e in await kube.events("ScaledDown")] == []
    spec = await _group(kube)
    assert spec["replicas"] == 1
    assert not (spec.get("scaleStrategy") or {}).get("workersToDelete"), "the booting worker was removed"
    assert names(await kube.workers(NAME, live=True)) == {worker}

    # Ray reports the worker's node DEAD: the pod goes (NODE_DEAD) and minReplicas brings a new one.
    gcs.dead.add(worker)

    async def replaced() -> bool:
        pods = await kube.running_workers(NAME, 1)
        return bool(pods) and names(pods) != {worker}

    await eventually(replaced, timeout=90, message=f"{worker} replaced by a new Running worker")
    died = [e.message for e in await kube.events("RayNodeDied")]
    assert any(worker in m for m in died), died
    assert [e.message for e in await kube.events("BackingOff")] == []
    assert (await _group(kube))["replicas"] == 1
