"""KubeRay's TestDeletionStrategy (test/e2erayjob/rayjob_deletion_strategy_test.go) with a real
Ray: deletion rules (DeleteWorkers, DeleteCluster, DeleteSelf, DeleteNone) on a job that succeeded
or a deployment that failed (activeDeadlineSeconds), the multi-stage order, and the legacy
onSuccess/onFailure policies. The pytest ids are KubeRay's subtest names.

Where KubeRay checks "Consistently" for most of a TTL that nothing is deleted yet, these tests check
the same thing without a clock race: whatever a rule deletes is seen gone no earlier than the
RayJob's ``status.endTime`` + its TTL (1 s for the timestamps' resolution).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import pytest
from e2e.raybridge.jobscenario import COUNTER, COUNTER_ENV, LONG_RUNNING, MEDIUM, Jobs, rayjob


def rule(policy: str, ttl: int, *, failed: bool = False) -> dict[str, Any]:
    condition: dict[str, Any] = {"ttlSeconds": ttl}
    condition["jobDeploymentStatus" if failed else "jobStatus"] = "Failed" if failed else "SUCCEEDED"
    return {"policy": policy, "condition": condition}


def deletion_job(name: str, rules: list[dict[str, Any]], *, failed: bool) -> dict[str, Any]:
    if failed:  # the deployment fails on its deadline while the cluster runs
        return rayjob(
            name,
            entrypoint=LONG_RUNNING,
            activeDeadlineSeconds=45,
            shutdownAfterJobFinishes=False,
            deletionStrategy={"deletionRules": rules},
        )
    return rayjob(
        name,
        entrypoint=COUNTER,
        runtimeEnvYAML=COUNTER_ENV,
        shutdownAfterJobFinishes=False,
        deletionStrategy={"deletionRules": rules},
    )


async def finished(jobs: Jobs, name: str, *, failed: bool) -> tuple[str, float]:
    """Wait for the RayJob to end as the case wants it: (its cluster, its endTime as a timestamp)."""
    if failed:
        status = await jobs.deployment(name, "Failed", timeout=MEDIUM + 45)
        assert status.get("reason") == "DeadlineExceeded", status
    else:
        status = await jobs.deployment(name, "Complete")
        assert status["jobStatus"] == "SUCCEEDED", status
    end = datetime.fromisoformat(str(status["endTime"]).replace("Z", "+00:00")).timestamp()
    return str(status["rayClusterName"]), end


async def workers(jobs: Jobs, cluster: str) -> list[str]:
    pods = await jobs.core.list_namespaced_pod(
        jobs.ns, label_selector=f"ray.io/cluster={cluster},ray.io/node-type=worker"
    )
    return [p.metadata.name for p in pods.items if p.metadata.deletion_timestamp is None]


async def heads(jobs: Jobs, cluster: str) -> list[str]:
    pods = await jobs.core.list_namespaced_pod(
        jobs.ns, label_selector=f"ray.io/cluster={cluster},ray.io/node-type=head"
    )
    return [p.metadata.name for p in pods.items if p.metadata.deletion_timestamp is None]


async def gone_after(jobs: Jobs, what: str, check: Any, not_before: float) -> None:
    """`check` becomes true, and not before `not_before` (wall clock, 1 s slack)."""
    await jobs.eventually(check, what, timeout=MEDIUM)
    seen = time.time()
    assert seen >= not_before - 1, f"{what} {not_before - seen:.1f}s before its TTL"


SINGLE = [
    ("DeletionRules with DeleteWorkers policy should delete only worker pods", "DeleteWorkers", False),
    ("DeletionRules with DeleteCluster policy should delete entire cluster", "DeleteCluster", False),
    ("DeletionRules with DeleteSelf policy should delete RayJob and cluster", "DeleteSelf", False),
    ("DeletionRules with DeleteNone policy should preserve all resources", "DeleteNone", False),
    ("DeletionRules with JobDeploymentStatus Failed and DeleteWorkers policy should delete only worker pods",
     "DeleteWorkers", True),
    ("DeletionRules with JobDeploymentStatus Failed and DeleteCluster policy should delete entire cluster",
     "DeleteCluster", True),
    ("DeletionRules with JobDeploymentStatus Failed and DeleteSelf policy should delete RayJob and cluster",
     "DeleteSelf", True),
    ("DeletionRules with JobDeploymentStatus Failed and DeleteNone policy should preserve all resources",
     "DeleteNone", True),
]  # fmt: skip


SMOKE = {"DeletionRules with DeleteCluster policy should delete entire cluster"}  # also in `make test`


@pytest.mark.parametrize(
    ("policy", "failed"),
    [pytest.param(*c[1:], id=c[0], marks=[pytest.mark.e2e_smoke] if c[0] in SMOKE else []) for c in SINGLE],
)
async def test_deletion_strategy(jobs: Jobs, policy: str, failed: bool) -> None:
    name = f"{policy.lower().replace('delete', 'delete-')}{'-failed' if failed else ''}-test"
    ttl = 5 if policy == "DeleteNone" else 10
    await jobs.create(deletion_job(name, [rule(policy, ttl, failed=failed)], failed=failed))
    cluster, end = await finished(jobs, name, failed=failed)
    assert await workers(jobs, cluster), "the cluster's workers run when the RayJob ends"

    async def no_workers() -> bool:
        return not await workers(jobs, cluster)

    async def no_cluster() -> bool:
        return await jobs.cluster(cluster) is None

    async def no_rayjob() -> bool:
        return await jobs.get(name) is None

    if policy == "DeleteWorkers":
        await gone_after(jobs, "the worker pods deleted", no_workers, end + ttl)

        async def cluster_kept() -> bool:
            found = await jobs.cluster(cluster)
            ready = ((found or {}).get("status") or {}).get("state") == "ready"
            return ready and bool(await heads(jobs, cluster)) and await jobs.get(name) is not None

        await jobs.holds(cluster_kept, 5, "the cluster (Ready, its head) and the RayJob kept")
    elif policy == "DeleteCluster":
        await gone_after(jobs, "the RayCluster deleted", no_cluster, end + ttl)
        assert await jobs.get(name) is not None
    elif policy == "DeleteSelf":
        await gone_after(jobs, "the RayJob deleted", no_rayjob, end + ttl)
        await jobs.cluster_gone(cluster, timeout=MEDIUM)
    else:

        async def all_kept() -> bool:
            return (
                await jobs.get(name) is not None
                and await jobs.cluster(cluster) is not None
                and bool(await workers(jobs, cluster))
            )

        await jobs.holds(all_kept, ttl + 5, "the RayJob, its cluster and workers kept past the TTL")


@pytest.mark.parametrize("case", ["Multi-stage deletion should execute in TTL order: Workers->Cluster->Self"])
async def test_multi_stage_deletion(jobs: Jobs, case: str) -> None:
    rules = [rule("DeleteWorkers", 15), rule("DeleteCluster", 35), rule("DeleteSelf", 55)]
    await jobs.create(deletion_job("multi-stage-test", rules, failed=False))
    cluster, end = await finished(jobs, "multi-stage-test", failed=False)
    assert await workers(jobs, cluster)

    async def no_workers() -> bool:
        return not await workers(jobs, cluster)

    async def no_cluster() -> bool:
        return await jobs.cluster(cluster) is None

    async def no_rayjob() -> bool:
        return await jobs.get("multi-stage-test") is None

    await gone_after(jobs, "the worker pods deleted", no_workers, end + 15)
    assert await heads(jobs, cluster), "the head outlives the workers"
    assert await jobs.get("multi-stage-test") is not None
    await gone_after(jobs, "the RayCluster deleted", no_cluster, end + 35)
    assert await jobs.get("multi-stage-test") is not None
    await gone_after(jobs, "the RayJob deleted", no_rayjob, end + 55)


@pytest.mark.parametrize("case", ["Legacy OnSuccess DeleteCluster should still work"])
async def test_legacy_on_success_delete_cluster(jobs: Jobs, case: str) -> None:
    body = rayjob(
        "legacy-success-test",
        entrypoint=COUNTER,
        runtimeEnvYAML=COUNTER_ENV,
        shutdownAfterJobFinishes=True,
        ttlSecondsAfterFinished=10,
        deletionStrategy={"onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteCluster"}},
    )
    await jobs.create(body)
    cluster, end = await finished(jobs, "legacy-success-test", failed=False)

    async def no_cluster() -> bool:
        return await jobs.cluster(cluster) is None

    await gone_after(jobs, "the RayCluster deleted", no_cluster, end + 10)
    assert await jobs.get("legacy-success-test") is not None
