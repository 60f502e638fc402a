"""Each RayResourceRequest is its own all-or-nothing unit, on the local control plane (no Ray:
the GCS is unreachable): a request no group can hold does not stop another from scaling up."""

from __future__ import annotations

from typing import Any

import pytest

from rayscale.api.names import RAYRESOURCEREQUEST
from tests.support.builders import BASIC as NAME
from tests.support.builders import cpu_and_gpu_cluster
from tests.support.kube import Kube
from tests.support.operators import Operator
from tests.support.polling import eventually, holds

pytestmark = pytest.mark.integration


def request(name: str, resources: dict[str, Any], count: int) -> dict[str, Any]:
    return {
        **RAYRESOURCEREQUEST.type_meta(),
        "metadata": {"name": name},
        "spec": {"clusterName": NAME, "bundles": [{"resources": resources, "count": count}]},
    }


async def _status(kube: Kube, name: str) -> dict[str, Any]:
    body = await kube.objects.get_namespaced_custom_object(*RAYRESOURCEREQUEST.at(kube.ns), name)
    status: dict[str, Any] = body.get("status") or {}
    return status


async def _replicas(kube: Kube) -> dict[str, int]:
    specs = (await kube.get(NAME))["spec"]["workerGroupSpecs"]
    return {g["groupName"]: g.get("replicas", 0) for g in specs}


async def test_an_unsatisfiable_request_does_not_hold_back_another(
    kube: Kube, autoscaling_operator: Operator
) -> None:
    await kube.create(cpu_and_gpu_cluster())
    # No group has a host with 64 CPUs (the CPU group's hosts have 1).
    too_big = request("too-big", {"CPU": 64}, 1)
    gpus = request("two-gpus", {"GPU": 1}, 2)
    for body in (too_big, gpus):
        await kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(kube.ns), body)

    async def phases() -> dict[str, Any]:
        found = {name: await _status(kube, name) for name in ("too-big", "two-gpus")}
        seen = {name: (s.get("phase"), s.get("message")) for name, s in found.items()}
        assert {n: p for n, (p, _) in seen.items()} == {
            "too-big": "Unsatisfiable",
            "two-gpus": "Satisfied",
        }, seen
        return found

    found: dict[str, Any] = await eventually(
        phases, timeout=90, message="two-gpus Satisfied and too-big Unsatisfiable"
    )
    assert found["too-big"]["reason"] == "NO_MATCHING_GROUP"
    assert "CPU: 64" in found["too-big"]["message"]
    assert await _replicas(kube) == {"cpu": 0, "gpu": 2}
    assert len(await kube.workers(NAME, group="gpu", live=True)) == 2
    assert await kube.workers(NAME, group="cpu", live=True) == []

    async def nothing_more() -> bool:
        return await _replicas(kube) == {"cpu": 0, "gpu": 2}

    # several rounds (interval 1 s): nothing more launches for too-big
    await holds(nothing_more, seconds=3, message="nothing more launched for too-big")
    assert (await _status(kube, "two-gpus"))["phase"] == "Satisfied"
