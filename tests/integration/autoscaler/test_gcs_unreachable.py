"""Running nodes are never removed while the GCS is unreachable, however idle they look."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from rayscale.api.names import RAYRESOURCEREQUEST
from tests.support.builders import BASIC as NAME
from tests.support.builders import cpu_and_gpu_cluster, gpu_request
from tests.support.kube import Kube, names
from tests.support.operators import Operator
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
UNREACHABLE = "unreachable, running nodes are kept"


async def test_running_workers_stay_while_the_gcs_is_unreachable(
    api: client.ApiClient, namespace: str, autoscaling_operator: Operator
) -> None:
    kube = Kube(api, namespace)
    body = cpu_and_gpu_cluster()  # its GCS address answers nothing
    body["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": 1}  # idle removal would be due at once
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 2  # above minReplicas 0, no demand at all
    await kube.create(body)
    before = names(await eventually(lambda: kube.running_workers(NAME, 2, group="cpu"), timeout=60))

    await eventually(
        lambda: UNREACHABLE in autoscaling_operator.output(),
        timeout=60,
        message="a round with the GCS unreachable",
    )
    # Proof that rounds go on meanwhile: a request for a GPU is served (a round launches the
    # worker, later rounds see it start and run) while the idle CPU workers stay.
    await kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(namespace), gpu_request(1))

    async def satisfied() -> bool:
        body = await kube.objects.get_namespaced_custom_object(
            *RAYRESOURCEREQUEST.at(namespace), "reserve-gpus"
        )
        return (body.get("status") or {}).get("phase") == "Satisfied"

    await eventually(satisfied, timeout=60, message="the GPU request Satisfied")
    spec = (await kube.get(NAME))["spec"]["workerGroupSpecs"][0]
    assert spec["replicas"] == 2
    assert not (spec.get("scaleStrategy") or {}).get("workersToDelete")
    assert names(await kube.running_workers(NAME, 2, group="cpu")) == before
