"""KubeRay's TestRayJobRetry (test/e2erayjob/rayjob_retry_test.go) with a real Ray: each retry of
a RayJob (``backoffLimit``) gets a new RayCluster (a new generated name), and the bridge gives
each one a real Ray head.

| KubeRay (TestRayJobRetry/...)                           | pytest                                    |
|---------------------------------------------------------|-------------------------------------------|
| Failing RayJob without cluster shutdown after finished  | test_retry_failing_rayjob_without_shutdown |
| Failing submitter K8s Job                               | test_retry_failing_submitter_k8s_job      |
| RayJob has passed ActiveDeadlineSeconds                 | test_retry_passed_active_deadline_seconds |
| Failing RayJob with HttpMode submission mode            | test_retry_failing_rayjob_http_mode       |
| Failing RayJob with SidecarMode submission mode         | test_retry_failing_rayjob_sidecar_mode    |
"""

from __future__ import annotations

from e2e.raybridge.jobscenario import (
    FAIL,
    LONG_RUNNING,
    MEDIUM,
    SHORT,
    Jobs,
    rayjob,
    sidecar_app_failed,
    submitter_template,
)

LONG = 3 * MEDIUM  # three clusters, one after another


def counts(status: dict[str, object]) -> tuple[object, object]:
    return status.get("failed", 0), status.get("succeeded", 0)


async def test_retry_failing_rayjob_without_shutdown(jobs: Jobs) -> None:
    body = rayjob(
        "fail",
        entrypoint=FAIL,
        backoffLimit=2,
        submitterConfig={"backoffLimit": 1},
        shutdownAfterJobFinishes=False,
    )
    await jobs.create(body)
    status = await jobs.deployment("fail", "Failed", timeout=LONG)
    assert status["jobStatus"] == "FAILED", status
    assert status.get("reason") == "AppFailed", status
    assert counts(status) == (3, 0), status
    job = await jobs.batch.read_namespaced_job("fail", jobs.ns)
    assert job.spec.backoff_limit == 1
    # a Ray job that fails is not a failed submitter: the submitter Job succeeded
    assert (job.status.failed or 0, job.status.succeeded) == (0, 1)
    assert len(jobs.bridge.bridges()) >= 1

    await jobs.delete("fail")
    await jobs.cluster_gone(status["rayClusterName"])
    await jobs.eventually(jobs.no_submitters, "the submitter Job cascade-deleted")


async def test_retry_failing_submitter_k8s_job(jobs: Jobs) -> None:
    command = ["ray", "job", "submit", "--address", "http://do-not-exist:8265", "--", "echo 123"]
    body = rayjob(
        "fail-submitter-k8s-job",
        entrypoint="The command will be overridden by the submitter Job",
        backoffLimit=2,
        submitterConfig={"backoffLimit": 0},
        shutdownAfterJobFinishes=True,
        submitterPodTemplate=submitter_template(command),
    )
    await jobs.create(body)
    status = await jobs.deployment("fail-submitter-k8s-job", "Failed", timeout=LONG)
    assert status.get("jobStatus", "") == "", status
    assert status.get("reason") == "SubmissionFailed", status
    assert counts(status) == (3, 0), status
    await jobs.cluster_gone(status["rayClusterName"], timeout=MEDIUM)
    assert await jobs.submitters() == ["fail-submitter-k8s-job"]
    await jobs.delete("fail-submitter-k8s-job")


async def test_retry_passed_active_deadline_seconds(jobs: Jobs) -> None:
    body = rayjob(
        "long-running",
        entrypoint=LONG_RUNNING,
        backoffLimit=2,
        submitterConfig={"backoffLimit": 0},
        shutdownAfterJobFinishes=True,
        ttlSecondsAfterFinished=600,
        activeDeadlineSeconds=5,
    )
    await jobs.create(body)
    status = await jobs.deployment("long-running", "Failed", timeout=SHORT)
    assert status.get("reason") == "DeadlineExceeded", status
    assert counts(status) == (1, 0), status  # a deadline is not retried


async def test_retry_failing_rayjob_http_mode(jobs: Jobs) -> None:
    body = rayjob(
        "failing-rayjob-in-httpmode",
        entrypoint=FAIL,
        submissionMode="HTTPMode",
        backoffLimit=2,
        shutdownAfterJobFinishes=False,
        submitter=False,
    )
    await jobs.create(body)
    status = await jobs.deployment("failing-rayjob-in-httpmode", "Failed", timeout=LONG)
    assert status["jobStatus"] == "FAILED", status
    assert status.get("reason") == "AppFailed", status
    assert counts(status) == (3, 0), status  # 2 retries + the first attempt
    await jobs.delete("failing-rayjob-in-httpmode")


async def test_retry_failing_rayjob_sidecar_mode(jobs: Jobs) -> None:
    body = rayjob(
        "failing-rayjob-in-sidecar-mode",
        entrypoint=FAIL,
        submissionMode="SidecarMode",
        backoffLimit=2,
        shutdownAfterJobFinishes=False,
        submitter=False,
    )
    await jobs.create(body)
    status = await jobs.deployment("failing-rayjob-in-sidecar-mode", "Failed", timeout=LONG)
    assert sidecar_app_failed(status), status  # AppFailed, or the race jobscenario.sidecar_app_failed says
    assert counts(status) == (3, 0), status
    await jobs.delete("failing-rayjob-in-sidecar-mode")
