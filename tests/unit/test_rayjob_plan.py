"""The RayJob state machine (rayscale.rayjob.plan) on scripted worlds (tests.support.rayjob_sim)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests.support.rayjob_sim import run_case

from rayscale.rayjob import consts as C
from rayscale.rayjob.build import submit_command

CLUSTER_SPEC: dict[str, Any] = {
    "rayVersion": "2.60.0",
    "headGroupSpec": {
        "rayStartParams": {},
        "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0"}]}},
    },
    "workerGroupSpecs": [
        {
            "groupName": "small",
            "replicas": 1,
            "minReplicas": 1,
            "maxReplicas": 5,
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]}},
        }
    ],
}


def rayjob(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "entrypoint": "python -c 'print(1)'",
        "rayClusterSpec": copy.deepcopy(CLUSTER_SPEC),
        "shutdownAfterJobFinishes": True,
    }
    body.update(spec)
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "job"}, "spec": body}


def states(result: dict[str, Any]) -> list[str]:
    return [
        "deleted" if s["status"] == "deleted" else s["status"].get("jobDeploymentStatus", "")
        for s in result["steps"]
    ]


def kinds(step: dict[str, Any]) -> list[str]:
    return sorted(o["kind"] for o in step["objects"])


SUCCEEDED = {"jobStatus": "SUCCEEDED", "startTime": 1_767_225_600_000, "endTime": 1_767_225_660_000}


def test_k8s_job_mode_happy_path_then_cluster_deleted() -> None:
    done = {"conditions": [{"type": "Complete", "status": "True"}]}
    result = run_case(
        {
            "rayjob": rayjob(ttlSecondsAfterFinished=10),
            "steps": [
                {},
                {},
                {"cluster_status": {"state": "ready"}},
                {"job_info": {"jobStatus": "RUNNING"}},
                {"submitter": done, "job_info": SUCCEEDED},
                {},
                {"age": 11},
            ],
        }
    )
    assert states(result) == [
        C.INITIALIZING,
        C.INITIALIZING,
        C.RUNNING,
        C.RUNNING,
        C.COMPLETE,
        C.COMPLETE,
        C.COMPLETE,
    ]
    first, created, ready = result["steps"][:3]
    assert first["finalizers"] == [C.FINALIZER]
    assert first["status"]["jobId"] == "job-00001"
    assert first["status"]["rayClusterName"] == "job-00002"
    assert kinds(created) == ["RayCluster"]
    assert kinds(ready) == ["Job", "RayCluster"]
    submitter = next(o for o in ready["objects"] if o["kind"] == "Job")
    args = submitter["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert args.startswith(
        "if ! ray job status --address http://job-00002-head-svc.default.svc.cluster.local:8265"
    )
    assert "--submission-id job-00001" in args
    assert kinds(result["steps"][3]) == ["Job", "RayCluster", "Service"]
    complete = result["steps"][4]["status"]
    assert complete["jobStatus"] == "SUCCEEDED"
    assert complete["succeeded"] == 1
    assert complete["failed"] == 0
    assert "RayCluster" in kinds(result["steps"][5])  # the TTL has not passed
    assert result["steps"][5]["result"]["requeueAfter"] == pytest.approx(12)
    assert "RayCluster" not in kinds(result["steps"][6])


def test_http_mode_submits_when_ray_has_no_such_job() -> None:
    result = run_case(
        {
            "rayjob": rayjob(submissionMode=C.HTTP_MODE),
            "steps": [
                {},
                {},
                {"cluster_status": {"state": "ready"}},
                {},
                {"job_info": {"jobStatus": "PENDING"}},
            ],
        }
    )
    assert states(result) == [C.INITIALIZING, C.INITIALIZING, C.RUNNING, C.RUNNING, C.RUNNING]
    assert result["steps"][3]["dashboard_calls"] == [{"op": "SubmitJob", "jobId": "job-00001"}]
    assert result["steps"][4]["status"]["jobStatus"] == "PENDING"
    assert "Job" not in kinds(result["steps"][2])


def test_interactive_mode_waits_for_the_job_id() -> None:
    result = run_case(
        {
            "rayjob": rayjob(submissionMode=C.INTERACTIVE_MODE),
            "steps": [{}, {}, {"cluster_status": {"state": "ready"}}, {}, {"spec": {"jobId": "mine"}}],
        }
    )
    assert states(result) == [C.INITIALIZING, C.INITIALIZING, C.WAITING, C.WAITING, C.RUNNING]
    assert "jobId" not in result["steps"][0]["status"]
    assert result["steps"][4]["status"]["jobId"] == "mine"


def test_sidecar_mode_puts_the_submitter_in_the_head_pod() -> None:
    result = run_case({"rayjob": rayjob(submissionMode=C.SIDECAR_MODE), "steps": [{}, {}]})
    cluster = result["steps"][1]["objects"][0]
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    assert [c["name"] for c in head["containers"]] == ["ray-head", C.SUBMITTER_CONTAINER]
    assert head["restartPolicy"] == "Never"
    assert cluster["metadata"]["annotations"][C.DISABLE_HEAD_RESTART_ANNOTATION] == "true"
    assert head["containers"][1]["args"][0].startswith("until python -c")


def test_suspend_while_running_releases_everything_then_resumes() -> None:
    result = run_case(
        {
            "rayjob": rayjob(),
            "steps": [
                {},
                {},
                {"cluster_status": {"state": "ready"}},
                {"spec": {"suspend": True}},
                {},
                {},
                {"spec": {"suspend": False}},
                {},
            ],
        }
    )
    assert states(result) == [
        C.INITIALIZING,
        C.INITIALIZING,
        C.RUNNING,
        C.SUSPENDING,
        C.SUSPENDING,  # the cluster and the submitter deleted
        C.SUSPENDED,
        C.NEW,
        C.INITIALIZING,
    ]
    assert kinds(result["steps"][4]) == []
    assert "rayClusterName" not in result["steps"][5]["status"]
    assert result["steps"][7]["status"]["rayClusterName"] != result["steps"][2]["status"]["rayClusterName"]


def test_backoff_limit_retries_with_a_new_cluster() -> None:
    failed = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}
    result = run_case(
        {
            "rayjob": rayjob(backoffLimit=1),
            "steps": [{}, {}, {"cluster_status": {"state": "ready"}}, {"submitter": failed}, {}, {}],
        }
    )
    assert states(result) == [C.INITIALIZING, C.INITIALIZING, C.RUNNING, C.RETRYING, C.RETRYING, C.NEW]
    retrying = result["steps"][3]["status"]
    assert retrying["failed"] == 1
    assert retrying["reason"] == C.SUBMISSION_FAILED


def test_active_deadline_fails_without_retry() -> None:
    result = run_case({"rayjob": rayjob(activeDeadlineSeconds=5, backoffLimit=2), "steps": [{}, {"age": 6}]})
    assert states(result) == [C.INITIALIZING, C.FAILED]
    assert result["steps"][1]["status"]["reason"] == C.DEADLINE_EXCEEDED


def test_deletion_rules_run_most_destructive_first_one_per_reconcile() -> None:
    rules = [
        {"policy": C.DELETE_WORKERS, "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}},
        {"policy": C.DELETE_CLUSTER, "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 10}},
        {"policy": C.DELETE_SELF, "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 20}},
    ]
    done = {"conditions": [{"type": "Complete", "status": "True"}]}
    result = run_case(
        {
            "rayjob": rayjob(shutdownAfterJobFinishes=False, deletionStrategy={"deletionRules": rules}),
            "steps": [
                {},
                {},
                {"cluster_status": {"state": "ready"}},
                {"submitter": done, "job_info": SUCCEEDED},
                {},
                {"age": 11},
                {"age": 10},
                {},
            ],
        }
    )
    workers = result["steps"][4]["objects"]
    cluster = next(o for o in workers if o["kind"] == "RayCluster")
    assert all(g["suspend"] for g in cluster["spec"]["workerGroupSpecs"])
    assert "RayCluster" not in kinds(result["steps"][5])
    assert result["steps"][7]["status"] == "deleted"  # DeleteSelf, then the finalizer goes


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"suspend": True, "shutdownAfterJobFinishes": False}, "not allowed to be suspended"),
        ({"runtimeEnvYAML": "a: [1"}, "failed to unmarshal RuntimeEnvYAML"),
        ({"activeDeadlineSeconds": 0}, "activeDeadlineSeconds must be a positive integer"),
        ({"rayClusterSpec": None}, "one of RayClusterSpec or ClusterSelector must be set"),
        (
            {"shutdownAfterJobFinishes": False, "ttlSecondsAfterFinished": 5},
            "cannot have TTLSecondsAfterFinished",
        ),
    ],
)
def test_invalid_spec_fails_validation_with_kuberays_words(spec: dict[str, Any], message: str) -> None:
    result = run_case({"rayjob": rayjob(**spec), "steps": [{}]})
    step = result["steps"][0]
    assert step["status"]["jobDeploymentStatus"] == C.VALIDATION_FAILED
    assert message in step["status"]["message"]
    assert step["events"][0].startswith("Warning InvalidRayJobSpec default/job: ")
    assert step["result"]["requeueAfter"] == 0


def test_name_too_long() -> None:
    job = rayjob()
    job["metadata"]["name"] = "j" * 48
    step = run_case({"rayjob": job, "steps": [{}]})["steps"][0]
    assert step["status"]["message"].endswith("RayJob name should be no more than 47 characters")


def test_deleting_a_running_job_stops_it_and_lets_go() -> None:
    result = run_case(
        {
            "rayjob": rayjob(submissionMode=C.HTTP_MODE),
            "steps": [
                {},
                {"cluster_status": {"state": "ready"}},
                {"job_info": {"jobStatus": "RUNNING"}},
                {"delete": True},
            ],
        }
    )
    assert result["steps"][3]["dashboard_calls"] == [{"op": "StopJob", "jobId": "job-00001"}]
    assert result["steps"][3]["status"] == "deleted"


def test_managed_by_another_controller_is_left_alone() -> None:
    step = run_case({"rayjob": rayjob(managedBy="kueue.x-k8s.io/multikueue"), "steps": [{}]})["steps"][0]
    assert step["status"] == {}
    assert step["objects"] == []
    assert step["finalizers"] == []


def test_cluster_selector_missing_cluster() -> None:
    job = rayjob(clusterSelector={"ray.io/cluster": "shared"})
    del job["spec"]["rayClusterSpec"]
    result = run_case({"rayjob": job, "steps": [{}, {}]})
    step = result["steps"][1]
    assert step["events"] == [
        "Warning RayClusterNotFound RayCluster default/shared set in the clusterSelector is not found. "
        "It must be created manually"
    ]
    assert step["result"]["error"]


def test_submit_command_has_kuberays_shape() -> None:
    job = rayjob(
        runtimeEnvYAML="pip: [requests]\nenv_vars: {A: b}",
        metadata={"team": "x"},
        entrypointNumCpus=1.5,
        entrypointResources='{"r": 1}',
    )
    job["status"] = {"jobId": "id-1", "dashboardURL": "svc:8265"}
    cmd = " ".join(submit_command(job, C.K8S_JOB_MODE))
    assert cmd == (
        "if ! ray job status --address http://svc:8265 id-1 >/dev/null 2>&1 ; then ray job submit --address "
        "http://svc:8265 --no-wait --runtime-env-json "
        '"{\\"env_vars\\":{\\"A\\":\\"b\\"},\\"pip\\":[\\"requests\\"]}" '
        '--metadata-json "{\\"team\\":\\"x\\"}" --submission-id id-1 --entrypoint-num-cpus 1.500000 '
        '--entrypoint-resources "{\\"r\\": 1}" -- python -c \'print(1)\' ; fi ; ray job logs --address '
        "http://svc:8265 --follow id-1"
    )


@pytest.mark.parametrize(("seconds", "completes"), [(None, False), (60.0, True)])
def test_transition_grace_period_is_the_operators_setting(seconds: float | None, completes: bool) -> None:
    """Ray's job ended 120 s ago, the submitter still runs: past a 60 s grace period (KubeRay's
    RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS) the RayJob completes; within the
    default 300 s it stays Running."""
    from datetime import UTC, datetime, timedelta

    from rayscale.common.timefmt import rfc3339
    from rayscale.rayjob.checks import grace_period

    now = datetime(2026, 1, 1, tzinfo=UTC)
    status = {
        "jobStatus": C.JOB_SUCCEEDED,
        "jobDeploymentStatus": C.RUNNING,
        "rayJobInfo": {"endTime": rfc3339(now - timedelta(seconds=120))},
    }
    assert grace_period(status, now, *([] if seconds is None else [seconds])) is completes
    assert status["jobDeploymentStatus"] == (C.COMPLETE if completes else C.RUNNING)


@pytest.mark.parametrize(("value", "seconds"), [(None, 300.0), ("", 300.0), ("x", 300.0), ("45", 45.0)])
def test_grace_period_setting_reads_as_kuberay_reads_it(value: str | None, seconds: float) -> None:
    from rayscale.rayjob.controller import _grace_seconds

    assert _grace_seconds(value) == seconds
