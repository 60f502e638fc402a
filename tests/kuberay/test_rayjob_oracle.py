"""The RayJob oracle (tools/kuberay-oracle -rayjob, rayjob.go) on the scripted cases of
tests/kuberay/rayjob_cases/: every step's ``expect`` holds, the answers are the same on a second run
(names and clocks reproducible), and a few facts of KubeRay's RayJob controller the cases show. Like
the other tests here it needs the Go build (tests/kuberay/oracle.py), and fails when it cannot build.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kuberay import rayjob_oracle
from tests.kuberay.oracle import OracleError
from tests.kuberay.rayjob_oracle import ScriptedCase

Answers = dict[str, list[dict[str, Any]]]  # case name -> its steps

CASE_FILES = sorted(p.stem for p in rayjob_oracle.CASES_DIR.glob("*.yaml"))


@pytest.fixture(scope="module")
def cases() -> list[ScriptedCase]:
    try:
        return rayjob_oracle.load_cases()
    except OracleError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="module")
def answers(cases: list[ScriptedCase]) -> Answers:
    results = rayjob_oracle.run_rayjob_cases([c.case for c in cases])
    return {r["name"]: r["steps"] for r in results}


def _steps(answers: Answers, name: str) -> list[dict[str, Any]]:
    return answers[name]


def _objects(step: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [o for o in step["objects"] if o["kind"] == kind]


def _calls(step: dict[str, Any], op: str) -> list[dict[str, Any]]:
    return [c for c in step["dashboard_calls"] if c["op"] == op]


def test_the_cases_reach_every_deployment_status(answers: Answers) -> None:
    reached = {
        s["status"].get("jobDeploymentStatus", "New")
        for steps in answers.values()
        for s in steps
        if isinstance(s["status"], dict) and s["status"]
    }
    assert reached == {
        "New", "Initializing", "Waiting", "Running", "Complete", "Failed", "ValidationFailed",
        "Suspending", "Suspended", "Retrying",
    }  # fmt: skip


@pytest.mark.parametrize("name", CASE_FILES)
def test_every_expectation_holds(name: str, cases: list[ScriptedCase], answers: Answers) -> None:
    (case,) = [c for c in cases if c.path.stem == name]
    steps = answers[case.case["name"]]
    assert len(steps) == len(case.expect)
    problems = [
        f"step {i}: {p}" for i, (want, got) in enumerate(zip(case.expect, steps, strict=True))
        for p in rayjob_oracle.check(want, got)
    ]  # fmt: skip
    assert problems == []


def test_no_step_panics(answers: Answers) -> None:
    panics = [
        (name, i, s["result"]["error"])
        for name, steps in answers.items()
        for i, s in enumerate(steps)
        if (s["result"]["error"] or "").startswith("panic")
    ]
    assert panics == []


def test_a_second_run_answers_the_same(cases: list[ScriptedCase], answers: Answers) -> None:
    """Generated names (util/rand seeded per case) and every time (the virtual clock) reproduce."""
    again = rayjob_oracle.run_rayjob_cases([c.case for c in cases])
    assert {r["name"]: r["steps"] for r in again} == answers


def test_happy_path_completes_and_cleans_up(answers: Answers) -> None:
    steps = _steps(answers, "k8sjob-happy-path")
    job_id, cluster = steps[0]["status"]["jobId"], steps[0]["status"]["rayClusterName"]
    prefix = "rayjob-sample-shutdown-"  # <rayjob>-<5 random characters>, both
    assert [job_id[: len(prefix)], len(job_id)] == [prefix, len(prefix) + 5]
    assert [cluster[: len(prefix)], len(cluster)] == [prefix, len(prefix) + 5]
    assert cluster != job_id
    (submitter,) = _objects(steps[2], "Job")
    container = submitter["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    url = f"{cluster}-head-svc.default.svc.cluster.local:8265"
    assert env["RAY_DASHBOARD_ADDRESS"] == url == steps[2]["status"]["dashboardURL"]
    assert env["RAY_JOB_SUBMISSION_ID"] == job_id
    assert f"--submission-id {job_id}" in container["args"][0]
    assert [c["jobId"] for c in steps[3]["dashboard_calls"]] == [job_id]
    assert steps[4]["status"]["jobDeploymentStatus"] == "Complete"
    assert [o["metadata"]["name"] for o in _objects(steps[7], "RayCluster")] == []


def test_http_mode_submits_what_the_rayjob_says(answers: Answers) -> None:
    steps = _steps(answers, "http-mode")
    (submit,) = _calls(steps[3], "SubmitJob")
    request = submit["request"]
    assert request["submission_id"] == submit["jobId"] == steps[3]["status"]["jobId"]
    assert request["entrypoint"] == "python /home/ray/samples/sample_code.py"
    assert request["runtime_env"] == {
        "pip": ["requests==2.26.0", "pendulum==2.1.2"],
        "env_vars": {"counter_name": "test_counter"},
    }
    assert all(_objects(s, "Job") == [] for s in steps)


def test_sidecar_mode_puts_the_submitter_in_the_head_pod(answers: Answers) -> None:
    steps = _steps(answers, "sidecar-mode")
    (cluster,) = _objects(steps[1], "RayCluster")
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    assert [c["name"] for c in head["containers"]] == ["ray-head", "ray-job-submitter"]
    assert head["restartPolicy"] == "Never"
    assert cluster["metadata"]["annotations"]["ray.io/disable-provisioned-head-restart"] == "true"
    assert cluster["metadata"]["labels"]["ray.io/job-submission-mode"] == "SidecarMode"


def test_resume_and_retry_take_new_names(answers: Answers) -> None:
    for name, first, again in (("suspend-while-initializing", 0, 7), ("backoff-limit-retry", 0, 8)):
        steps = _steps(answers, name)
        before, after = steps[first]["status"], steps[again]["status"]
        assert after["jobId"] != before["jobId"], name
        assert after["rayClusterName"] != before["rayClusterName"], name
        assert [o["metadata"]["name"] for o in _objects(steps[again + 1], "RayCluster")] == [
            after["rayClusterName"]
        ]


def test_deletion_rules_suspend_the_workers_first(answers: Answers) -> None:
    steps = _steps(answers, "deletion-rules")
    (cluster,) = _objects(steps[6], "RayCluster")
    assert [g.get("suspend") for g in cluster["spec"]["workerGroupSpecs"]] == [True]


def test_deleting_a_running_rayjob_stops_its_job(answers: Answers) -> None:
    steps = _steps(answers, "delete-while-running")
    (stop,) = _calls(steps[4], "StopJob")
    assert stop["jobId"] == steps[3]["status"]["jobId"]
