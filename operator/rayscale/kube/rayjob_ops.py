"""The API calls of the RayJob and RayCronJob controllers, with KubeRay's tolerance of 404/409."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from rayscale.api.names import RAYCLUSTER, ResourceName
from rayscale.kube.ops import JSON_PATCH, MERGE_PATCH, KubeError, _send_unless, send

__all__ = [
    "create_custom",
    "delete_custom",
    "delete_job_background",
    "get_service",
    "patch_custom",
    "replace_service",
    "replace_status",
    "suspend_worker_groups",
]


def _objects(api: client.ApiClient) -> Any:
    return client.CustomObjectsApi(api)


async def create_custom(api: client.ApiClient, kind: ResourceName, manifest: dict[str, Any]) -> bool:
    """Create a RayCluster or RayJob; False when one of that name exists."""
    ns = manifest["metadata"]["namespace"]
    call = _objects(api).create_namespaced_custom_object(*kind.at(ns), manifest, _preload_content=False)
    return await _send_unless(call, f"create {kind.plural}/{manifest['metadata']['name']}", tolerated=409)


async def delete_custom(
    api: client.ApiClient,
    kind: ResourceName,
    namespace: str,
    name: str,
    *,
    preconditions: dict[str, str] | None = None,
) -> bool:
    """Delete (in the background); False when it was gone. `preconditions` (``uid``,
    ``resourceVersion``): KubeError 409 when the object is no longer that one."""
    body = {"preconditions": preconditions} if preconditions else None
    call = _objects(api).delete_namespaced_custom_object(
        *kind.at(namespace), name, body=body, _preload_content=False
    )
    return await _send_unless(call, f"delete {kind.plural}/{name}", tolerated=404)


async def patch_custom(
    api: client.ApiClient,
    kind: ResourceName,
    namespace: str,
    name: str,
    patch: Any,
    *,
    json_patch: bool = False,
) -> dict[str, Any]:
    """A merge patch (or an RFC 6902 patch: KubeError 422 when its ``test`` fails); the object after."""
    call = _objects(api).patch_namespaced_custom_object(
        *kind.at(namespace),
        name,
        patch,
        _content_type=JSON_PATCH if json_patch else MERGE_PATCH,
        _preload_content=False,
    )
    patched: dict[str, Any] = await send(call, f"patch {kind.plural}/{name}", body=True)
    return patched


async def replace_status(api: client.ApiClient, kind: ResourceName, body: dict[str, Any]) -> dict[str, Any]:
    """PUT the status subresource (the body's resourceVersion guards it: 409 when stale)."""
    meta = body["metadata"]
    call = _objects(api).replace_namespaced_custom_object_status(
        *kind.at(meta["namespace"]), meta["name"], body, _preload_content=False
    )
    written: dict[str, Any] = await send(call, f"update status of {kind.plural}/{meta['name']}", body=True)
    return written


async def suspend_worker_groups(api: client.ApiClient, namespace: str, name: str, groups: int) -> None:
    """``suspend: true`` on each of the first `groups` worker groups (a JSON patch that fails if
    the cluster has fewer)."""
    patch = [
        {"op": "add", "path": f"/spec/workerGroupSpecs/{i}/suspend", "value": True} for i in range(groups)
    ]
    await patch_custom(api, RAYCLUSTER, namespace, name, patch, json_patch=True)


async def delete_job_background(api: client.ApiClient, namespace: str, name: str) -> bool:
    """Delete a batch Job and (in the background) its pods; False when it was gone."""
    batch: Any = client.BatchV1Api(api)
    call = batch.delete_namespaced_job(
        name, namespace, body={"propagationPolicy": "Background"}, _preload_content=False
    )
    return await _send_unless(call, f"delete job {name}", tolerated=404)


async def get_service(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    core: Any = client.CoreV1Api(api)
    try:
        found: dict[str, Any] = await send(
            core.read_namespaced_service(name, namespace, _preload_content=False),
            f"get service {name}",
            body=True,
        )
    except KubeError as exc:
        if exc.status == 404:
            return None
        raise
    return found


async def replace_service(api: client.ApiClient, body: dict[str, Any]) -> None:
    core: Any = client.CoreV1Api(api)
    meta = body["metadata"]
    call = core.replace_namespaced_service(meta["name"], meta["namespace"], body, _preload_content=False)
    await send(call, f"update service {meta['name']}")
