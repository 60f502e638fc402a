"""KubeRay's TestRayJobSuspend (test/e2erayjob/rayjob_suspend_test.go) with a real Ray.

| KubeRay (TestRayJobSuspend/...)                                      | pytest                            |
|----------------------------------------------------------------------|-----------------------------------|
| Suspend the RayJob when its status is 'Running', and then resume it. | test_suspend_running_then_resume  |
| Create a suspended RayJob, and then resume it.                       | test_create_suspended_then_resume |
"""

from __future__ import annotations

import pytest
from e2e.raybridge.jobscenario import COUNTER, COUNTER_ENV, LONG_RUNNING, Jobs, rayjob


async def test_suspend_running_then_resume(jobs: Jobs) -> None:
    body = rayjob(
        "long-running", entrypoint=LONG_RUNNING, shutdownAfterJobFinishes=True, ttlSecondsAfterFinished=600
    )
    await jobs.create(body)
    status = await jobs.deployment("long-running", "Running")
    first = status["rayClusterName"]

    await jobs.patch("long-running", {"suspend": True})
    await jobs.deployment("long-running", "Suspended")
    assert await jobs.cluster(first) is None  # deleted before Suspended is written
    await jobs.eventually(jobs.no_submitters, "the submitter Job deleted")

    await jobs.patch("long-running", {"suspend": False})
    status = await jobs.deployment("long-running", "Running")
    assert status["rayClusterName"] != first, status  # a new cluster
    await jobs.delete("long-running")


@pytest.mark.e2e_smoke
async def test_create_suspended_then_resume(jobs: Jobs) -> None:
    body = rayjob(
        "counter", entrypoint=COUNTER, runtimeEnvYAML=COUNTER_ENV, shutdownAfterJobFinishes=True, suspend=True
    )
    await jobs.create(body)
    await jobs.deployment("counter", "Suspended")
    assert await jobs.clusters() == []

    await jobs.patch("counter", {"suspend": False})
    status = await jobs.deployment("counter", "Complete")
    assert status["jobStatus"] == "SUCCEEDED", status

    await jobs.delete("counter")
    await jobs.cluster_gone(status["rayClusterName"])
    cluster = status["rayClusterName"]

    async def no_pods() -> bool:
        pods = await jobs.core.list_namespaced_pod(jobs.ns, label_selector=f"ray.io/cluster={cluster}")
        return not pods.items

    await jobs.eventually(no_pods, f"the pods of {cluster} gone")
