"""The RayVirtualCluster CRD on a real API server: what its schema and CEL rules accept and refuse.

No operator runs: the API server alone keeps rayClusterName and divisible immutable, minNodes and
maxNodes around nodes, and (a rule on the whole object, reading the stored status) refuses a spec
change based on a stale spec.revision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hack.localk8s import testcluster
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from rayscale.api.names import RAYVIRTUALCLUSTER

ROOT = Path(__file__).resolve().parents[2]
NAME = "team-a"
STALE = "is not the latest revision"
REAPPLY = "read the object again and re-apply your change on the latest revision"


@pytest.fixture(scope="session")
def rvc_crd(cluster: testcluster.ClusterHandle) -> None:
    """Every CRD of crds/, the RayVirtualCluster's established."""
    cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    cluster.kubectl_run(
        "wait", "--for=condition=Established", "--timeout=60s", f"crd/{RAYVIRTUALCLUSTER.crd_name}"
    )  # fmt: skip


class Rvc:
    """One RayVirtualCluster of a namespace, through the main resource and /status."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.objects: Any = client.CustomObjectsApi(api)
        self.ns = namespace

    async def create(self, spec: dict[str, Any], name: str = NAME) -> dict[str, Any]:
        body = {"apiVersion": RAYVIRTUALCLUSTER.api_version, "kind": "RayVirtualCluster",
                "metadata": {"name": name}, "spec": spec}  # fmt: skip
        obj: dict[str, Any] = await self.objects.create_namespaced_custom_object(
            *RAYVIRTUALCLUSTER.at(self.ns), body
        )
        return obj

    async def get(self) -> dict[str, Any]:
        obj: dict[str, Any] = await self.objects.get_namespaced_custom_object(
            *RAYVIRTUALCLUSTER.at(self.ns), NAME
        )
        return obj

    async def patch(self, body: dict[str, Any]) -> dict[str, Any]:
        obj: dict[str, Any] = await self.objects.patch_namespaced_custom_object(
            *RAYVIRTUALCLUSTER.at(self.ns), NAME, body, _content_type="application/merge-patch+json"
        )
        return obj

    async def patch_status(self, status: dict[str, Any]) -> dict[str, Any]:
        obj: dict[str, Any] = await self.objects.patch_namespaced_custom_object_status(
            *RAYVIRTUALCLUSTER.at(self.ns), NAME, {"status": status},
            _content_type="application/merge-patch+json",
        )  # fmt: skip
        return obj

    async def refused(self, body: dict[str, Any], *, create: bool = False) -> str:
        """The API server's message refusing `body` (a spec to create, else a merge patch)."""
        call = self.create(body, name="refused") if create else self.patch(body)
        with pytest.raises(ApiException) as info:
            await call
        assert info.value.status == 422, info.value.body
        return str(info.value.body)


def groups(nodes: int) -> list[dict[str, Any]]:
    return [{"groupName": "cpu", "nodes": nodes, "minNodes": 1, "maxNodes": 4}]


def spec(**extra: Any) -> dict[str, Any]:
    return {"rayClusterName": "demo", "groups": groups(2), **extra}


async def test_created_with_defaults_and_printed_columns(
    api: client.ApiClient, namespace: str, rvc_crd: None, cluster: testcluster.ClusterHandle
) -> None:
    rvc = Rvc(api, namespace)
    created = await rvc.create(spec())
    assert created["spec"]["divisible"] is False
    assert "revision" not in created["spec"]
    table = cluster.kubectl_run("get", "rvc", NAME, "-n", namespace, "--no-headers")
    assert table.split()[:3] == [NAME, "demo", "false"]


