"""Small async helpers over a real API server for integration and e2e tests: RayClusters, their pods,
Services, Events and conditions in one namespace."""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

from hack.localk8s import testcluster
from kubernetes_asyncio import client

from rayscale.api.names import RAYCLUSTER
from tests.support.polling import eventually


class Kube:
    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.ns = namespace
        self.core: Any = client.CoreV1Api(api)
        self.objects: Any = client.CustomObjectsApi(api)

    async def create(self, body: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = await self.objects.create_namespaced_custom_object(
            *RAYCLUSTER.at(self.ns), body
        )
        return created

    async def get(self, name: str) -> dict[str, Any]:
        got: dict[str, Any] = await self.objects.get_namespaced_custom_object(*RAYCLUSTER.at(self.ns), name)
        return got

    async def patch_json(self, name: str, ops: list[dict[str, Any]]) -> None:
        await self.objects.patch_namespaced_custom_object(
            *RAYCLUSTER.at(self.ns), name, ops, _content_type="application/json-patch+json"
        )

    async def set_group(self, name: str, index: int, field: str, value: Any) -> None:
        await self.patch_json(
            name, [{"op": "add", "path": f"/spec/workerGroupSpecs/{index}/{field}", "value": value}]
        )

    async def delete_cluster(self, name: str) -> None:
        await self.objects.delete_namespaced_custom_object(*RAYCLUSTER.at(self.ns), name)

    async def pods(self, cluster: str, *, group: str | None = None, live: bool = False) -> list[Any]:
        selector = f"ray.io/cluster={cluster}" + (f",ray.io/group={group}" if group else "")
        items = (await self.core.list_namespaced_pod(self.ns, label_selector=selector)).items
        return [p for p in items if not (live and p.metadata.deletion_timestamp)]

    async def workers(self, cluster: str, **kw: Any) -> list[Any]:
        return [
            p for p in await self.pods(cluster, **kw) if p.metadata.labels["ray.io/node-type"] == "worker"
        ]

    async def running_workers(self, cluster: str, count: int, **kw: Any) -> list[Any]:
        """The live workers when exactly `count` exist and all are Running, else []."""
        pods = await self.workers(cluster, live=True, **kw)
        ok = len(pods) == count and all(p.status.phase == "Running" for p in pods)
        return pods if ok else []

    async def delete_pod(self, name: str) -> None:
        await self.core.delete_namespaced_pod(name, self.ns)

    async def remove_finalizers(self, cluster: str) -> None:
        for p in await self.pods(cluster):
            if p.metadata.finalizers:
                await self.core.patch_namespaced_pod(
                    p.metadata.name, self.ns, {"metadata": {"finalizers": None}}
                )

    async def services(self, cluster: str) -> list[Any]:
        items = (
            await self.core.list_namespaced_service(self.ns, label_selector=f"ray.io/cluster={cluster}")
        ).items
        return list(items)

    async def events(self, reason: str) -> list[Any]:
        items = (await self.core.list_namespaced_event(self.ns, field_selector=f"reason={reason}")).items
        return list(items)

    async def condition(self, name: str, kind: str) -> dict[str, Any] | None:
        for cond in (await self.get(name)).get("status", {}).get("conditions", []):
            if cond["type"] == kind:
                found: dict[str, Any] = cond
                return found
        return None


def names(pods: list[Any]) -> set[str]:
    return {p.metadata.name for p in pods}


def label_values(pods: list[Any], key: str) -> list[str]:
    return sorted(p.metadata.labels.get(key, "") for p in pods)


def established(cluster: testcluster.ClusterHandle, crd: str) -> bool:
    """The CRD `crd` (e.g. ``rayclusters.ray.io``) says Established=True."""
    body = json.loads(cluster.kubectl_run("get", f"crd/{crd}", "-o", "json"))
    conds = (body.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conds)


@contextlib.asynccontextmanager
async def fresh_namespace(api: client.ApiClient, test: str) -> AsyncIterator[str]:
    """A new namespace named after `test`, with its default ServiceAccount; deleted on the way out
    (without waiting)."""
    slug = re.sub(r"[^a-z0-9]+", "-", test.lower()).strip("-")[:40].strip("-")
    name = f"t-{slug}-{uuid.uuid4().hex[:5]}"
    core = client.CoreV1Api(api)
    await core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"rayscale.io/test": "true"}))
    )
    # The serviceaccount controller must have made the default ServiceAccount before
    # pods can be created in the namespace.
    await eventually(
        lambda: _has_default_sa(core, name), timeout=30, message=f"ServiceAccount default in {name}"
    )
    yield name
    await core.delete_namespace(name)


async def _has_default_sa(core: client.CoreV1Api, namespace: str) -> bool:
    sas = await core.list_namespaced_service_account(namespace)
    return any(sa.metadata.name == "default" for sa in sas.items)
