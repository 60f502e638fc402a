"""KubeRay's TestRayJobSidecarMode (test/e2erayjob/rayjob_sidecar_mode_test.go) with a real Ray:
the submitter is a container of the head pod, which the bridge runs beside the Ray head (its
``ray job submit`` on the real dashboard), and reports in the head pod's container statuses.

KubeRay subtest (TestRayJobSidecarMode/...) -> pytest id:

- Successful RayJob -> test_sidecar_successful_rayjob
- Failing RayJob without cluster shutdown after finished -> test_sidecar_failing_without_shutdown
- Should transition to 'Complete' if the Ray job has stopped. -> test_sidecar_complete_if_stopped
- RayJob fails when head Pod is deleted when job is running -> test_sidecar_head_pod_deleted
- Successful RayJob in Sidecar mode with auth token -> test_sidecar_mode_with_auth_token

Difference: where KubeRay expects reason AppFailed for a failing job, SubmissionFailed with the
submitter's exit code 1 is accepted too (`jobscenario.sidecar_app_failed` says why: a race in
KubeRay's order of checks, which rayscale keeps).

Beyond KubeRay's checks, the auth-token test checks that the Ray the bridge runs really uses the
token (the dashboard refuses a call without it, `authchecks.refuses_without_token`); for that its
counter waits for a file the test writes once it has checked, so the cluster is still there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e.raybridge.authchecks import (
    refuses_without_token,
    succeeded,
    token_cluster,
    token_env_problems,
    token_rayjob,
)
from e2e.raybridge.jobscenario import (
    COUNTER,
    COUNTER_ENV,
    FAIL,
    MEDIUM,
    SHORT,
    Jobs,
    held_until,
    rayjob,
    rayjob_cluster_spec,
    sidecar_app_failed,
    stop_all_jobs,
)

TERMINAL_JOB = ("SUCCEEDED", "FAILED", "STOPPED")


def terminal(status: dict[str, object]) -> bool:
    return status.get("jobStatus") in TERMINAL_JOB


def sidecar(name: str, entrypoint: str, **spec: Any) -> dict[str, Any]:
    return rayjob(name, submitter=False, submissionMode="SidecarMode", entrypoint=entrypoint, **spec)


async def head_pod(jobs: Jobs, cluster: str) -> list[object]:
    pods = await jobs.core.list_namespaced_pod(
        jobs.ns, label_selector=f"ray.io/cluster={cluster},ray.io/node-type=head"
    )
    return [p for p in pods.items if p.metadata.deletion_timestamp is None]


async def test_sidecar_successful_rayjob(jobs: Jobs) -> None:
    params = {"dashboard-host": "0.0.0.0", "num-gpus": "4", "num-cpus": "4", "resources": "'{\"R1\": 4}'"}
    spec = {
        "rayVersion": "2.60.0",
        "headGroupSpec": {
            "rayStartParams": params,
            "template": rayjob_cluster_spec()["headGroupSpec"]["template"],
        },
    }
    body = sidecar(
        "counter",
        COUNTER,
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
    runs = jobs.bridge.runs()
    assert [(r.container, r.sidecar, r.code) for r in runs] == [("ray-job-submitter", True, 0)], runs


async def test_sidecar_failing_without_shutdown(jobs: Jobs) -> None:
    await jobs.create(sidecar("fail", FAIL, shutdownAfterJobFinishes=False))
    status = await jobs.deployment("fail", "Failed", timeout=MEDIUM)
    assert sidecar_app_failed(status), status  # AppFailed, or the race jobscenario.sidecar_app_failed says
    assert await jobs.submitters() == []
    heads = await head_pod(jobs, status["rayClusterName"])
    assert len(heads) == 1
    assert "ray-job-submitter" in {c.name for c in heads[0].spec.containers}  # type: ignore[attr-defined]


async def test_sidecar_complete_if_stopped(jobs: Jobs, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    await jobs.create(sidecar("stop", stop_all_jobs(flag)))
    await jobs.deployment("stop", "Running")
    await jobs.job_status("stop", "RUNNING")
    flag.touch()
    status = await jobs.deployment("stop", "Complete")
    assert status["jobStatus"] == "STOPPED", status
    await jobs.delete("stop")


async def test_sidecar_head_pod_deleted(jobs: Jobs, tmp_path: Path) -> None:
    name = "delete-head-after-submit-sidecar-mode"
    await jobs.create(sidecar(name, held_until(tmp_path / "never"), shutdownAfterJobFinishes=True))
    status = await jobs.job_status(name, "RUNNING")
    cluster = await jobs.cluster(status["rayClusterName"])
    assert cluster is not None
    assert cluster["metadata"]["labels"]["ray.io/job-submission-mode"] == "SidecarMode"
    assert cluster["metadata"]["annotations"]["ray.io/disable-provisioned-head-restart"] == "true"
    heads = await head_pod(jobs, status["rayClusterName"])
    await jobs.core.delete_namespaced_pod(heads[0].metadata.name, jobs.ns)  # type: ignore[attr-defined]

    async def no_head() -> bool:
        return not await head_pod(jobs, status["rayClusterName"])

    await jobs.eventually(no_head, "the head pod gone", timeout=MEDIUM)
    await jobs.holds(no_head, 10, "the head pod is not recreated (SidecarMode)")
    status = await jobs.deployment(name, "Failed", timeout=MEDIUM)
    assert status.get("reason") in ("AppFailed", "SubmissionFailed"), status
    await jobs.delete(name)
    await jobs.cluster_gone(status["rayClusterName"], timeout=SHORT)


async def test_sidecar_mode_with_auth_token(jobs: Jobs, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    await jobs.create(token_rayjob(flag, submitter=False, submissionMode="SidecarMode"))
    cluster, head = await token_cluster(jobs, "counter-auth")
    (submitter,) = [c for c in head["spec"]["containers"] if c["name"] == "ray-job-submitter"]
    assert token_env_problems(submitter, cluster) == []
    await refuses_without_token(jobs, cluster, head)
    flag.touch()
    await succeeded(jobs, "counter-auth")
    runs = jobs.bridge.runs()  # a real `ray job submit` beside the head, with the token
    assert [(r.container, r.sidecar, r.code) for r in runs] == [("ray-job-submitter", True, 0)], runs
