"""What `rayscale status` reads: the Kubernetes API and the operator's API, into one document.

The cluster document (``-o json`` prints it as it is)::

    {"namespace": str, "name": str, "fetchedAt": time,
     "operator": {"reached": bool,          # the operator answered
                  "via": str|null,          # where: its URL, or "pod NS/POD" (the API server's proxy)
                  "error": str|null},       # why there is no view, in one line
     "view": cluster_view|null,             # the operator's view (rayscale.autoscaler.view)
     "kubernetes": {"rayCluster": summary.cluster, "pods": [summary.pod],
                    "requests": [summary.request], "events": [summary.event]}}

The fleet document::

    {"namespace": str|null (null: every namespace), "fetchedAt": time,
     "operator": {"reached", "via", "error", "leader": bool|null},
     "clusters": [{"namespace", "name", "kubernetes": {"rayCluster": summary.cluster,
                                                       "workers": {group: live worker pods}},
                   "view": fleet_entry|null}]}
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.config.config_exception import ConfigException

from rayscale.api.names import RAYCLUSTER, RAYRESOURCEREQUEST
from rayscale.common import labels as L
from rayscale.common.timefmt import rfc3339
from rayscale.kube.ops import KubeError, send
from rayscale.status import summary
from rayscale.status.reach import (
    NotServed,
    OperatorClient,
    Unreachable,
    cluster_path,
    fleet_path,
    scenario_path,
)

__all__ = [
    "KubeUnavailable",
    "NotFound",
    "Reader",
    "cluster_document",
    "connect",
    "fetch_scenario",
    "fleet_document",
]

TIMEOUT = 15.0
NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubeUnavailable(Exception):
    """No kubeconfig could be loaded, or the API server refused or failed a read."""


class NotFound(Exception):
    """The RayCluster does not exist."""


def _in_cluster(kubeconfig: str | None, context: str | None, cfg: client.Configuration) -> str | None:
    """In a pod without a kubeconfig: load the pod's ServiceAccount and return its namespace."""
    if kubeconfig or context or os.environ.get("KUBECONFIG") or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    if Path("~/.kube/config").expanduser().exists():
        return None
    config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    found = NAMESPACE_FILE.read_text().strip() if NAMESPACE_FILE.exists() else ""
    return found or "default"


async def connect(kubeconfig: str | None, context: str | None) -> tuple[client.ApiClient, str]:
    """An API client from the kubeconfig (or in-cluster) and the namespace its context defaults to."""
    cfg = client.Configuration()
    try:
        namespace = _in_cluster(kubeconfig, context, cfg)
        if namespace is not None:
            return client.ApiClient(configuration=cfg), namespace
        await config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
        contexts, current = config.list_kube_config_contexts(kubeconfig)
    except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
        raise KubeUnavailable(f"cannot load the kubeconfig: {exc}") from exc
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    found = ((chosen or {}).get("context") or {}).get("namespace")
    return client.ApiClient(configuration=cfg), str(found or "default")


class Reader:
    """The reads of the Kubernetes API, as plain JSON (raw calls: no model deserialisation)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core: Any = client.CoreV1Api(api)
        self.objects: Any = client.CustomObjectsApi(api)

    async def _read(self, call: Awaitable[Any], what: str) -> Any:
        try:
            return await send(call, what, body=True)
        except KubeError as exc:
            raise KubeUnavailable(str(exc)) from exc

    async def raycluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        call = self.objects.get_namespaced_custom_object(
            *RAYCLUSTER.at(namespace), name, _preload_content=False, _request_timeout=TIMEOUT
        )
        try:
            found: dict[str, Any] = await send(call, f"get RayCluster {namespace}/{name}", body=True)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise KubeUnavailable(str(exc)) from exc
        return found

    async def rayclusters(self, namespace: str | None) -> list[dict[str, Any]]:
        options = {"_preload_content": False, "_request_timeout": TIMEOUT}
        if namespace is None:
            call = self.objects.list_cluster_custom_object(*RAYCLUSTER.path, **options)
        else:
            call = self.objects.list_namespaced_custom_object(*RAYCLUSTER.at(namespace), **options)
        listed = await self._read(call, f"list RayClusters in {namespace or 'every namespace'}")
        return list(listed.get("items") or [])

    async def pods(self, namespace: str | None, selector: str) -> list[dict[str, Any]]:
        options = {"label_selector": selector, "_preload_content": False, "_request_timeout": TIMEOUT}
        if namespace is None:
            call = self.core.list_pod_for_all_namespaces(**options)
        else:
            call = self.core.list_namespaced_pod(namespace, **options)
        listed = await self._read(call, f"list pods in {namespace or 'every namespace'}")
        return list(listed.get("items") or [])

    async def requests(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The cluster's RayResourceRequests; none when their CRD is not installed."""
        call = self.objects.list_namespaced_custom_object(
            *RAYRESOURCEREQUEST.at(namespace), _preload_content=False, _request_timeout=TIMEOUT
        )
        try:
            listed = await send(call, f"list RayResourceRequests in {namespace}", body=True)
        except KubeError as exc:
            if exc.status == 404:
                return []
            raise KubeUnavailable(str(exc)) from exc
        return [r for r in listed.get("items") or [] if (r.get("spec") or {}).get("clusterName") == name]

    async def events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        call = self.core.list_namespaced_event(
            namespace,
            field_selector=f"involvedObject.kind=RayCluster,involvedObject.name={name}",
            _preload_content=False,
            _request_timeout=TIMEOUT,
        )
        listed = await self._read(call, f"list Events of {namespace}/{name}")
        return list(listed.get("items") or [])


