"""The apply-to-first-task benchmark's pure parts: the milestones' summary and its ratio, the table,
the RayJob both operators get, and which cluster a head Service's host names
(bench/rayjob_first_task*.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.rayjob_first_task import fixture
from bench.rayjob_first_task_docs import MILESTONES, ratio, render, stat, summary
from bench.rayjob_first_task_kuberay import cluster_of_host


def run(operator: str, rep: int, first_task: float | None, worker: float | None = 3.0) -> dict[str, Any]:
    milestones: dict[str, float | None] = dict.fromkeys(MILESTONES, 1.0)
    milestones |= {"first_task": first_task, "worker_created": worker, "second_worker_created": None}
    return {
        "operator": operator,
        "rep": rep,
        "milestones": milestones,
        "load_start": [2.0 + rep, 0, 0],
        "load_end": [3.0, 0, 0],
        "bridge_errors": [],
        "proxied_calls": 7 if operator == "kuberay" else 0,
    }


def results(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"runs": runs, "operators": ["rayscale", "kuberay"], "reps": 3, "hold_s": 5.0,
            "kuberay_version": "v1.6.2", "ray_version": "2.60.0"}  # fmt: skip


def test_stat_is_the_median_and_max_of_what_was_reached() -> None:
    assert stat([3.0, None, 1.0, 2.0]) == {"p50": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert stat([1.0, 4.0]) == {"p50": 2.5, "min": 1.0, "max": 4.0, "n": 2}
    assert stat([None, float("nan")]) is None


def test_summary_per_operator_and_the_ratio_of_the_first_task() -> None:
    found = results(
        [
            run("rayscale", 0, 10.0),
            run("kuberay", 0, 30.0),
            run("rayscale", 1, 12.0),
            run("kuberay", 1, 20.0),
            run("rayscale", 2, 14.0),
            run("kuberay", 2, 25.0),
        ]
    )
    by = summary(found)
    assert by["rayscale"]["first_task"] == {"p50": 12.0, "min": 10.0, "max": 14.0, "n": 3}
    assert by["kuberay"]["first_task"] == {"p50": 25.0, "min": 20.0, "max": 30.0, "n": 3}
    assert by["kuberay"]["second_worker_created"] is None
    assert ratio(found) == 25.0 / 12.0


def test_no_ratio_when_one_side_never_ran_the_task() -> None:
    assert ratio(results([run("rayscale", 0, 10.0), run("kuberay", 0, None)])) is None
    assert ratio(results([run("rayscale", 0, 10.0)])) is None


def test_the_table_says_how_many_repetitions_reached_a_milestone() -> None:
    found = results([run("rayscale", 0, 10.0), run("kuberay", 0, None), run("kuberay", 1, 40.0)])
    text = render(found)
    row = next(line for line in text.splitlines() if "first task running" in line)
    assert row.split("|")[2:6] == [" 10.0 ", " 10.0 ", " 40.0 (1 of 2) ", " 40.0 (1 of 2) "]
    second = next(line for line in text.splitlines() if "second worker pod created" in line)
    assert second.count("never") == 4
    assert "KubeRay/rayscale = 4.00" in text


def test_the_fixture_declares_the_entrypoints_cpu_on_an_autoscaled_cluster(tmp_path: Path) -> None:
    body = fixture("job", tmp_path / "mark", 5.0)
    spec = body["spec"]
    assert spec["entrypointNumCpus"] == 1
    assert spec["submissionMode"] == "K8sJobMode"
    cluster = spec["rayClusterSpec"]
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    (group,) = cluster["workerGroupSpecs"]
    assert (group["minReplicas"], group["replicas"], group["maxReplicas"]) == (0, 0, 2)
    assert group["rayStartParams"]["num-cpus"] == "1"
    assert str(tmp_path / "mark") in spec["entrypoint"]


def test_a_head_services_host_names_its_cluster() -> None:
    assert cluster_of_host("job-abcde-head-svc.ns.svc.cluster.local") == "job-abcde"
    assert cluster_of_host("job-abcde-head-svc") == "job-abcde"
    assert cluster_of_host("elsewhere.example") is None
