"""Cleaning a cluster's GCS data out of Redis when the RayCluster is deleted, as KubeRay does.

With GCS fault tolerance on, the RayCluster gets the finalizer
``ray.io/gcs-ft-redis-cleanup-finalizer`` before any pod is created. When it is deleted, every
pod is deleted first (the GCS must stop writing); once the head is gone, a Job
``<cluster>-redis-cleanup`` runs Ray's ``cleanup_redis_storage`` on the cluster's storage
namespace with the head's image, Redis address and credentials. When the Job has finished
(succeeded or failed: KubeRay's rule; a failed cleanup is reported and left to the user), or
after ``ray.io/gcs-ft-deletion-timeout`` seconds (300) since the deletion, the finalizer is
removed and the RayCluster goes. ``ENABLE_GCS_FT_REDIS_CLEANUP=false`` turns all of it off.

Pure: the controller's runner does the calls.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster import ft, naming
from rayscale.cluster.meta import ClusterMeta
from rayscale.common import labels as L
from rayscale.common.types import Manifest
from rayscale.controller import pods as podspec
from rayscale.controller import switches

__all__ = ["FINALIZER", "deletion_timed_out", "job_finished", "job_manifest", "job_name"]

FINALIZER = "ray.io/gcs-ft-redis-cleanup-finalizer"
NODE_TYPE = "redis-cleanup"

_FAQ = (
    'echo "To get more information about manually deleting the storage namespace in Redis and removing'
    " the RayCluster's finalizer, please check"
    ' https://docs.ray.io/en/master/cluster/kubernetes/user-guides/kuberay-gcs-ft.html for more details." && '
)
_SCRIPT = (
    'python -c "from ray._private.gcs_utils import cleanup_redis_storage; '
    "from urllib.parse import urlparse; import os; import sys; "
    "redis_address = os.getenv('RAY_REDIS_ADDRESS', '').split(',')[0]; "
    "redis_address = redis_address if '://' in redis_address else 'redis://' + redis_address; "
    "parsed = urlparse(redis_address); "
    "sys.exit(1) if not cleanup_redis_storage(host=parsed.hostname, port=parsed.port, {user}"
    "password=os.getenv('REDIS_PASSWORD', parsed.password or ''), use_ssl=parsed.scheme=='rediss', "
    "storage_namespace=os.getenv('RAY_external_storage_namespace')) else None\""
)


def job_name(cluster: str) -> str:
    return naming.trim_front(f"{cluster}-redis-cleanup")


def job_manifest(meta: ClusterMeta, spec: RayClusterSpec) -> Manifest:
    """KubeRay's cleanup Job: the head pod's Ray container (image, env, mounts), nothing else."""
    head = podspec.head_pod(meta, spec)
    pod_meta = head["metadata"]
    # What the head pod gets at creation only (as KubeRay's createHeadPod adds them), not the Job.
    annotations = pod_meta.get("annotations") or {}
    for key in (L.HASH_ANNOTATION, L.KUBERAY_VERSION_ANNOTATION):
        annotations.pop(key, None)
    pod_meta["labels"][L.NODE_TYPE] = NODE_TYPE
    pod_spec = head["spec"]
    ray: dict[str, Any] = copy.deepcopy(pod_spec["containers"][0])
    user = any(e.get("name") == "REDIS_USERNAME" for e in ray.get("env") or [])
    username = "username=os.getenv('REDIS_USERNAME', parsed.username), " if user else ""
    ray["command"] = switches.container_command()
    ray["args"] = [_FAQ + _SCRIPT.format(user=username)]
    ray.pop("livenessProbe", None)
    ray.pop("readinessProbe", None)
    ray.setdefault("env", []).extend(
        [
            {"name": "RAY_redis_db_connect_retries", "value": "120"},
            {"name": "RAY_redis_db_connect_wait_milliseconds", "value": "500"},
        ]
    )
    fixed = {"cpu": "200m", "memory": "256Mi"}
    ray["resources"] = {"limits": dict(fixed), "requests": dict(fixed)}
    pod_spec["containers"] = [ray]
    pod_spec["restartPolicy"] = "Never"
    template_meta = {
        k: v for k, v in pod_meta.items() if k not in ("ownerReferences", "generateName", "name")
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(meta.name),
            "namespace": meta.namespace,
            "labels": dict(pod_meta["labels"]),
            "annotations": dict(pod_meta.get("annotations") or {}),
            "ownerReferences": [meta.owner_reference()],
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": 300,
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    }


def job_finished(job: Mapping[str, Any]) -> str | None:
    """``Complete`` or ``Failed`` once the Job has finished (KubeRay's test), else None."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("status") != "True":
            continue
        if c.get("type") in ("Complete", "Failed"):
            return str(c["type"])
        if c.get("type") == "FailureTarget":
            return "Failed"
    return None


def deletion_timed_out(meta: ClusterMeta, deleted_at: datetime, now: datetime) -> bool:
    return (now - deleted_at).total_seconds() >= ft.deletion_timeout_seconds(meta.annotations)
