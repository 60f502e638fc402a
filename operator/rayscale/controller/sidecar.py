"""Ray's own autoscaler as a sidecar of the head pod, for ``rayscale run --mode controller``.

In that mode rayscale is a drop-in for KubeRay's operator: a cluster with
``enableInTreeAutoscaling: true`` gets what KubeRay gives it, Ray's autoscaler
(``ray kuberay-autoscaler``) in a container of the head pod, a ``/tmp/ray`` log volume shared
with the Ray container, and a ServiceAccount, Role and RoleBinding that let it read pods and
patch the RayCluster. (In the other modes rayscale autoscales the cluster itself and the head
gets none of this.)
"""

from __future__ import annotations

import copy
from typing import Any

from rayscale.api.names import RAYCLUSTER
from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster import naming
from rayscale.cluster.meta import ClusterMeta
from rayscale.common import labels as L
from rayscale.common.types import Manifest
from rayscale.controller import switches, tokenauth

__all__ = ["CONTAINER", "LOG_MOUNT", "LOG_VOLUME", "container", "rbac", "service_account_name", "v2"]

CONTAINER = "autoscaler"
LOG_VOLUME = "ray-logs"
LOG_MOUNT = "/tmp/ray"
ARGS = (
    "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) --cluster-namespace $(RAY_CLUSTER_NAMESPACE)"
)


def v2(spec: RayClusterSpec) -> bool:
    """KubeRay's test: ``autoscalerOptions.version: v2``."""
    return spec.autoscaler_options is not None and spec.autoscaler_options.version == "v2"


def service_account_name(meta: ClusterMeta, spec: RayClusterSpec) -> str:
    """The head template's ``serviceAccountName``, else one named after the cluster."""
    named = (spec.head_group_spec.template.get("spec") or {}).get("serviceAccountName")
    return str(named) if named else meta.name


def container(meta: ClusterMeta, spec: RayClusterSpec, image: str | None) -> dict[str, Any]:
    """The autoscaler container: the Ray image unless ``autoscalerOptions`` says otherwise."""
    field_env = [
        ("RAY_CLUSTER_NAME", f"metadata.labels['{L.RAY_CLUSTER}']"),
        ("RAY_CLUSTER_NAMESPACE", "metadata.namespace"),
        ("RAY_HEAD_POD_NAME", "metadata.name"),
    ]
    out: dict[str, Any] = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": [{"name": n, "valueFrom": {"fieldRef": {"fieldPath": p}}} for n, p in field_env]
        + [{"name": "KUBERAY_CRD_VER", "value": "v1"}],
        "command": switches.container_command(),
        "args": [ARGS],
        "resources": {
            "limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "500m", "memory": "512Mi"},
        },
    }
    if tokenauth.enabled(spec.auth_options):
        tokenauth.configure_container(out, meta.name, spec.auth_options)
    options = spec.autoscaler_options
    if options is not None:
        if options.resources is not None:
            out["resources"] = copy.deepcopy(options.resources)
        if options.image is not None:
            out["image"] = options.image
        if options.image_pull_policy is not None:
            out["imagePullPolicy"] = options.image_pull_policy
        for key, extra in (
            ("env", options.env),
            ("envFrom", options.env_from),
            ("volumeMounts", options.volume_mounts),
        ):
            if extra:
                out[key] = [*out.get(key, []), *copy.deepcopy(extra)]
        if options.security_context is not None:
            out["securityContext"] = copy.deepcopy(options.security_context)
    return out


def rbac(meta: ClusterMeta, spec: RayClusterSpec) -> list[Manifest]:
    """The ServiceAccount (unless the head template names its own), Role and RoleBinding."""
    labels = {L.RAY_CLUSTER: meta.name, L.APP_NAME: L.APP_NAME_VALUE, L.CREATED_BY: L.CREATED_BY_VALUE}

    def obj(api: str, kind: str, name: str, **rest: Any) -> Manifest:
        metadata = {"name": naming.check_name(name), "namespace": meta.namespace, "labels": dict(labels)}
        return {
            "apiVersion": api,
            "kind": kind,
            "metadata": {**metadata, "ownerReferences": [meta.owner_reference()]},
            **rest,
        }

    account = service_account_name(meta, spec)
    out: list[Manifest] = []
    if not (spec.head_group_spec.template.get("spec") or {}).get("serviceAccountName"):
        out.append(obj("v1", "ServiceAccount", account))
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
        {"apiGroups": [RAYCLUSTER.group], "resources": [RAYCLUSTER.plural], "verbs": ["get", "patch"]},
    ]
    out.append(obj("rbac.authorization.k8s.io/v1", "Role", meta.name, rules=rules))
    subject = {"kind": "ServiceAccount", "name": naming.check_name(account), "namespace": meta.namespace}
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": naming.check_name(meta.name)}
    out.append(
        obj("rbac.authorization.k8s.io/v1", "RoleBinding", meta.name, subjects=[subject], roleRef=role_ref)
    )
    return out
