"""The pure parts of bench/rayjob_fleet.py (RayJobs on rayscale beside KubeRay's operator): the fake
Ray's schedule and what it answers, the RayJob it creates, the lag figures and the docs section."""

from __future__ import annotations

import io
import json
import math
from typing import Any

from bench import apiserver_requests, rayjob_fleet_docs
from bench.rayjob_fake_ray import Schedule, answer, serving_gcs
from bench.rayjob_fleet import lags, percentile, rayjob
from bench.rayjob_watch import JobWatch, Seen

from rayscale.ray import convert
from rayscale.ray.client import GcsClient


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_job_goes_pending_running_succeeded_on_its_schedule() -> None:
    clock = Clock()
    schedule = Schedule(pending=10, running=20, clock=clock)
    assert answer(schedule, "POST", "/api/jobs/", {"submission_id": "j1", "entrypoint": "python x"}) == (
        200,
        {"job_id": "j1", "submission_id": "j1"},
    )
    job = schedule.jobs["j1"]
    seen = []
    for at in (1000, 1009.9, 1010, 1029.9, 1030, 1100):
        clock.now = at
        seen.append(schedule.status(job, at))
    assert seen == ["PENDING", "PENDING", "RUNNING", "RUNNING", "SUCCEEDED", "SUCCEEDED"]
    assert schedule.changes(job) == {"PENDING": 1000, "RUNNING": 1010, "SUCCEEDED": 1030}


def test_the_gcs_record_is_one_rayscale_reads_as_ray_wrote_it() -> None:
    clock = Clock()
    schedule = Schedule(pending=1, running=1, clock=clock)
    schedule.submit("j1", "python x", {"owner": "bench"})
    job = schedule.jobs["j1"]
    infos = []
    for at in (1000.5, 1001.5, 1002.5):
        infos.append(convert.submission_info(json.dumps(schedule.record(job, at))))
    assert [i.status for i in infos] == ["PENDING", "RUNNING", "SUCCEEDED"]
    assert infos[0].start_time_ms == 1_000_000
    assert (infos[1].end_time_ms, infos[2].end_time_ms) == (0, 1_002_000)
    assert infos[2].metadata == {"owner": "bench"}
    assert infos[2].driver_exit_code == 0


def test_the_dashboard_answers_and_counts() -> None:
    clock = Clock()
    schedule = Schedule(pending=1, running=1, clock=clock)
    assert answer(schedule, "GET", "/api/jobs/j1", None)[0] == 404
    assert answer(schedule, "POST", "/api/jobs/", {"submission_id": "j1", "entrypoint": "x"})[0] == 200
    status, text = answer(schedule, "POST", "/api/jobs/", {"submission_id": "j1", "entrypoint": "x"})
    assert status == 400
    assert "Please use a different submission_id" in text  # what rayscale takes as already submitted
    clock.now = 1001.5
    status, details = answer(schedule, "GET", "/api/jobs/j1", None)
    assert (status, details["status"], details["submission_id"]) == (200, "RUNNING", "j1")
    assert answer(schedule, "GET", "/api/version", None)[0] == 200
    assert dict(schedule.calls) == {"dashboard_status": 2, "dashboard_submit": 2, "dashboard_other": 1}


