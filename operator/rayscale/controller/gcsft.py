"""GCS fault tolerance with an external Redis, wired into the pods as KubeRay wires it.

On when ``spec.gcsFaultToleranceOptions`` is set or the older annotation ``ray.io/ft-enabled``
is ``true`` (the switches are `rayscale.cluster.ft`'s). The head pod is annotated
``ray.io/ft-enabled`` either way and, with fault tolerance, ``ray.io/external-storage-namespace``:
the key prefix the GCS uses in Redis (the RayCluster's uid unless the annotation of that name or
``externalStorageNamespace`` says otherwise). The head's Ray container gets
``RAY_external_storage_namespace``, ``RAY_REDIS_ADDRESS`` and the credentials as ``REDIS_USERNAME``
/ ``REDIS_PASSWORD`` (which ``ray start`` reads through ``--redis-username=$REDIS_USERNAME`` and
``--redis-password=$REDIS_PASSWORD``); workers get ``RAY_gcs_rpc_server_reconnect_timeout_s=600``
so that their raylets wait for a restarted head instead of exiting after 60 s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayscale.api.raycluster import RayClusterSpec, RedisCredential
from rayscale.cluster import ft
from rayscale.cluster.meta import ClusterMeta

__all__ = ["configure", "start_params"]

WORKER_RECONNECT_TIMEOUT_S = "600"


def start_params(spec: RayClusterSpec, annotations: Mapping[str, str], params: dict[str, str]) -> None:
    """The head's ``redis-username`` / ``redis-password`` read the variables ``configure`` sets."""
    options = spec.gcs_fault_tolerance_options
    if options is None or not ft.enabled(spec, annotations):
        return
    if options.redis_username is not None:
        params["redis-username"] = "$REDIS_USERNAME"
    if options.redis_password is not None:
        params["redis-password"] = "$REDIS_PASSWORD"


def _has(env: list[dict[str, Any]], name: str) -> bool:
    return any(e.get("name") == name for e in env)


def _credential(name: str, credential: RedisCredential) -> dict[str, Any]:
    var: dict[str, Any] = {"name": name}
    if credential.value is not None:
        var["value"] = credential.value
    if credential.value_from is not None:
        var["valueFrom"] = credential.value_from
    return var


def configure(
    container: dict[str, Any],
    pod_annotations: dict[str, str],
    *,
    head: bool,
    meta: ClusterMeta,
    spec: RayClusterSpec,
    params: Mapping[str, str],
) -> None:
    """Annotations and variables of the Ray container (``params``: the pod's rayStartParams)."""
    on = ft.enabled(spec, meta.annotations)
    if head:
        pod_annotations[ft.FT_ENABLED_ANNOTATION] = "true" if on else "false"
    if not on:
        return
    env: list[dict[str, Any]] = container.setdefault("env", [])
    if not head:
        if not _has(env, "RAY_gcs_rpc_server_reconnect_timeout_s"):
            env.append(
                {"name": "RAY_gcs_rpc_server_reconnect_timeout_s", "value": WORKER_RECONNECT_TIMEOUT_S}
            )
        return
    options = spec.gcs_fault_tolerance_options
    storage_ns = ft.storage_namespace(spec, meta.annotations, meta.uid)
    pod_annotations[ft.STORAGE_NS_ANNOTATION] = storage_ns
    if not _has(env, "RAY_external_storage_namespace"):
        env.append({"name": "RAY_external_storage_namespace", "value": storage_ns})
    if options is not None:
        # As the API server stores KubeRay's: an empty value is no value (EnvVar.value is omitempty).
        address = {"value": options.redis_address} if options.redis_address else {}
        env.append({"name": "RAY_REDIS_ADDRESS", **address})
        if options.redis_username is not None:
            env.append(_credential("REDIS_USERNAME", options.redis_username))
        if options.redis_password is not None:
            env.append(_credential("REDIS_PASSWORD", options.redis_password))
    elif not _has(env, "REDIS_PASSWORD") and "redis-password" in params:
        # A password given in rayStartParams: the Redis cleanup reads it from here.
        env.append({"name": "REDIS_PASSWORD", "value": params["redis-password"]})
