"""The I/O of the Redis cleanup finalizer (see ``redis_cleanup``): add it, and on deletion delete
the pods, run the cleanup Job, then remove it."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client

from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.validation import Invalid
from rayscale.common.pods import is_head, is_terminating, is_worker, pod_group, pod_name
from rayscale.controller import redis_cleanup
from rayscale.controller.apply import PlanApplier
from rayscale.controller.plan import DeletePod, DeleteWhy, NodeKind, Step
from rayscale.controller.snapshot import ClusterSnapshot
from rayscale.kube import ops
from rayscale.kube.events import EventSink

log = logging.getLogger(__name__)
POLL = 2.0  # seconds between looks at the cleanup Job
HEAD_GONE_POLL = 10.0  # a head pod takes a while to terminate


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def add_finalizer(api: client.ApiClient, meta: ClusterMeta, finalizer: str) -> None:
    patch: list[dict[str, Any]]
    if meta.finalizers:
        patch = [{"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}]
    else:
        patch = [{"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}]
    await ops.json_patch_raycluster(api, meta.namespace, meta.name, patch)


async def remove_finalizer(api: client.ApiClient, meta: ClusterMeta, finalizer: str) -> None:
    index = meta.finalizers.index(finalizer)
    path = f"/metadata/finalizers/{index}"
    patch = [{"op": "test", "path": path, "value": finalizer}, {"op": "remove", "path": path}]
    await ops.json_patch_raycluster(api, meta.namespace, meta.name, patch)


async def redis_cleanup_step(
    api: client.ApiClient, applier: PlanApplier, events: EventSink, snapshot: ClusterSnapshot
) -> float | None:
    """One step of a deleted RayCluster's Redis cleanup; when to look again (None: done)."""
    meta = snapshot.meta
    # Ray's pods only: the cleanup Job's own pod carries the cluster's label too, and must run.
    live = [p for p in snapshot.pods if (is_head(p) or is_worker(p)) and not is_terminating(p)]
    if live:
        deletes = [DeletePod(pod_name(p), pod_group(p), NodeKind.of(p), DeleteWhy.SUSPEND) for p in live]
        await applier.run_steps(meta, [Step(group="*", deletes=deletes)])
    if any(is_head(p) for p in snapshot.pods):
        return HEAD_GONE_POLL  # the GCS must stop writing before Redis is cleaned
    deleted_at = _parse_time(meta.deletion_timestamp)
    name = redis_cleanup.job_name(meta.name)
    job = await ops.get_job(api, meta.namespace, name)
    timed_out = redis_cleanup.deletion_timed_out(meta, deleted_at, datetime.now(UTC))
    if job is not None or timed_out:
        finished = redis_cleanup.job_finished(job) if job is not None else None
        if finished is None and not timed_out:
            return POLL
        await remove_finalizer(api, meta, redis_cleanup.FINALIZER)
        if finished == "Complete":
            log.info("%s/%s: Redis storage namespace cleaned up", meta.namespace, meta.name)
        else:
            why = "failed" if finished == "Failed" else "did not finish in time"
            message = (
                f"The Redis cleanup Job {meta.namespace}/{name} {why}; delete the cluster's storage"
                " namespace in Redis yourself"
            )
            events.post(meta.subject(), "Warning", "RedisCleanupFailed", message)
        return None
    spec = snapshot.spec()
    if isinstance(spec, Invalid):  # nothing to build the Job from: let the cluster go
        await remove_finalizer(api, meta, redis_cleanup.FINALIZER)
        return None
    manifest = redis_cleanup.job_manifest(meta, spec)
    if await ops.create_job(api, meta.namespace, manifest):
        message = f"Created Redis cleanup Job {meta.namespace}/{name}"
        events.post(meta.subject(), "Normal", "CreatedRedisCleanupJob", message)
    return POLL
