"""The few API calls the controller makes, with KubeRay's tolerance of 404/409."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

GROUP, VERSION, PLURAL = "ray.io", "v1", "rayclusters"
MERGE_PATCH = "application/merge-patch+json"


class KubeError(Exception):
    """An API call failed; `status` is the HTTP status (0 when unknown)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def _core(api: client.ApiClient) -> Any:
    """CoreV1Api, untyped: bodies are plain dicts and responses raw (no model deserialisation)."""
    return client.CoreV1Api(api)


def _objects(api: client.ApiClient) -> Any:
    return client.CustomObjectsApi(api)


def _error(exc: ApiException, what: str) -> KubeError:
    reason = exc.reason or ""
    with contextlib.suppress(TypeError, ValueError):
        reason = json.loads(exc.body or "{}").get("message", reason)
    return KubeError(f"{what}: {exc.status} {reason}", exc.status or 0)


async def create_pod(api: client.ApiClient, namespace: str, manifest: dict[str, Any]) -> str:
    """Create a pod (generateName) and return its name."""
    try:
        resp = await _core(api).create_namespaced_pod(namespace, manifest, _preload_content=False)
        body = await resp.json()
    except ApiException as exc:
        raise _error(exc, "create pod") from exc
    return str(body["metadata"]["name"])


async def delete_pod(api: client.ApiClient, namespace: str, name: str) -> bool:
    """Delete a pod; False when it was already gone."""
    try:
        resp = await _core(api).delete_namespaced_pod(name, namespace, _preload_content=False)
        resp.release()
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise _error(exc, f"delete pod {name}") from exc
    return True


async def create_service(api: client.ApiClient, namespace: str, manifest: dict[str, Any]) -> bool:
    """Create a Service; False when one of that name already exists."""
    try:
        resp = await _core(api).create_namespaced_service(namespace, manifest, _preload_content=False)
        resp.release()
    except ApiException as exc:
        if exc.status == 409:
            return False
        raise _error(exc, f"create service {manifest['metadata']['name']}") from exc
    return True


async def patch_raycluster_status(
    api: client.ApiClient, namespace: str, name: str, patch: dict[str, Any]
) -> bool:
    """Merge-patch the status subresource; False when the RayCluster is gone."""
    try:
        resp = await _objects(api).patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, patch, _content_type=MERGE_PATCH, _preload_content=False
        )
        resp.release()
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise _error(exc, f"patch status of rayclusters/{name}") from exc
    return True


async def list_rayclusters(api: client.ApiClient, namespace: str | None) -> list[dict[str, Any]]:
    objects = _objects(api)
    if namespace is None:
        resp = await objects.list_cluster_custom_object(GROUP, VERSION, PLURAL, _preload_content=False)
    else:
        resp = await objects.list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, _preload_content=False
        )
    items: list[dict[str, Any]] = (await resp.json()).get("items", [])
    return items
