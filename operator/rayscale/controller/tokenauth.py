"""Ray token authentication (``spec.authOptions.mode: token``), wired as KubeRay wires it.

Every Ray container and the workers' ``wait-gcs-ready`` init container get ``RAY_AUTH_MODE=token``
and either the token (``RAY_AUTH_TOKEN`` from the Secret's key ``auth_token``) or, with
``enableK8sTokenAuth``, ``RAY_ENABLE_K8S_TOKEN_AUTH=true`` and the pod's projected service
account token mounted read-only. Variables and mounts the template already has are kept.

The Secret is ``authOptions.secretName`` when set (the user's), else one named after the
cluster that the controller creates once with a random token, owned by the RayCluster so it
goes with it (`rayscale.cluster.naming.auth_token_secret_name`, which the autoscaler reads the
token from too). With Kubernetes token auth there is no Secret.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping
from typing import Any

from rayscale.api.raycluster import AuthOptions
from rayscale.cluster import naming
from rayscale.cluster.meta import ClusterMeta
from rayscale.common import labels as L
from rayscale.common.types import Manifest

__all__ = [
    "configure",
    "configure_container",
    "enabled",
    "needs_secret",
    "new_token",
    "secret_manifest",
]

TOKEN_VOLUME = "ray-token"
TOKEN_MOUNT_PATH = "/var/run/secrets/ray.io/serviceaccount"
WAIT_GCS_READY = "wait-gcs-ready"


def enabled(auth: AuthOptions | None) -> bool:
    return auth is not None and auth.mode == "token"


def _k8s(auth: AuthOptions | None) -> bool:
    return auth is not None and bool(auth.enable_k8s_token_auth)


def _secret_name(cluster: str, auth: AuthOptions | None) -> str:
    return naming.auth_token_secret_name(cluster, auth.secret_name if auth is not None else None)


def _has_env(container: Mapping[str, Any], name: str) -> bool:
    return any(e.get("name") == name for e in container.get("env") or [])


def configure_container(container: dict[str, Any], cluster: str, auth: AuthOptions | None) -> None:
    """The variables (and, with Kubernetes tokens, the mount) of one container."""
    env: list[dict[str, Any]] = container.setdefault("env", [])
    if not _has_env(container, "RAY_AUTH_MODE"):
        env.append({"name": "RAY_AUTH_MODE", "value": "token"})
    if _k8s(auth):
        if not _has_env(container, "RAY_ENABLE_K8S_TOKEN_AUTH"):
            env.append({"name": "RAY_ENABLE_K8S_TOKEN_AUTH", "value": "true"})
        mounts: list[dict[str, Any]] = container.setdefault("volumeMounts", [])
        if not any(m.get("name") == TOKEN_VOLUME for m in mounts):
            mounts.append({"name": TOKEN_VOLUME, "mountPath": TOKEN_MOUNT_PATH, "readOnly": True})
    elif not _has_env(container, "RAY_AUTH_TOKEN"):
        ref = {"name": _secret_name(cluster, auth), "key": naming.AUTH_TOKEN_KEY}
        env.append({"name": "RAY_AUTH_TOKEN", "valueFrom": {"secretKeyRef": ref}})


def configure(pod_spec: dict[str, Any], cluster: str, auth: AuthOptions | None) -> None:
    """Token auth for the Ray container (the first) and the ``wait-gcs-ready`` init container."""
    if not enabled(auth):
        return
    configure_container(pod_spec["containers"][0], cluster, auth)
    if _k8s(auth):
        volumes: list[dict[str, Any]] = pod_spec.setdefault("volumes", [])
        if not any(v.get("name") == TOKEN_VOLUME for v in volumes):
            token = {"serviceAccountToken": {"path": "token"}}
            volumes.append({"name": TOKEN_VOLUME, "projected": {"sources": [token]}})
    for init in pod_spec.get("initContainers") or []:
        if init.get("name") == WAIT_GCS_READY:
            configure_container(init, cluster, auth)


def needs_secret(auth: AuthOptions | None) -> bool:
    """Whether the controller must create the token Secret (token mode, no Secret named, no
    Kubernetes token auth)."""
    return enabled(auth) and not _k8s(auth) and not (auth is not None and auth.secret_name)


def secret_manifest(meta: ClusterMeta, auth: AuthOptions | None, token: str = "") -> Manifest:
    """The token Secret; the token is filled in (``new_token``) only when it is created."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": _secret_name(meta.name, auth),
            "namespace": meta.namespace,
            "labels": {L.RAY_CLUSTER: meta.name},
            "ownerReferences": [meta.owner_reference()],
        },
        "stringData": {naming.AUTH_TOKEN_KEY: token},
    }


def new_token() -> str:
    """32 random bytes, base64: a token as KubeRay generates them."""
    return base64.b64encode(secrets.token_bytes(32)).decode()
