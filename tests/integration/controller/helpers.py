"""Small async helpers over the real API for controller integration tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
GROUP, VERSION, PLURAL = "ray.io", "v1", "rayclusters"


def example(name: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return copy.deepcopy(body)


class Kube:
    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.ns = namespace
        self.core: Any = client.CoreV1Api(api)
        self.objects: Any = client.CustomObjectsApi(api)

    async def create(self, body: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = await self.objects.create_namespaced_custom_object(
            GROUP, VERSION, self.ns, PLURAL, body
        )
        return created

    async def get(self, name: str) -> dict[str, Any]:
        got: dict[str, Any] = await self.objects.get_namespaced_custom_object(
            GROUP, VERSION, self.ns, PLURAL, name
        )
        return got

    async def patch_json(self, name: str, ops: list[dict[str, Any]]) -> None:
        await self.objects.patch_namespaced_custom_object(
            GROUP, VERSION, self.ns, PLURAL, name, ops, _content_type="application/json-patch+json"
        )

    async def set_group(self, name: str, index: int, field: str, value: Any) -> None:
        await self.patch_json(
            name, [{"op": "add", "path": f"/spec/workerGroupSpecs/{index}/{field}", "value": value}]
        )

    async def delete_cluster(self, name: str) -> None:
        await self.objects.delete_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)

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
