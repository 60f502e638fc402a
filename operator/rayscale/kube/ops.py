"""The few API calls the controller makes, with KubeRay's tolerance of 404/409."""

from __future__ import annotations

import base64
import contextlib
import json
import math
import re
from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
import pydantic_core
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from rayscale.api.names import RAYCLUSTER, RAYRESOURCEREQUEST, RAYVIRTUALCLUSTER

MERGE_PATCH = "application/merge-patch+json"


class KubeError(Exception):
    """An API call failed; `status` is the HTTP status (0 when unknown), `retry_after` the seconds
    the server asked to wait (its ``Retry-After``, as with 429 Too Many Requests), when it did."""

    def __init__(self, message: str, status: int = 0, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def retry_after(headers: Mapping[str, str] | None, now: datetime | None = None) -> float | None:
    """A ``Retry-After`` header in seconds (delta-seconds or an HTTP date); None when absent or bad."""
    value = (headers or {}).get("Retry-After")
    if not value:
        return None
    with contextlib.suppress(ValueError):
        seconds = float(value)
        return max(seconds, 0.0) if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def _core(api: client.ApiClient) -> Any:
    """CoreV1Api, untyped: bodies are plain dicts and responses raw (no model deserialisation)."""
    return client.CoreV1Api(api)


def _objects(api: client.ApiClient) -> Any:
    return client.CustomObjectsApi(api)


def _error(exc: ApiException, what: str) -> KubeError:
    reason = exc.reason or ""
    with contextlib.suppress(TypeError, ValueError):
        reason = json.loads(exc.body or "{}").get("message", reason)
    return KubeError(
        f"{what}: {exc.status} {reason}", exc.status or 0, retry_after(getattr(exc, "headers", None))
    )


async def send_raw(call: Awaitable[Any], what: str) -> Any:
    """Await a raw (``_preload_content=False``) call and return its response, unread, once its
    status is 2xx; the caller releases it.

    kubernetes-asyncio raises ApiException for a non-2xx answer only when it parses the answer
    itself, so a raw call's status is checked here: KubeError with the HTTP status. A broken
    connection (the server disconnected, the answer was cut off) is a KubeError with status 0, so
    every caller handles it as a failed call.
    """
    try:
        resp = await call
    except ApiException as exc:
        raise _error(exc, what) from exc
    except aiohttp.ClientError as exc:  # the connection broke: the server may or may not have acted
        raise KubeError(f"{what}: {type(exc).__name__}: {exc}") from exc
    if 200 <= resp.status <= 299:
        return resp
    try:
        reason = resp.reason or ""
        with contextlib.suppress(TypeError, ValueError, AttributeError, aiohttp.ClientError):
            reason = json.loads(await resp.text()).get("message", reason)
        raise KubeError(
            f"{what}: {resp.status} {reason}", resp.status, retry_after(getattr(resp, "headers", None))
        )
    finally:
        resp.release()


async def send(call: Awaitable[Any], what: str, *, body: bool = False) -> Any:
    """`send_raw`, then the response's JSON body when `body` (else None).

    The body is read either way: aiohttp closes the connection of a response released unread,
    and the next request then opens one, with a TLS handshake (11% of the operator's CPU while
    it deleted 1,000 pods)."""
    resp = await send_raw(call, what)
    try:
        data = await resp.read()
        return pydantic_core.from_json(data) if body and data.strip() else None
    except aiohttp.ClientError as exc:  # the answer was cut off
        raise KubeError(f"{what}: {type(exc).__name__}: {exc}") from exc
    finally:
        resp.release()


async def _get(call: Awaitable[Any], what: str) -> dict[str, Any] | None:
    """`send` a read and answer the object, or None when the server says it does not exist (404)."""
    try:
        found: dict[str, Any] = await send(call, what, body=True)
    except KubeError as exc:
        if exc.status == 404:
            return None
        raise
    return found


async def _send_unless(call: Awaitable[Any], what: str, *, tolerated: int) -> bool:
    """`send`, returning False instead of raising for the one tolerated status (404 or 409)."""
    try:
        await send(call, what)
    except KubeError as exc:
        if exc.status == tolerated:
            return False
        raise
    return True


async def create_pod(api: client.ApiClient, namespace: str, manifest: dict[str, Any]) -> str:
    """Create a pod (generateName) and return its name.

    A refusal names the pod the API server generated and then did not create (`pods
    "demo-worker-x7k2p" is forbidden: exceeded quota`), a new name each attempt; the error says
    `"demo-worker-*"` instead, so repeated refusals read alike (one Event with a count, one status
    message)."""
    call = _core(api).create_namespaced_pod(namespace, manifest, _preload_content=False)
    try:
        body = await send(call, "create pod", body=True)
    except KubeError as exc:
        prefix = (manifest.get("metadata") or {}).get("generateName")
        if not prefix:
            raise
        message = re.sub(rf'"{re.escape(prefix)}[a-z0-9]+"', f'"{prefix}*"', str(exc))
        raise KubeError(message, exc.status, exc.retry_after) from exc
    return str(body["metadata"]["name"])


async def delete_pod(api: client.ApiClient, namespace: str, name: str) -> bool:
    """Delete a pod; False when it was already gone."""
    call = _core(api).delete_namespaced_pod(name, namespace, _preload_content=False)
    return await _send_unless(call, f"delete pod {name}", tolerated=404)


async def create_service(api: client.ApiClient, namespace: str, manifest: dict[str, Any]) -> bool:
    """Create a Service; False when one of that name already exists."""
    call = _core(api).create_namespaced_service(namespace, manifest, _preload_content=False)
    return await _send_unless(call, f"create service {manifest['metadata']['name']}", tolerated=409)


async def create_secret(api: client.ApiClient, namespace: str, manifest: dict[str, Any]) -> bool:
    """Create a Secret; False when one of that name already exists (it is left alone)."""
    call = _core(api).create_namespaced_secret(namespace, manifest, _preload_content=False)
    return await _send_unless(call, f"create secret {manifest['metadata']['name']}", tolerated=409)


async def create_ingress(api: client.ApiClient, namespace: str, manifest: dict[str, Any]) -> bool:
    """Create an Ingress; False when one of that name already exists (it is left alone)."""
    networking: Any = client.NetworkingV1Api(api)
    call = networking.create_namespaced_ingress(namespace, manifest, _preload_content=False)
    return await _send_unless(call, f"create ingress {manifest['metadata']['name']}", tolerated=409)


async def create_rbac(api: client.ApiClient, namespace: str, manifest: dict[str, Any]) -> bool:
    """Create a ServiceAccount, Role or RoleBinding; False when it already exists (left alone)."""
    kind = manifest["kind"]
    what = f"create {kind.lower()} {manifest['metadata']['name']}"
    if kind == "ServiceAccount":
        call = _core(api).create_namespaced_service_account(namespace, manifest, _preload_content=False)
    else:
        rbac: Any = client.RbacAuthorizationV1Api(api)
        create = rbac.create_namespaced_role if kind == "Role" else rbac.create_namespaced_role_binding
        call = create(namespace, manifest, _preload_content=False)
    return await _send_unless(call, what, tolerated=409)


async def create_job(api: client.ApiClient, namespace: str, manifest: dict[str, Any]) -> bool:
    """Create a Job; False when one of that name already exists."""
    batch: Any = client.BatchV1Api(api)
    call = batch.create_namespaced_job(namespace, manifest, _preload_content=False)
    return await _send_unless(call, f"create job {manifest['metadata']['name']}", tolerated=409)


async def get_job(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The Job as a dict, or None when there is none."""
    batch: Any = client.BatchV1Api(api)
    return await _get(batch.read_namespaced_job(name, namespace, _preload_content=False), f"get job {name}")


async def patch_raycluster_status(
    api: client.ApiClient, namespace: str, name: str, patch: dict[str, Any]
) -> bool:
    """Merge-patch the status subresource; False when the RayCluster is gone."""
    call = _objects(api).patch_namespaced_custom_object_status(
        *RAYCLUSTER.at(namespace), name, patch, _content_type=MERGE_PATCH, _preload_content=False
    )
    return await _send_unless(call, f"patch status of rayclusters/{name}", tolerated=404)


LIST_PAGE = 100  # objects per page of a LIST (client-go's reflector pages at 500)


async def list_rayclusters(api: client.ApiClient, namespace: str | None) -> list[dict[str, Any]]:
    """Every RayCluster of `namespace` (None: of all), only its name, namespace and
    resourceVersion (what the watch-health check compares), listed `LIST_PAGE` at a time: a
    fleet's RayClusters are never all decoded at once."""
    objects = _objects(api)
    out: list[dict[str, Any]] = []
    token = ""
    while True:
        page: dict[str, Any] = {"limit": LIST_PAGE, "_preload_content": False}
        if token:
            page["_continue"] = token
        if namespace is None:
            call = objects.list_cluster_custom_object(*RAYCLUSTER.path, **page)
        else:
            call = objects.list_namespaced_custom_object(*RAYCLUSTER.at(namespace), **page)
        body = await send(call, "list rayclusters", body=True)
        out += [{"metadata": _list_meta(item.get("metadata") or {})} for item in body.get("items", [])]
        token = str((body.get("metadata") or {}).get("continue") or "")
        if not token:
            return out


def _list_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    return {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta}


async def list_namespaces(api: client.ApiClient) -> list[str]:
    """The names of every namespace."""
    body = await send(_core(api).list_namespace(_preload_content=False), "list namespaces", body=True)
    return [str(item["metadata"]["name"]) for item in body.get("items", [])]


async def list_kueue_workloads(api: client.ApiClient, namespace: str, job_uid: str) -> list[dict[str, Any]]:
    """Kueue's Workloads (``kueue.x-k8s.io/v1beta2``) of the job whose uid is `job_uid` (Kueue labels
    them ``kueue.x-k8s.io/job-uid``); none when Kueue is not installed (404)."""
    call = _objects(api).list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads",
        label_selector=f"kueue.x-k8s.io/job-uid={job_uid}", _preload_content=False,
    )  # fmt: skip
    found = await _get(call, f"list workloads of {job_uid}")
    return list((found or {}).get("items") or [])


async def list_events(api: client.ApiClient, namespace: str, field_selector: str) -> list[dict[str, Any]]:
    """The core/v1 Events of `namespace` that `field_selector` selects, `LIST_PAGE` at a time."""
    out: list[dict[str, Any]] = []
    token = ""
    while True:
        page: dict[str, Any] = {
            "field_selector": field_selector,
            "limit": LIST_PAGE,
            "_preload_content": False,
        }
        if token:
            page["_continue"] = token
        call = _core(api).list_namespaced_event(namespace, **page)
        body = await send(call, f"list events ({field_selector})", body=True)
        out += [item for item in body.get("items", []) if isinstance(item, dict)]
        token = str((body.get("metadata") or {}).get("continue") or "")
        if not token:
            return out


async def get_resource_quota(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The ResourceQuota as a dict (its ``status.hard`` and ``status.used``), or None when there is none."""
    call = _core(api).read_namespaced_resource_quota(name, namespace, _preload_content=False)
    return await _get(call, f"get resourcequota {name}")


JSON_PATCH = "application/json-patch+json"
TEST_FAILED = (409, 422)  # what the API server answers when a patch's test or a delete's precondition fails


async def get_raycluster(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The RayCluster as the API server has it now; None when it is gone."""
    call = _objects(api).get_namespaced_custom_object(*RAYCLUSTER.at(namespace), name, _preload_content=False)
    return await _get(call, f"get rayclusters/{name}")


async def json_patch_raycluster(
    api: client.ApiClient, namespace: str, name: str, patch: list[dict[str, Any]]
) -> None:
    """Apply an RFC 6902 patch; KubeError with status 409/422 when its ``test`` failed."""
    call = _objects(api).patch_namespaced_custom_object(
        *RAYCLUSTER.at(namespace), name, patch, _content_type=JSON_PATCH, _preload_content=False
    )
    await send(call, f"patch rayclusters/{name}")


async def patch_rayresourcerequest_status(
    api: client.ApiClient, namespace: str, name: str, patch: dict[str, Any]
) -> bool:
    """Merge-patch a RayResourceRequest's status subresource; False when it is gone."""
    call = _objects(api).patch_namespaced_custom_object_status(
        *RAYRESOURCEREQUEST.at(namespace), name, patch,
        _content_type=MERGE_PATCH, _preload_content=False,
    )  # fmt: skip
    return await _send_unless(call, f"patch status of rayresourcerequests/{name}", tolerated=404)


async def read_secret_key(api: client.ApiClient, namespace: str, name: str, key: str) -> str | None:
    """One key of a Secret, decoded; None when the Secret or key is missing."""
    secret = await _get(
        _core(api).read_namespaced_secret(name, namespace, _preload_content=False), f"read secret {name}"
    )
    if secret is None:
        return None
    value = (secret.get("data") or {}).get(key)
    return base64.b64decode(value).decode() if value else None


async def patch_pod_labels(
    api: client.ApiClient, namespace: str, name: str, labels: dict[str, str | None]
) -> bool:
    """Merge-patch a pod's labels (None removes one); False when the pod is gone."""
    call = _core(api).patch_namespaced_pod(
        name, namespace, {"metadata": {"labels": labels}}, _content_type=MERGE_PATCH, _preload_content=False
    )
    return await _send_unless(call, f"patch labels of pods/{name}", tolerated=404)


async def patch_rayvirtualcluster(
    api: client.ApiClient, namespace: str, name: str, patch: dict[str, Any], *, status: bool = False
) -> bool:
    """Merge-patch a RayVirtualCluster (its status subresource with `status`); False when it is gone."""
    objects = _objects(api)
    method = (
        objects.patch_namespaced_custom_object_status if status else objects.patch_namespaced_custom_object
    )
    call = method(
        *RAYVIRTUALCLUSTER.at(namespace),
        name,
        patch,
        _content_type=MERGE_PATCH,
        _preload_content=False,
    )
    what = f"patch {'status of ' if status else ''}rayvirtualclusters/{name}"
    return await _send_unless(call, what, tolerated=404)


async def create_event(api: client.ApiClient, event: dict[str, Any]) -> bool:
    """Create a core/v1 Event (named); False when one of that name already exists."""
    namespace, name = event["metadata"]["namespace"], event["metadata"]["name"]
    call = _core(api).create_namespaced_event(namespace, event, _preload_content=False)
    return await _send_unless(call, f"create event {name}", tolerated=409)


async def patch_event(api: client.ApiClient, namespace: str, name: str, patch: dict[str, Any]) -> bool:
    """Merge-patch an Event (its count, lastTimestamp, message); False when it is gone."""
    call = _core(api).patch_namespaced_event(
        name, namespace, patch, _content_type=MERGE_PATCH, _preload_content=False
    )
    return await _send_unless(call, f"patch event {name}", tolerated=404)
