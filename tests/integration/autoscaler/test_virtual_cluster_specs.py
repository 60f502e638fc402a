"""RayVirtualClusters on the local control plane (no Ray: the GCS is unreachable): a valid VC
gets a finalizer and waits for Ray (no pod moves or is asked for while no node can be seen idle);
invalid ones get SpecValid=False and a Warning Event naming the field; deleting a VC that holds
no node is not held up."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from rayscale.api.names import RAYVIRTUALCLUSTER
from rayscale.api.virtualcluster_names import FINALIZER, VC_LABEL
from tests.support.builders import BASIC as NAME
from tests.support.builders import cpu_and_gpu_cluster
from tests.support.kube import Kube
from tests.support.operators import Operator
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


def vc(name: str, cluster: str, group: str, nodes: int = 1) -> dict[str, Any]:
    return {
        **RAYVIRTUALCLUSTER.type_meta(),
        "metadata": {"name": name},
        "spec": {"rayClusterName": cluster, "groups": [{"groupName": group, "nodes": nodes}]},
    }


async def _get(kube: Kube, name: str) -> dict[str, Any] | None:
    try:
        body: dict[str, Any] = await kube.objects.get_namespaced_custom_object(
            *RAYVIRTUALCLUSTER.at(kube.ns), name
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return body


async def test_valid_and_invalid_virtual_clusters(kube: Kube, autoscaling_operator: Operator) -> None:
    await kube.create(cpu_and_gpu_cluster())
    for body in (vc("team", NAME, "cpu"), vc("no-group", NAME, "nope"), vc("no-cluster", "elsewhere", "cpu")):
        await kube.objects.create_namespaced_custom_object(*RAYVIRTUALCLUSTER.at(kube.ns), body)

    # Without Ray's state no node can be seen idle: nothing joins the VC and no pod is asked for.
    async def team_status() -> dict[str, Any]:
        found = await _get(kube, "team")
        assert found is not None
        assert FINALIZER in found["metadata"].get("finalizers", [])
        status: dict[str, Any] = found.get("status") or {}
        assert status.get("phase") == "Pending", status
        return status

    status = await eventually(team_status, timeout=60, message="team Pending with its finalizer")
    assert (status["revision"], status["rayResource"]) == (1, "rayscale.io/vc/team")
    assert [(g["groupName"], g["desired"], g["nodes"]) for g in status["groups"]] == [("cpu", 1, [])]
    specs = (await kube.get(NAME))["spec"]["workerGroupSpecs"]
    assert {g["groupName"]: g.get("replicas", 0) for g in specs} == {"cpu": 0, "gpu": 0}
    assert [p for p in await kube.workers(NAME, live=True) if VC_LABEL in (p.metadata.labels or {})] == []

    async def invalid(name: str, field: str) -> dict[str, Any]:
        found = await _get(kube, name)
        status: dict[str, Any] = (found or {}).get("status") or {}
        assert status.get("phase") == "Invalid", status
        cond: dict[str, Any]
        [cond] = [c for c in status["conditions"] if c["type"] == "SpecValid"]
        assert (cond["status"], cond["reason"]) == ("False", "InvalidSpec")
        assert cond["message"].startswith(field), cond
        return cond

    cond = await eventually(
        lambda: invalid("no-group", "spec.groups[0].groupName"), timeout=60, message="no-group Invalid"
    )
    assert '"nope"' in cond["message"]
    cond = await eventually(
        lambda: invalid("no-cluster", "spec.rayClusterName"), timeout=60, message="no-cluster"
    )
    assert "elsewhere" in cond["message"]

    async def warned() -> list[str]:
        events = [
            e for e in await kube.events("InvalidSpec") if e.involved_object.kind == "RayVirtualCluster"
        ]
        names = sorted({e.involved_object.name for e in events})
        assert names == ["no-cluster", "no-group"], names
        assert all(e.type == "Warning" for e in events)
        return names

    await eventually(warned, timeout=60, message="a Warning Event for each invalid VC")

    # Deleting a VC that holds no node is not held up, valid or not.
    for name in ("no-group", "team"):
        await kube.objects.delete_namespaced_custom_object(*RAYVIRTUALCLUSTER.at(kube.ns), name)

        async def gone(name: str = name) -> bool:
            return await _gone(kube, name)

        await eventually(gone, timeout=60, message=f"{name} deleted")


async def _gone(kube: Kube, name: str) -> bool:
    return await _get(kube, name) is None
