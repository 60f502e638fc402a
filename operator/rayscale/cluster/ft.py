"""The GCS fault-tolerance switches of a RayCluster, as KubeRay reads them.

GCS fault tolerance (an external Redis keeps the GCS's tables) is on when
``spec.gcsFaultToleranceOptions`` is set or the older annotation ``ray.io/ft-enabled`` is
``true``. The GCS's key prefix in Redis (its storage namespace) is
``gcsFaultToleranceOptions.externalStorageNamespace``, else the annotation
``ray.io/external-storage-namespace``, else the RayCluster's uid. With fault tolerance on, a
deleted RayCluster's data is cleaned out of Redis unless the operator runs with
``ENABLE_GCS_FT_REDIS_CLEANUP=false``; the cleanup is given up after
``ray.io/gcs-ft-deletion-timeout`` seconds (300).

The controller wires these into the pods and the cleanup Job; the autoscaler reads none of them
(a head that restarts shows as a new GCS session, whatever brought it back).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from rayscale.api.raycluster import RayClusterSpec

__all__ = [
    "DEFAULT_DELETION_TIMEOUT_SECONDS",
    "DELETION_TIMEOUT_ANNOTATION",
    "FT_ENABLED_ANNOTATION",
    "REDIS_CLEANUP_SWITCH",
    "STORAGE_NS_ANNOTATION",
    "deletion_timeout_seconds",
    "enabled",
    "redis_cleanup_enabled",
    "storage_namespace",
]

FT_ENABLED_ANNOTATION = "ray.io/ft-enabled"
STORAGE_NS_ANNOTATION = "ray.io/external-storage-namespace"
DELETION_TIMEOUT_ANNOTATION = "ray.io/gcs-ft-deletion-timeout"
DEFAULT_DELETION_TIMEOUT_SECONDS = 300
#: The operator's environment switch that turns the Redis cleanup off (``false``).
REDIS_CLEANUP_SWITCH = "ENABLE_GCS_FT_REDIS_CLEANUP"


def enabled(spec: RayClusterSpec, annotations: Mapping[str, str]) -> bool:
    """GCS fault tolerance: ``gcsFaultToleranceOptions`` set, or ``ray.io/ft-enabled: "true"``."""
    return (
        spec.gcs_fault_tolerance_options is not None
        or annotations.get(FT_ENABLED_ANNOTATION, "").lower() == "true"
    )


def redis_cleanup_enabled(spec: RayClusterSpec, annotations: Mapping[str, str]) -> bool:
    """Whether a deleted cluster's GCS data is cleaned out of Redis (fault tolerance on, and the
    operator's ``ENABLE_GCS_FT_REDIS_CLEANUP`` not ``false``)."""
    off = os.environ.get(REDIS_CLEANUP_SWITCH, "").lower() == "false"
    return not off and enabled(spec, annotations)


def storage_namespace(spec: RayClusterSpec, annotations: Mapping[str, str], uid: str) -> str:
    """The GCS's key prefix in Redis: ``externalStorageNamespace``, else the annotation, else `uid`."""
    options = spec.gcs_fault_tolerance_options
    if options is not None and options.external_storage_namespace:
        return options.external_storage_namespace
    return annotations.get(STORAGE_NS_ANNOTATION, uid)


def deletion_timeout_seconds(annotations: Mapping[str, str]) -> int:
    """How long a deleted cluster waits for its Redis cleanup: the annotation (a positive whole
    number of seconds), else 300."""
    raw = annotations.get(DELETION_TIMEOUT_ANNOTATION, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_DELETION_TIMEOUT_SECONDS
