"""A worker group removed from a RayCluster rayscale does not autoscale, on a real API server:
`rayscale run --mode controller` deletes the removed group's pods at once (KubeRay's operator leaves
them behind), one ``WorkerGroupRemoved`` Event naming the group and its pods, and leaves the other
group's pods alone."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.builders import example
from tests.support.kube import Kube, names
from tests.support.operators import Operator
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
NAME = "raycluster-basic"


def two_groups() -> dict[str, Any]:
    """examples/raycluster-basic.yaml, not autoscaled, with a second group ``extra`` beside ``cpu``."""
    body = example("raycluster-basic.yaml")
    body["spec"]["enableInTreeAutoscaling"] = False
    cpu = body["spec"]["workerGroupSpecs"][0]
    cpu.update({"replicas": 1, "minReplicas": 0, "maxReplicas": 2})
    extra = copy.deepcopy(cpu)
    extra.update({"groupName": "extra", "replicas": 2})
    body["spec"]["workerGroupSpecs"].append(extra)
    return body


async def test_a_removed_groups_pods_are_deleted_at_once_with_an_event(
    kube: Kube, operator: Operator
) -> None:
    await kube.create(two_groups())
    await eventually(lambda: kube.running_workers(NAME, 3), timeout=90, message="3 workers Running")
    kept = names(await kube.workers(NAME, group="cpu", live=True))
    doomed = sorted(names(await kube.workers(NAME, group="extra", live=True)))
    assert len(kept) == 1
    assert len(doomed) == 2

    await kube.patch_json(NAME, [
        {"op": "test", "path": "/spec/workerGroupSpecs/1/groupName", "value": "extra"},
        {"op": "remove", "path": "/spec/workerGroupSpecs/1"},
    ])  # fmt: skip

    async def removed() -> list[Any]:
        return [e for e in await kube.events("WorkerGroupRemoved") if e.involved_object.name == NAME]

    (event,) = await eventually(removed, timeout=60, message="the WorkerGroupRemoved Event")
    assert event.type == "Normal"
    assert f"Worker group extra is no longer in the spec: deleting its pods {', '.join(doomed)} at once" in (
        event.message
    )

    async def none_left() -> bool:
        return not await kube.workers(NAME, group="extra")  # terminating ones included: nothing orphaned

    await eventually(none_left, timeout=60, message="the removed group's pods gone")
    deleted = [e.message for e in await kube.events("DeletedWorkerPod") if "(groupRemoved)" in e.message]
    assert deleted
    assert all(pod in " ".join(deleted) for pod in doomed)
    assert names(await kube.workers(NAME, live=True)) == kept  # the other group untouched
    assert len(await removed()) == 1  # one Event for the group