async def test_immutable_fields_and_node_bounds(api: client.ApiClient, namespace: str, rvc_crd: None) -> None:
    rvc = Rvc(api, namespace)
    await rvc.create(spec(divisible=True))
    message = await rvc.refused({"spec": {"divisible": False}})
    assert "spec.divisible" in message
    assert "divisible is immutable: create a new RayVirtualCluster to change it" in message
    message = await rvc.refused({"spec": {"rayClusterName": "other"}})
    assert "spec.rayClusterName" in message
    assert "rayClusterName is immutable" in message
    message = await rvc.refused({"spec": {"groups": [{"groupName": "cpu", "nodes": 2, "minNodes": 3}]}})
    assert "spec.groups[0].minNodes" in message
    assert "minNodes must not be greater than nodes" in message
    message = await rvc.refused({"spec": {"groups": [{"groupName": "cpu", "nodes": 2, "maxNodes": 1}]}})
    assert "spec.groups[0].maxNodes" in message
    assert "maxNodes must not be less than nodes" in message
    # The same on create; and a group listed twice, or none, is refused too.
    message = await rvc.refused(spec(groups=[{"groupName": "cpu", "nodes": 1, "minNodes": 2}]), create=True)
    assert "minNodes must not be greater than nodes" in message
    twice = [{"groupName": "cpu", "nodes": 1}, {"groupName": "cpu", "nodes": 2}]
    assert "Duplicate value" in await rvc.refused(spec(groups=twice), create=True)
    assert "spec.groups" in await rvc.refused(spec(groups=[]), create=True)
    assert "spec.rayClusterName" in await rvc.refused({"groups": groups(1)}, create=True)
    # Within the bounds, and without them, nodes may change.
    assert (await rvc.patch({"spec": {"groups": groups(4)}}))["spec"]["groups"][0]["nodes"] == 4
    changed = await rvc.patch({"spec": {"groups": [{"groupName": "cpu", "nodes": 0}]}})
    assert changed["spec"]["groups"] == [{"groupName": "cpu", "nodes": 0}]
    assert changed["spec"]["divisible"] is True


async def test_spec_revision_must_be_the_latest_status_revision(
    api: client.ApiClient, namespace: str, rvc_crd: None
) -> None:
    rvc = Rvc(api, namespace)
    await rvc.create(spec())
    # No status.revision yet: a change based on a revision is refused, one without goes through.
    message = await rvc.refused({"spec": {"revision": 1, "groups": groups(3)}})
    assert "spec.revision 1 is not the latest revision (status.revision is not set yet)" in message
    assert (await rvc.patch({"spec": {"groups": groups(3)}}))["metadata"]["generation"] == 2

    # The operator writes status.revision through /status.
    updated = await rvc.patch_status({"revision": 2, "phase": "Ready"})
    assert updated["status"] == {"revision": 2, "phase": "Ready"}
    assert updated["metadata"]["generation"] == 2

    # Based on the latest revision: accepted.
    accepted = await rvc.patch({"spec": {"revision": 2, "groups": groups(4)}})
    assert accepted["spec"]["revision"] == 2
    assert accepted["metadata"]["generation"] == 3
    await rvc.patch_status({"revision": 3, "phase": "Scaling"})

    # Based on a stale revision: refused, saying so.
    message = await rvc.refused({"spec": {"revision": 2, "groups": groups(1)}})
    assert "spec.revision" in message
    assert f"spec.revision 2 {STALE} (status.revision 3)" in message
    assert REAPPLY in message
    # The spec still carries the stale revision 2: changing anything else of the spec is refused too...
    assert STALE in await rvc.refused({"spec": {"groups": groups(1)}})
    # ... a status.revision sent to the main resource is not taken ...
    assert STALE in await rvc.refused(
        {"spec": {"revision": 7, "groups": groups(1)}, "status": {"revision": 7}}
    )
    # ... while metadata and status updates (spec unchanged) pass.
    await rvc.patch({"metadata": {"labels": {"team": "a"}}})
    await rvc.patch_status({"phase": "Ready"})
    # Without spec.revision, a change is not checked.
    unchecked = await rvc.patch({"spec": {"revision": None, "groups": groups(1)}})
    assert "revision" not in unchecked["spec"]
    assert unchecked["spec"]["groups"][0]["nodes"] == 1
    # Re-read, re-applied on the latest revision: accepted.
    latest = (await rvc.get())["status"]["revision"]
    assert latest == 3
    final = await rvc.patch({"spec": {"revision": latest, "groups": groups(2)}})
    assert final["spec"]["revision"] == 3
    assert final["status"] == {"revision": 3, "phase": "Ready"}
