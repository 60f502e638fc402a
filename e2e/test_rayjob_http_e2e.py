"""KubeRay's TestRayJobLightWeightMode (test/e2erayjob/rayjob_lightweight_test.go, HTTPMode: rayscale
submits and stops through the real dashboard, no submitter pod) and TestRayJobWithClusterSelector
(test/e2erayjob/rayjob_cluster_selector_test.go: RayJobs on a RayCluster the test made) with a
real Ray.

KubeRay test/subtest -> pytest id:

- TestRayJobLightWeightMode/Successful RayJob -> test_lightweight_successful_rayjob
- TestRayJobLightWeightMode/Failing RayJob without cluster shutdown after finished
  -> test_lightweight_failing_without_shutdown
- TestRayJobLightWeightMode/Should transition to 'Complete' if the Ray job has stopped.
  -> test_lightweight_complete_if_stopped
- TestRayJobLightWeightMode/Successful RayJob in HTTP mode with auth token
  -> test_lightweight_http_mode_with_auth_token
- TestRayJobWithClusterSelector/Successful RayJob -> test_cluster_selector_successful_rayjob
- TestRayJobWithClusterSelector/Failing RayJob -> test_cluster_selector_failing_rayjob
- TestRayJobWithClusterSelector/RayJob should be created but not to be updated when managed
  externally -> test_cluster_selector_managed_externally
- TestRayJobWithClusterSelector/RayJob should not be created due to managedBy invalid value
  -> test_cluster_selector_managed_by_invalid

KubeRay's cluster-selector subtests share one RayCluster; here each test that runs a job makes
its own (the managedBy ones need none: their RayJob never reaches a cluster).

Beyond KubeRay's checks, the auth-token test checks that the Ray the bridge runs really uses the
token (the dashboard refuses a call without it, `authchecks.refuses_without_token`); for that its
counter waits for a file the test writes once it has checked, so the cluster is still there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e.raybridge.authchecks import refuses_without_token, succeeded, token_cluster, token_rayjob
from e2e.raybridge.jobscenario import (
    COUNTER,
    COUNTER_ENV,
    FAIL,
    MEDIUM,
    Jobs,
    rayjob,
    rayjob_cluster_spec,
    stop_all_jobs,
)
from kubernetes_asyncio.client.exceptions import ApiException

from rayscale.api.names import RAYCLUSTER

TERMINAL_JOB = ("SUCCEEDED", "FAILED", "STOPPED")


def terminal(status: dict[str, object]) -> bool:
    return status.get("jobStatus") in TERMINAL_JOB


@pytest.mark.e2e_smoke
async def test_lightweight_successful_rayjob(jobs: Jobs) -> None:
    spec = {
        "rayVersion": "2.60.0",
        "headGroupSpec": {
            "rayStartParams": {
                "dashboard-host": "0.0.0.0",
                "num-gpus": "4",
                "num-cpus": "4",
                "resources": "'{\"R1\": 4}'",
            },
            "template": rayjob_cluster_spec()["headGroupSpec"]["template"],
        },
    }
    body = rayjob(
        "counter",
        submitter=False,
        submissionMode="HTTPMode",
        entrypoint=COUNTER,
        entrypointNumCpus=2,
        entrypointNumGpus=2,
        entrypointResources='{"R1": 2}',
        runtimeEnvYAML=COUNTER_ENV,
        shutdownAfterJobFinishes=True,
        rayClusterSpec=spec,
    )
    await jobs.create(body)
    status = await jobs.wait("counter", terminal, timeout=MEDIUM, what="terminal")
    assert status["jobStatus"] == "SUCCEEDED", status
    status = await jobs.deployment("counter", "Complete")
    await jobs.cluster_gone(status["rayClusterName"])
    assert jobs.bridge.runs() == []  # HTTPMode: no submitter ran


async def test_lightweight_failing_without_shutdown(jobs: Jobs) -> None:
    await jobs.create(rayjob("fail", submitter=False, submissionMode="HTTPMode", entrypoint=FAIL))
    status = await jobs.wait("fail", terminal, timeout=MEDIUM, what="terminal")
    assert status["jobStatus"] == "FAILED", status
    status = await jobs.deployment("fail", "Failed")
    assert status.get("reason") == "AppFailed", status
    assert await jobs.submitters() == []


async def test_lightweight_complete_if_stopped(jobs: Jobs, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    await jobs.create(
        rayjob("stop", submitter=False, submissionMode="HTTPMode", entrypoint=stop_all_jobs(flag))
    )
    await jobs.deployment("stop", "Running")
    await jobs.job_status("stop", "RUNNING")
    flag.touch()
    status = await jobs.deployment("stop", "Complete")
    assert status["jobStatus"] == "STOPPED", status
    await jobs.delete("stop")


async def test_lightweight_http_mode_with_auth_token(jobs: Jobs, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    await jobs.create(token_rayjob(flag, submitter=False, submissionMode="HTTPMode"))
    cluster, head = await token_cluster(jobs, "counter-auth")
    await refuses_without_token(jobs, cluster, head)
    flag.touch()
    await succeeded(jobs, "counter-auth")  # rayscale submitted over HTTP with the token
    assert jobs.bridge.runs() == []  # HTTPMode: no submitter ran


async def selected_cluster(jobs: Jobs) -> dict[str, str]:
    """KubeRay's shared RayCluster ``raycluster`` (NewRayClusterSpec), once Ready."""
    body = {**RAYCLUSTER.type_meta(), "metadata": {"name": "raycluster"}, "spec": rayjob_cluster_spec()}
    await jobs.objects.create_namespaced_custom_object(*RAYCLUSTER.at(jobs.ns), body)

    async def ready() -> bool:
        return bool(((await jobs.cluster("raycluster") or {}).get("status") or {}).get("state") == "ready")

    await jobs.eventually(ready, "RayCluster raycluster ready", timeout=MEDIUM)
    return {"ray.io/cluster": "raycluster"}


