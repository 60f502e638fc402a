"""The autoscaler loop on the local control plane (no Ray: the GCS is unreachable), with
RayResourceRequests as the demand."""

from __future__ import annotations

from typing import Any

import pytest

from rayscale.api.names import RAYRESOURCEREQUEST
from tests.support.builders import BASIC as NAME
from tests.support.builders import cpu_and_gpu_cluster, gpu_request
from tests.support.kube import Kube
from tests.support.operators import Operator
from tests.support.polling import eventually, holds

pytestmark = pytest.mark.integration


async def _replicas(kube: Kube) -> dict[str, int]:
    specs = (await kube.get(NAME))["spec"]["workerGroupSpecs"]
    return {g["groupName"]: g.get("replicas", 0) for g in specs}


async def _request_status(kube: Kube) -> dict[str, Any]:
    body = await kube.objects.get_namespaced_custom_object(*RAYRESOURCEREQUEST.at(kube.ns), "reserve-gpus")
    status: dict[str, Any] = body.get("status") or {}
    return status | {"generation": body["metadata"]["generation"]}


async def test_request_scales_only_the_gpu_group_and_is_all_or_nothing(
    kube: Kube, autoscaling_operator: Operator
) -> None:
    await kube.create(cpu_and_gpu_cluster())
    await kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(kube.ns), gpu_request(3))

    async def satisfied() -> dict[str, Any] | None:
        status = await _request_status(kube)
        return status if status.get("phase") == "Satisfied" else None

    status = await eventually(satisfied, timeout=60, message="RayResourceRequest Satisfied")
    assert status["observedGeneration"] == status["generation"]
    assert await _replicas(kube) == {"cpu": 0, "gpu": 3}
    await eventually(
        lambda: _count(kube, "gpu", 3), timeout=30, message="3 GPU worker pods created by the controller"
    )
    assert await kube.workers(NAME, group="cpu", live=True) == []

    # Past the group's max: all or nothing, so nothing changes.
    await kube.objects.patch_namespaced_custom_object(
        *RAYRESOURCEREQUEST.at(kube.ns), "reserve-gpus",
        [{"op": "replace", "path": "/spec/bundles/0/count", "value": 10}],
        _content_type="application/json-patch+json",
    )  # fmt: skip

    async def unsatisfiable() -> dict[str, Any] | None:
        status = await _request_status(kube)
        return status if status.get("phase") == "Unsatisfiable" else None

    status = await eventually(unsatisfiable, timeout=60, message="RayResourceRequest Unsatisfiable")
    assert status["reason"] == "MAX_REPLICAS"
    assert "GPU" in status["message"]
    assert status["observedGeneration"] == status["generation"] == 2

    async def unchanged() -> bool:
        return await _replicas(kube) == {"cpu": 0, "gpu": 3}

    await holds(unchanged, seconds=3, message="the replicas stay at 3 GPUs")  # several rounds (interval 1 s)


async def _count(kube: Kube, group: str, count: int) -> bool:
    return len(await kube.workers(NAME, group=group, live=True)) == count
