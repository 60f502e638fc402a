"""The fleet autoscaling benchmark's own parts: the fake GCS answers as Ray's does, the waves and the
demand-to-patch clocks (bench/fake_gcs_fleet.py, bench/autoscaler_fleet.py)."""

from __future__ import annotations

import argparse

from bench.autoscaler_fleet import client_requests, latencies, rate_limit_waits, sidecar_schedule, waves
from bench.autoscaler_fleet_docs import per_cluster, render, render_scaling
from bench.fake_gcs_fleet import FakeRay, node_id
from bench.fleet_watch import Fleet, Wave

from rayscale.ray.wire import autoscaler_pb2 as pb


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def ray(pods: list[str]) -> tuple[FakeRay, Clock]:
    clock = Clock()
    return FakeRay(running=lambda: pods, clock=clock), clock


def workers(reply: object) -> dict[str, tuple[float, int]]:
    state = reply.cluster_resource_state  # type: ignore[attr-defined]
    return {n.instance_id: (n.available_resources["CPU"], n.idle_duration_ms) for n in state.node_states[1:]}


def pending(reply: object) -> int:
    return sum(r.count for r in reply.cluster_resource_state.pending_resource_requests)  # type: ignore[attr-defined]


def test_tasks_go_on_free_cpus_and_the_rest_is_pending_demand() -> None:
    pods: list[str] = ["w1"]
    fake, clock = ray(pods)
    fake.submit(3, seconds=20)
    reply = fake.state(pb)
    assert (workers(reply), pending(reply)) == ({"w1": (0.0, 0)}, 2)
    assert reply.cluster_resource_state.node_states[0].instance_id == "head"
    pods.append("w2")
    clock.t += 5
    assert (workers(fake.state(pb)), pending(fake.state(pb))) == ({"w1": (0.0, 0), "w2": (0.0, 0)}, 1)
    clock.t += 20  # w1's task ended at 120, w2's runs until 125: w1 takes the last one
    assert pending(fake.state(pb)) == 0
    clock.t += 30
    assert workers(fake.state(pb)) == {"w1": (1.0, 10_000), "w2": (1.0, 30_000)}


def test_a_busy_node_refuses_its_drain_and_a_vanished_nodes_task_is_pending_again() -> None:
    pods = ["w1", "w2"]
    fake, _ = ray(pods)
    fake.submit(1, seconds=60)
    fake.state(pb)
    assert not fake.drain(node_id("w1"))
    assert fake.drain(node_id("w2"))
    assert set(workers(fake.state(pb))) == {"w1"}
    pods.remove("w1")
    assert pending(fake.state(pb)) == 1


def test_a_wave_is_timed_until_replicas_cover_it() -> None:
    fleet = Fleet()
    body = {"metadata": {"name": "c"}, "spec": {"workerGroupSpecs": [{"replicas": 1}]}}
    fleet.cluster("ADDED", body)
    wave = Wave("c", 0.0, 2, started=10.0, needed=True)
    fleet.open["c"] = [wave]
    fleet.cluster("MODIFIED", body)
    assert wave.patched is None
    fleet.cluster("MODIFIED", {"metadata": {"name": "c"}, "spec": {"workerGroupSpecs": [{"replicas": 2}]}})
    assert wave.patched is not None
    assert fleet.open["c"] == []
    late = Wave("c", 1.0, 3, started=wave.patched + 1, needed=True)
    summary = latencies([wave, late, Wave("c", 2.0, 1)], end=late.started + 30)
    assert (summary["waves"], summary["needing_patch"], summary["patched"]) == (3, 2, 1)
    assert summary["unpatched"] == 1
    # the unpatched wave counts with what it waited: a lower bound
    assert summary["max_s"] == max(wave.patched - wave.started, 30)