async def _ask(operator: OperatorClient, path: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The operator's answer to `path` and how it went ({"reached", "via", "error"})."""
    try:
        body = await operator.get(path)
    except NotServed as exc:
        return {"reached": True, "via": operator.via, "error": str(exc)}, None
    except Unreachable as exc:
        return {"reached": False, "via": operator.via, "error": str(exc)}, None
    return {"reached": True, "via": operator.via, "error": None}, body


async def cluster_document(
    reader: Reader, operator: OperatorClient, namespace: str, name: str, now: datetime
) -> dict[str, Any]:
    """The document of one RayCluster; NotFound when it does not exist, KubeUnavailable when the
    API server cannot be read. An operator that cannot be asked leaves ``view`` null."""
    rc, pods, requests, events, (reached, view) = await asyncio.gather(
        reader.raycluster(namespace, name),
        reader.pods(namespace, f"{L.RAY_CLUSTER}={name}"),
        reader.requests(namespace, name),
        reader.events(namespace, name),
        _ask(operator, cluster_path(namespace, name)),
    )
    if rc is None:
        raise NotFound(f"RayCluster {namespace}/{name} not found")
    return {
        "namespace": namespace,
        "name": name,
        "fetchedAt": rfc3339(now),
        "operator": reached,
        "view": view,
        "kubernetes": {
            "rayCluster": summary.cluster(rc),
            "pods": sorted((summary.pod(p) for p in pods), key=lambda p: (not p["head"], str(p["name"]))),
            "requests": sorted((summary.request(r) for r in requests), key=lambda r: str(r["name"])),
            "events": summary.events(events),
        },
    }


async def fleet_document(
    reader: Reader, operator: OperatorClient, namespace: str | None, now: datetime
) -> dict[str, Any]:
    """Every RayCluster of `namespace` (None: of every namespace), with the operator's short view."""
    clusters, workers, (reached, listing) = await asyncio.gather(
        reader.rayclusters(namespace),
        reader.pods(namespace, f"{L.NODE_TYPE}={L.WORKER}"),
        _ask(operator, fleet_path()),
    )
    entries = {(e.get("namespace"), e.get("name")): e for e in (listing or {}).get("clusters") or []}
    counts = summary.worker_counts(workers)
    out = []
    for rc in sorted(clusters, key=lambda c: (c["metadata"].get("namespace"), c["metadata"]["name"])):
        ns, name = str(rc["metadata"].get("namespace")), str(rc["metadata"]["name"])
        out.append(
            {
                "namespace": ns,
                "name": name,
                "kubernetes": {"rayCluster": summary.cluster(rc), "workers": counts.get((ns, name), {})},
                "view": entries.get((ns, name)),
            }
        )
    leader = (listing or {}).get("leader")
    return {
        "namespace": namespace,
        "fetchedAt": rfc3339(now),
        "operator": {**reached, "leader": leader if isinstance(leader, bool) else None},
        "clusters": out,
    }


async def fetch_scenario(operator: OperatorClient, namespace: str, name: str, index: int) -> dict[str, Any]:
    """The scenario document of the `index`-th newest decision of a cluster (NotServed, Unreachable)."""
    body: dict[str, Any] = await operator.get(scenario_path(namespace, name, index))
    return body
