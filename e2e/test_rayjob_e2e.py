"""KubeRay's RayJob e2e suite (test/e2erayjob/rayjob_test.go, TestRayJob) against rayscale with a
real Ray: each RayJob's RayCluster gets a real Ray head with its dashboard and real workers (the
`job_bridge`), the submitter Job's pod runs a real ``ray job submit`` on this machine, and the job
status is the real Ray head's.

KubeRay subtest (TestRayJob/...) -> pytest id:

| KubeRay                                                     | pytest                                  |
|-------------------------------------------------------------|-----------------------------------------|
| Successful RayJob                                           | test_successful_rayjob (e2e_smoke)      |
| Failing RayJob without cluster shutdown after finished      | test_failing_rayjob_without_shutdown    |
| Failing submitter K8s Job                                   | test_failing_submitter_k8s_job          |
| Should transition to 'Complete' if the Ray job has stopped. | test_complete_if_the_ray_job_stopped    |
| RuntimeEnvYAML is not a valid YAML string                   | test_runtime_env_yaml_not_valid         |
| RayJob name too long with 48 characters                     | test_name_too_long_48_characters        |
| RayJob has passed ActiveDeadlineSeconds                     | test_passed_active_deadline_seconds     |

The rest of TestRayJob is in test_rayjob_more_e2e.py. Differences from KubeRay's test: the job
scripts are ``python -c`` entrypoints (no ConfigMap mount: kwok runs no containers), and KubeRay's
``stop.py`` waits for a file the test writes once the RayJob is Running instead of sleeping 20 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e.raybridge.jobscenario import (
    COUNTER,
    COUNTER_ENV,
    FAIL,
    LONG_RUNNING,
    MEDIUM,
    SHORT,
    Jobs,
    rayjob,
    stop_all_jobs,
    submitter_template,
)

TERMINAL_JOB = ("SUCCEEDED", "FAILED", "STOPPED")


@pytest.mark.e2e_smoke
async def test_successful_rayjob(jobs: Jobs) -> None:
    body = rayjob("counter", entrypoint=COUNTER, runtimeEnvYAML=COUNTER_ENV, shutdownAfterJobFinishes=True)
    await jobs.create(body)

    async def head_service() -> bool:
        services = await jobs.core.list_namespaced_service(jobs.ns)
        return "counter-head-svc" in {s.metadata.name for s in services.items}

    await jobs.eventually(head_service, "the RayJob's head Service counter-head-svc")
    status = await jobs.wait(
        "counter", lambda s: s.get("jobStatus") in TERMINAL_JOB, timeout=MEDIUM, what="terminal"
    )
    assert status["jobStatus"] == "SUCCEEDED", status
    status = await jobs.deployment("counter", "Complete", timeout=SHORT)
    assert status.get("startTime"), status
    assert status.get("endTime"), status
    await jobs.cluster_gone(status["rayClusterName"])
    assert await jobs.submitters() == ["counter"]  # the submitter Job is kept
    runs = jobs.bridge.runs("counter-")
    assert [r.code for r in runs] == [0], runs

    # suspend on a finished RayJob changes nothing
    await jobs.patch("counter", {"suspend": True})
    await jobs.holds(
        lambda: jobs.deployment_is("counter", "Complete"),
        5,
        "a Complete RayJob stays Complete when suspended",
    )
    await jobs.delete("counter")


async def test_failing_rayjob_without_shutdown(jobs: Jobs) -> None:
    await jobs.create(rayjob("fail", entrypoint=FAIL, shutdownAfterJobFinishes=False))
    status = await jobs.wait(
        "fail", lambda s: s.get("jobStatus") in TERMINAL_JOB, timeout=MEDIUM, what="terminal"
    )
    assert status["jobStatus"] == "FAILED", status
    status = await jobs.deployment("fail", "Failed", timeout=SHORT)
    assert status.get("reason") == "AppFailed", status
    cluster = status["rayClusterName"]
    assert await jobs.cluster(cluster) is not None  # shutdownAfterJobFinishes is false: kept
    assert await jobs.submitters() == ["fail"]

    await jobs.delete("fail")  # the RayCluster and the submitter Job go with it (owner references)
    await jobs.cluster_gone(cluster)
    await jobs.eventually(lambda: jobs.no_submitters(), "the submitter Job cascade-deleted")


async def test_failing_submitter_k8s_job(jobs: Jobs) -> None:
    # the submitter cannot reach a Ray cluster: its Job fails after its backoff limit
    command = ["ray", "job", "submit", "--address", "http://do-not-exist:8265", "--", "echo 123"]
    body = rayjob(
        "fail-k8s-job",
        entrypoint="The command will be overridden by the submitter Job",
        shutdownAfterJobFinishes=True,
        submitterPodTemplate=submitter_template(command),
    )
    await jobs.create(body)
    status = await jobs.deployment("fail-k8s-job", "Failed", timeout=MEDIUM + SHORT)
    assert status.get("jobStatus", "") == "", status  # JobStatusNew
    assert status.get("reason") == "SubmissionFailed", status
    await jobs.cluster_gone(status["rayClusterName"])
    assert await jobs.submitters() == ["fail-k8s-job"]
    runs = jobs.bridge.runs("fail-k8s-job-")
    assert len(runs) == 3, runs  # backoffLimit 2: 3 pods
    assert all(r.code not in (0, None) for r in runs), runs
    await jobs.delete("fail-k8s-job")


async def test_complete_if_the_ray_job_stopped(jobs: Jobs, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    await jobs.create(rayjob("stop", entrypoint=stop_all_jobs(flag)))
    await jobs.deployment("stop", "Running")
    await jobs.job_status("stop", "RUNNING")
    flag.touch()
    status = await jobs.deployment("stop", "Complete")
    assert status["jobStatus"] == "STOPPED", status
    await jobs.delete("stop")


async def test_runtime_env_yaml_not_valid(jobs: Jobs) -> None:
    await jobs.create(rayjob("invalid-yamlstr", entrypoint=COUNTER, runtimeEnvYAML="invalid_yaml_string"))
    await jobs.deployment("invalid-yamlstr", "ValidationFailed", timeout=SHORT)


async def test_name_too_long_48_characters(jobs: Jobs) -> None:
    await jobs.create(rayjob("a" * 48, entrypoint=COUNTER))
    await jobs.deployment("a" * 48, "ValidationFailed", timeout=SHORT)


async def test_passed_active_deadline_seconds(jobs: Jobs) -> None:
    body = rayjob(
        "long-running",
        entrypoint=LONG_RUNNING,
        shutdownAfterJobFinishes=True,
        ttlSecondsAfterFinished=600,
        activeDeadlineSeconds=5,
    )
    await jobs.create(body)
    status = await jobs.deployment("long-running", "Failed", timeout=SHORT)
    assert status.get("reason") == "DeadlineExceeded", status