def test_the_rayjob_names_the_fakes_for_its_cluster() -> None:
    body = rayjob("rj-0001", "127.0.0.1:5", "http://127.0.0.1:6")
    assert body["metadata"]["annotations"] == {
        "rayscale.io/gcs-address": "127.0.0.1:5",
        "rayscale.io/dashboard-address": "http://127.0.0.1:6",
    }
    assert body["spec"]["submissionMode"] == "HTTPMode"
    assert body["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] is True


def test_lags_from_the_schedule_to_the_watch() -> None:
    clock = Clock()
    schedule = Schedule(pending=10, running=20, clock=clock)
    watch = JobWatch(None, "ns")
    for i, (running, succeeded) in enumerate([(1.0, 2.0), (3.0, None)]):
        schedule.submit(f"j{i}", "x", {})
        watch.job_ids[f"rj-{i}"] = f"j{i}"
        seen = {"RUNNING": 1010 + running} | ({"SUCCEEDED": 1030 + succeeded} if succeeded else {})
        watch.seen[f"rj-{i}"] = seen
    found = lags(schedule, watch, began=1000.0)
    assert found["RUNNING"]["p50_s"] == 1.0
    assert found["RUNNING"]["windows"] == [[0, 2, 1.0, 3.0]]  # both changed 10 s in
    assert found["SUCCEEDED"]["windows"] == [[20, 1, 2.0, 2.0]]  # 30 s in
    assert found["RUNNING"]["p99_s"] == 3.0
    assert (found["SUCCEEDED"]["jobs"], found["SUCCEEDED"]["skipped"]) == (1, 1)
    assert math.isnan(percentile([], 0.5))


def test_the_api_servers_writes_counted_by_verb_and_resource() -> None:
    def metrics(puts: int) -> str:
        return (
            'apiserver_request_total{code="200",group="ray.io",resource="rayjobs",subresource="status",'
            f'verb="PUT",version="v1"}} {puts}\n'
            'apiserver_request_total{code="200",group="",resource="pods",subresource="",verb="LIST"} 7\n'
            'apiserver_request_total{code="409",group="",resource="services",subresource="",verb="POST"} 2\n'
            "# HELP other lines are skipped\n"
        )

    before, after = apiserver_requests.parse(metrics(5)), apiserver_requests.parse(metrics(12))
    assert after == {"PUT rayjobs/status": 12, "LIST pods": 7, "POST services 409": 2}
    assert apiserver_requests.writes(before, after) == {"total": 7, "PUT rayjobs/status": 7}
    assert apiserver_requests.reads(before, after) == {"total": 0}  # the LISTs did not change


def result(operator: str, rep: int, **over: Any) -> dict[str, Any]:
    lag = {"p50_s": 1.0, "p99_s": 2.5, "max_s": 3.0, "mean_s": 1.2, "jobs": 10, "skipped": 0}
    calls = {"dashboard_submit": 10} | (
        {"dashboard_status": 90, "proxied": 100}
        if operator == "kuberay"
        else {"gcs_kv_get": 80, "gcs_state": 150}
    )
    return {
        "operator": operator, "rep": rep, "jobs": 10, "complete_s": 40.0 + rep, "submitted_last_s": 5.0,
        "lag": {"RUNNING": lag, "SUCCEEDED": lag}, "calls": calls, "cpu_seconds": 3.0, "cores": 0.1,
        "rss_peak_mib": 90.0, "rss_end_mib": 80.0, "load_start": [1.0, 1, 1], "load_end": [2.0, 1, 1],
    } | over  # fmt: skip


def test_the_docs_section_renders_from_the_results() -> None:
    results = {
        "runs": [result("rayscale", 0), result("kuberay", 0), result("rayscale", 1), result("kuberay", 1)],
        "jobs": 10, "reps": 2, "operators": ["rayscale", "kuberay"], "pending_s": 10.0, "running_s": 20.0,
        "kuberay_version": "v1.6.2", "provenance": {"commit": "abc"},
    }  # fmt: skip
    text = rayjob_fleet_docs.render(results)
    assert text.startswith(rayjob_fleet_docs.TITLE)
    assert "| every RayJob Complete, s from the first create | 40.5 (40.0-41.0) | 40.5 (40.0-41.0) |" in text
    assert "| dashboard job-status calls | 0 | 90 |" in text
    assert "rayscale made 0 dashboard status calls" in text
    assert rayjob_fleet_docs.shown(results)["kuberay"]["proxied"] == 100


async def test_the_fake_gcs_tells_which_connection_each_read_came_on() -> None:
    """One client (one connection) for the state and the job records: one peer for both; a second
    client, of another cluster's address, for the records alone is a connection of its own."""
    schedule = Schedule(pending=1, running=1)
    schedule.submit("j1", "x", {})
    async with serving_gcs(schedule, hosts=2) as addresses:
        assert addresses[0].rsplit(":", 1)[0] != addresses[1].rsplit(":", 1)[0]
        shared, own = (GcsClient(address, timeout=5, retries=0) for address in addresses)
        try:
            await shared.get_cluster_resource_state()
            assert (await shared.get_submission("j1")) is not None
            assert (await shared.get_submission("nope")) is None
            assert schedule.peers["kv"] == schedule.peers["state"]
            assert len(schedule.peers["kv"]) == 1
            await own.get_submission("j1")
        finally:
            await shared.close()
            await own.close()
    assert len(schedule.peers["kv"] - schedule.peers["state"]) == 1
    assert (schedule.calls["gcs_state"], schedule.calls["gcs_kv_get"]) == (1, 3)


def test_the_watcher_says_each_fact_once_and_the_watch_takes_its_moments() -> None:
    out = io.StringIO()
    seen = Seen(out)
    job = {"metadata": {"name": "rj-0"}, "status": {"jobId": "j0", "jobStatus": "PENDING"}}
    seen.job(job, 5.0)
    seen.job(job, 6.0)  # nothing new
    seen.job({**job, "status": {"jobId": "j0", "jobStatus": "RUNNING"}}, 7.0)
    seen.job({**job, "status": {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete"}}, 9.0)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines == [
        {"t": 5.0, "name": "rj-0", "jobId": "j0"},
        {"t": 5.0, "name": "rj-0", "jobStatus": "PENDING"},
        {"t": 7.0, "name": "rj-0", "jobStatus": "RUNNING"},
        {"t": 9.0, "name": "rj-0", "jobStatus": "SUCCEEDED"},
        {"t": 9.0, "name": "rj-0", "jobDeploymentStatus": "Complete"},
        {"t": 9.0, "name": "rj-0", "complete": True},
    ]
    watch = JobWatch(None, "ns")
    for line in [{"synced": True}, *lines]:
        watch.apply(line)
    assert watch.synced.is_set()
    assert watch.job_ids == {"rj-0": "j0"}
    assert watch.seen == {"rj-0": {"PENDING": 5.0, "RUNNING": 7.0, "SUCCEEDED": 9.0}}
    assert watch.complete == {"rj-0": 9.0}
    assert (watch.job, watch.deployment) == ({"rj-0": "SUCCEEDED"}, {"rj-0": "Complete"})
