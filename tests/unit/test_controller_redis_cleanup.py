"""The Redis cleanup finalizer and Job of fault-tolerant clusters (KubeRay's rules)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tests.support.builders import cluster, group, pod
from tests.support.fakes import EventLog, FakeKubeOps

from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.validation import parse_and_validate
from rayscale.controller import redis_cleanup
from rayscale.controller.apply import PlanApplier
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.finalize import HEAD_GONE_POLL, redis_cleanup_step
from rayscale.controller.reconcile import plan_cluster
from rayscale.controller.snapshot import ClusterSnapshot

OPTIONS = {"redisAddress": "redis:6379", "redisUsername": {"value": "ray"}}


def _ft(**metadata: Any) -> dict[str, Any]:
    body = cluster(group(replicas=1), gcsFaultToleranceOptions=OPTIONS)
    body["metadata"].update(metadata)
    return body


def test_the_finalizer_comes_before_anything_is_created() -> None:
    plan, _ = plan_cluster(ClusterSnapshot(_ft(), [], []), ScaleExpectations())
    assert plan.add_finalizer == "ray.io/gcs-ft-redis-cleanup-finalizer"
    assert (plan.steps, plan.services) == ([], [])
    plan, _ = plan_cluster(
        ClusterSnapshot(_ft(finalizers=[redis_cleanup.FINALIZER]), [], []), ScaleExpectations()
    )
    assert plan.add_finalizer is None
    assert plan.steps


def test_no_finalizer_without_fault_tolerance_or_when_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    plan, _ = plan_cluster(ClusterSnapshot(cluster(group()), [], []), ScaleExpectations())
    assert plan.add_finalizer is None
    monkeypatch.setenv("ENABLE_GCS_FT_REDIS_CLEANUP", "false")
    plan, _ = plan_cluster(ClusterSnapshot(_ft(), [], []), ScaleExpectations())
    assert plan.add_finalizer is None


def test_the_cleanup_job_runs_the_heads_ray_container_once() -> None:
    body = _ft()
    meta = ClusterMeta.from_body(body)
    spec = parse_and_validate(meta, body["spec"])
    job = redis_cleanup.job_manifest(meta, spec)  # type: ignore[arg-type]
    assert job["metadata"]["name"] == "rc-redis-cleanup"
    assert job["metadata"]["labels"]["ray.io/node-type"] == "redis-cleanup"
    assert (job["spec"]["backoffLimit"], job["spec"]["activeDeadlineSeconds"]) == (0, 300)
    pod = job["spec"]["template"]["spec"]
    (ray,) = pod["containers"]
    assert pod["restartPolicy"] == "Never"
    assert "livenessProbe" not in ray
    assert "readinessProbe" not in ray
    assert "username=os.getenv('REDIS_USERNAME', parsed.username)" in ray["args"][0]
    env = {e["name"]: e.get("value") for e in ray["env"]}
    assert env["RAY_REDIS_ADDRESS"] == "redis:6379"
    assert env["RAY_external_storage_namespace"] == "uid-1"
    assert env["RAY_redis_db_connect_retries"] == "120"
    assert ray["resources"]["limits"] == {"cpu": "200m", "memory": "256Mi"}


def test_job_finished_and_deletion_timeout() -> None:
    assert redis_cleanup.job_finished({"status": {}}) is None
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert redis_cleanup.job_finished(done) == "Complete"
    target = {"status": {"conditions": [{"type": "FailureTarget", "status": "True"}]}}
    assert redis_cleanup.job_finished(target) == "Failed"
    now = datetime(2026, 1, 1, tzinfo=UTC)
    meta = ClusterMeta.from_body(_ft())
    assert not redis_cleanup.deletion_timed_out(meta, now - timedelta(seconds=299), now)
    assert redis_cleanup.deletion_timed_out(meta, now - timedelta(seconds=300), now)
    short = ClusterMeta.from_body(_ft(annotations={"ray.io/gcs-ft-deletion-timeout": "10"}))
    assert redis_cleanup.deletion_timed_out(short, now - timedelta(seconds=10), now)


async def test_a_deleted_cluster_loses_its_ray_pods_but_not_the_cleanup_jobs_pod(
    kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    """The Job's pod carries the cluster's label too: deleting it with the Ray pods would kill the
    very cleanup the finalizer waits for."""
    body = _ft(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[redis_cleanup.FINALIZER])
    job_pod = pod("rc-redis-cleanup-x7k2p", "redis-cleanup")
    job_pod["metadata"]["labels"]["ray.io/node-type"] = "redis-cleanup"
    pods = [pod("rc-head-abcde", "headgroup"), pod("rc-small-worker-fghij"), job_pod]
    applier = PlanApplier(None, ScaleExpectations(), event_log)  # type: ignore[arg-type]  # ops faked
    wait = await redis_cleanup_step(None, applier, event_log, ClusterSnapshot(body, pods, []))  # type: ignore[arg-type]
    assert wait == HEAD_GONE_POLL  # the head is on its way out: no Job yet
    assert sorted(kube_ops.names("delete_pod")) == ["rc-head-abcde", "rc-small-worker-fghij"]
