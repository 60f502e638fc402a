"""The head Ingress of ``headGroupSpec.enableIngress``, as KubeRay builds it.

One rule, path ``/<cluster>/(.*)`` (Exact) to the head Service's dashboard port. The RayCluster's
annotations are copied onto it (that is how users configure their ingress controller), except
``kubernetes.io/ingress.class``, which becomes ``spec.ingressClassName``.
"""

from __future__ import annotations

from typing import Any

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster import naming
from rayscale.cluster.meta import ClusterMeta
from rayscale.common import labels as L
from rayscale.controller import services

__all__ = ["manifest", "wanted"]

CLASS_ANNOTATION = "kubernetes.io/ingress.class"


def wanted(spec: RayClusterSpec) -> bool:
    return bool(spec.head_group_spec.enable_ingress)


def manifest(meta: ClusterMeta, spec: RayClusterSpec) -> dict[str, Any]:
    head_service = naming.head_service_name(meta.name, spec.head_group_spec.head_service)
    port = services.port_map(spec).get("dashboard", naming.DASHBOARD_PORT)
    path = {
        "path": f"/{meta.name}/(.*)",
        "pathType": "Exact",
        "backend": {"service": {"name": head_service, "port": {"number": port}}},
    }
    ingress: dict[str, Any] = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": naming.head_ingress_name(meta.name),
            "namespace": meta.namespace,
            "labels": {
                L.RAY_CLUSTER: meta.name,
                L.IDENTIFIER: naming.head_identifier(meta.name),
                L.APP_NAME: L.APP_NAME_VALUE,
                L.CREATED_BY: L.CREATED_BY_VALUE,
            },
            "annotations": {k: v for k, v in meta.annotations.items() if k != CLASS_ANNOTATION},
            "ownerReferences": [meta.owner_reference()],
        },
        "spec": {"rules": [{"http": {"paths": [path]}}]},
    }
    if CLASS_ANNOTATION in meta.annotations:
        ingress["spec"]["ingressClassName"] = meta.annotations[CLASS_ANNOTATION]
    return ingress