def test_the_clients_requests_and_waits_come_from_two_scrapes() -> None:
    before = {
        'rayscale_kube_requests_total{resource="pods",verb="create"}': 10.0,
        'rayscale_kube_rate_limit_wait_seconds_bucket{flow="cluster",le="0.1"}': 5.0,
        'rayscale_kube_rate_limit_wait_seconds_bucket{flow="cluster",le="1.0"}': 5.0,
        'rayscale_kube_rate_limit_wait_seconds_bucket{flow="cluster",le="+Inf"}': 5.0,
    }
    after = {
        'rayscale_kube_requests_total{resource="pods",verb="create"}': 30.0,
        'rayscale_kube_requests_total{resource="rayclusters/status",verb="patch"}': 4.0,
        'rayscale_kube_rate_limit_wait_seconds_bucket{flow="cluster",le="0.1"}': 104.0,
        'rayscale_kube_rate_limit_wait_seconds_bucket{flow="cluster",le="1.0"}': 104.0,
        'rayscale_kube_rate_limit_wait_seconds_bucket{flow="cluster",le="+Inf"}': 105.0,
    }
    assert client_requests(before, after, 2.0) == {"create pods": 10.0, "patch rayclusters/status": 2.0}
    waits = rate_limit_waits(before, after)
    assert waits == {"cluster": {"requests": 100.0, "p50_le_s": 0.1, "p99_le_s": 0.1}}


def test_every_cluster_gets_a_wave_a_period_and_the_sidecar_the_same_kind() -> None:
    args = argparse.Namespace(seed=1, period=60.0, duration=120.0, task_seconds=20.0, sidecar_duration=120.0)
    plan = waves(["a", "b"], args)
    assert sorted(w.cluster for w in plan) == ["a", "a", "b", "b"]
    assert all(1 <= w.tasks <= 3 and 0 <= w.at < 120 for w in plan)
    assert [w.at for w in plan] == sorted(w.at for w in plan)
    schedule = sidecar_schedule(args)
    assert [t for t, _ in schedule] == [0.0, 20.0, 60.0, 80.0]
    assert [k for _, k in schedule][1::2] == [0, 0]


def results(reads_per_cluster: float) -> dict[str, object]:
    run = {
        "clusters": 100, "rounds_per_s": 100 * reads_per_cluster, "full_rounds_per_s": 10.0,
        "operator_cores": 0.2, "operator_rss_peak_mib": 100.0, "control_plane_cpu_s": 60.0,
        "duration_s": 120.0, "load_start": [2.0],
        "load_end": [3.0], "demand_to_patch": {"median_s": 0.5, "p90_s": 0.9, "p99_s": 1.1, "patched": 10,
                                               "needing_patch": 10},
    }  # fmt: skip
    sidecar = {
        "ray_version": "2.60.0", "autoscaler_version": "v1", "window_seconds": 180.0, "cpu_seconds": 1.8,
        "cpu_seconds_per_minute": 0.6, "startup_cpu_seconds": 2.0, "vm_hwm_mib": 100.0,
        "k8s_requests_per_minute": 47.0, "latencies": [{"seconds": 5.1, "already_covered": False}],
        "kuberay_sidecar_resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
    }  # fmt: skip
    settings = {"real_heads": 2, "duration": 120.0, "period": 60.0, "task_seconds": 20.0}
    return {"fleet": [run], "sidecar": sidecar, "settings": settings, "date": "2026-11-28"}


def test_the_docs_say_what_was_met_and_whether_the_reads_kept_up() -> None:
    kept = results(1.0)
    cost = per_cluster(kept, 100, kept["fleet"])  # type: ignore[arg-type]
    assert (round(cost["cpu_ratio"]), round(cost["rss_ratio"]), cost["kept_up"]) == (5, 100, 1.0)
    text = render(kept)
    assert "5x less CPU and 100x less memory" in text
    assert "met at 100 clusters" in text
    assert "read only" not in text
    starved = render(results(0.2))
    assert "read only 0.20 times a second per cluster" in starved
    assert "100 autoscaled clusters reserve 50 CPUs" in " ".join(render_scaling(kept).split())