async def test_cluster_selector_successful_rayjob(jobs: Jobs) -> None:
    selector = await selected_cluster(jobs)
    await jobs.create(
        rayjob("counter", clusterSelector=selector, entrypoint=COUNTER, runtimeEnvYAML=COUNTER_ENV)
    )
    status = await jobs.wait("counter", terminal, timeout=MEDIUM, what="terminal")
    assert status["jobStatus"] == "SUCCEEDED", status
    assert status["rayClusterName"] == "raycluster"
    assert await jobs.clusters() == ["raycluster"]  # no cluster of its own


async def test_cluster_selector_failing_rayjob(jobs: Jobs) -> None:
    selector = await selected_cluster(jobs)
    await jobs.create(
        rayjob("fail", clusterSelector=selector, entrypoint=FAIL, shutdownAfterJobFinishes=False)
    )
    status = await jobs.wait("fail", terminal, timeout=MEDIUM, what="terminal")
    assert status["jobStatus"] == "FAILED", status
    assert await jobs.cluster("raycluster") is not None


async def test_cluster_selector_managed_externally(jobs: Jobs) -> None:
    body = rayjob(
        "managed-externally",
        clusterSelector={"ray.io/cluster": "raycluster"},
        entrypoint=COUNTER,
        runtimeEnvYAML=COUNTER_ENV,
        managedBy="kueue.x-k8s.io/multikueue",
    )
    await jobs.create(body)

    async def untouched() -> bool:
        return bool((await jobs.status("managed-externally")).get("jobDeploymentStatus", "") == "")

    await jobs.holds(untouched, 3, "a RayJob managed by another controller stays New")


async def test_cluster_selector_managed_by_invalid(jobs: Jobs) -> None:
    body = rayjob(
        "managed-externally-invalid",
        clusterSelector={"ray.io/cluster": "raycluster"},
        entrypoint=COUNTER,
        managedBy="invalid.com/controller",
    )
    with pytest.raises(ApiException) as refused:
        await jobs.create(body)
    assert refused.value.status == 422  # Invalid
