"""The head Service, the serve Service and the headless worker Service, as KubeRay builds them."""

from __future__ import annotations

import copy
from typing import Any

from rayscale.api.names import RAYCLUSTER
from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster import naming
from rayscale.cluster.meta import ClusterMeta
from rayscale.common import labels as L
from rayscale.common.types import Manifest
from rayscale.controller import switches

SERVE_ANNOTATION = "ray.io/enable-serve-service"


def head_service_labels(meta: ClusterMeta, spec: RayClusterSpec) -> dict[str, str]:
    template_labels = (spec.head_group_spec.template.get("metadata") or {}).get("labels") or {}
    return {
        L.RAY_CLUSTER: meta.name,
        L.NODE_TYPE: L.HEAD,
        L.IDENTIFIER: naming.head_identifier(meta.name),
        L.APP_NAME: template_labels.get(L.APP_NAME, L.APP_NAME_VALUE),
        L.CREATED_BY: L.CREATED_BY_VALUE,
    }


def head_service_ports(spec: RayClusterSpec) -> list[dict[str, Any]]:
    ports = port_map(spec)
    return [{"name": n, "port": ports[n], "appProtocol": "tcp"} for n in sorted(ports)]


def head_service(meta: ClusterMeta, spec: RayClusterSpec) -> Manifest:
    head = spec.head_group_spec
    labels = head_service_labels(meta, spec)
    base: dict[str, Any] = copy.deepcopy(head.head_service) if head.head_service else {}
    smeta = base.setdefault("metadata", {})
    sspec = base.setdefault("spec", {})
    smeta["name"] = naming.head_service_name(meta.name, head.head_service)
    smeta["namespace"] = meta.namespace
    smeta["labels"] = {**(smeta.get("labels") or {}), **labels}
    annotations = {**(smeta.get("annotations") or {}), **(spec.head_service_annotations or {})}
    if annotations:
        smeta["annotations"] = annotations
    smeta["ownerReferences"] = [meta.owner_reference()]
    sspec["selector"] = labels
    sspec["ports"] = [*(sspec.get("ports") or []), *head_service_ports(spec)]
    if head.head_service:
        sspec.setdefault("type", head.service_type or "ClusterIP")
    else:
        sspec["type"] = head.service_type or "ClusterIP"
        if sspec["type"] == "ClusterIP" and not switches.head_cluster_ip_service():
            sspec["clusterIP"] = "None"
            sspec["publishNotReadyAddresses"] = True
    return {"apiVersion": "v1", "kind": "Service", **base}


def port_map(spec: RayClusterSpec) -> dict[str, int]:
    containers = (spec.head_group_spec.template.get("spec") or {}).get("containers") or [{}]
    declared = containers[0].get("ports") or []
    ports: dict[str, int] = {}
    if not declared:
        ports = dict(naming.DEFAULT_HEAD_SERVICE_PORTS)
    for p in declared:
        port = int(p.get("containerPort", 0))
        ports[p.get("name") or f"{port}-port"] = port
    ports.setdefault("metrics", naming.METRICS_PORT)
    return ports


def _serving(name: str) -> bool:
    return name == "serve" or name.startswith("serve-")


def wants_serve_service(meta: ClusterMeta) -> bool:
    return meta.annotations.get(SERVE_ANNOTATION) == "true"


def serve_service(meta: ClusterMeta, spec: RayClusterSpec) -> Manifest | str:
    """``<cluster>-serve-svc`` over every pod of the cluster, with the head's serving ports
    (``serve``, ``serve-*``); or why it cannot be built (no such port)."""
    ports = port_map(spec)
    serving = [{"name": n, "port": ports[n]} for n in sorted(ports) if _serving(n)]
    if not serving:
        return (
            "Please specify a port named 'serve' (or with the prefix 'serve-', e.g. 'serve-grpc') in the"
            " Ray head container; otherwise, the Kubernetes service for Ray Serve will not be created."
        )
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": naming.serve_service_name(meta.name),
            "namespace": meta.namespace,
            "labels": {
                L.ORIGINATED_FROM_CR_NAME: meta.name,
                L.ORIGINATED_FROM_CRD: RAYCLUSTER.kind,
                L.SERVE: f"{meta.name}-serve",
                L.RAY_CLUSTER: meta.name,  # rayscale's own: how the controller's watch finds it
            },
            "ownerReferences": [meta.owner_reference()],
        },
        "spec": {
            "selector": {L.RAY_CLUSTER: meta.name},
            "ports": serving,
            "type": spec.head_group_spec.service_type or "ClusterIP",
        },
    }


def headless_worker_service(meta: ClusterMeta) -> Manifest:
    """For multi-host groups; also labelled ray.io/cluster so the controller's watch sees it."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": naming.headless_worker_service_name(meta.name),
            "namespace": meta.namespace,
            "labels": {L.HEADLESS_WORKER_SVC: meta.name, L.RAY_CLUSTER: meta.name},
            "ownerReferences": [meta.owner_reference()],
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {L.RAY_CLUSTER: meta.name, L.NODE_TYPE: L.WORKER},
        },
    }


def needs_headless_service(spec: RayClusterSpec) -> bool:
    return any(g.num_of_hosts > 1 for g in spec.workers)
