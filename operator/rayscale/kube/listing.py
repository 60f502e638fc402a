"""When the indexes kopf's event handlers fill hold every custom resource that exists.

kopf calls an event handler for each object of its initial listing, then for each change; it
does not say when its listing is over. `wait_indexed` LISTs the custom resources of the watched
namespaces itself, and returns once the indexes hold every object the latest LIST showed (an
object deleted meanwhile is gone from the next LIST; one created meanwhile is delivered by the
watch). Until then the controller and the autoscaler do not start: on a partial index a reconcile
would create pods that already exist, and a request be told its RayCluster does not exist.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any

from kubernetes_asyncio import client

from rayscale.kube import ops
from rayscale.kube.by_cluster import ObjKey
from rayscale.kube.watchhealth import watched_namespaces

log = logging.getLogger(__name__)
Resource = tuple[str, str, str]  # group, version, plural
PAGE = 500
POLL_SECONDS = 0.5


async def listed_keys(api: client.ApiClient, resource: Resource, namespace: str | None) -> set[ObjKey]:
    """The (namespace, name) of every object of `resource` in `namespace` (None: in all), listed a
    page at a time; none when the resource is not served (its CRD is not installed)."""
    objects: Any = client.CustomObjectsApi(api)
    group, version, plural = resource
    keys: set[ObjKey] = set()
    params: dict[str, Any] = {"limit": PAGE, "_preload_content": False}
    while True:
        call = (
            objects.list_cluster_custom_object(group, version, plural, **params)
            if namespace is None
            else objects.list_namespaced_custom_object(group, version, namespace, plural, **params)
        )
        try:
            body = await ops.send(call, f"list {plural}", body=True)
        except ops.KubeError as exc:
            if exc.status == 404:
                return keys
            raise
        for item in body.get("items") or []:
            meta = item.get("metadata") or {}
            keys.add((str(meta.get("namespace") or ""), str(meta.get("name") or "")))
        params["_continue"] = str((body.get("metadata") or {}).get("continue") or "")
        if not params["_continue"]:
            return keys


async def wait_indexed(
    api: client.ApiClient,
    namespaces: list[str] | None,
    held: Sequence[tuple[Resource, Callable[[], Collection[ObjKey]]]],
    *,
    poll: float = POLL_SECONDS,
) -> None:
    """Return once, for each (resource, held) of `held`, `held()` has every object of the resource a
    LIST of the watched `namespaces` (names or kopf's patterns; None: all) shows. A LIST that
    fails is tried again."""
    while True:
        try:
            missing = 0
            for namespace in await watched_namespaces(api, namespaces):
                for resource, have in held:
                    missing += len(await listed_keys(api, resource, namespace) - set(have()))
            if not missing:
                return
            log.debug("waiting for kopf to index %d listed custom resources", missing)
        except ops.KubeError as exc:
            log.warning("listing the custom resources failed (%s); again in %.1fs", exc, poll)
        await asyncio.sleep(poll)
