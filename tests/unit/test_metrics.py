"""Metrics bookkeeping: controller-runtime's reconcile series from the work queue, per-cluster series
that disappear with their cluster, and the /metrics endpoint."""

from __future__ import annotations

import asyncio
import re
import socket
import urllib.request

from prometheus_client import generate_latest

from rayscale.controller.queue import WorkQueue
from rayscale.metrics import Metrics, serve

KEY = ("ns", "rc")


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


async def test_queue_runs_count_by_result_with_durations_and_active_workers() -> None:
    metrics = Metrics()
    seen_active: list[float | None] = []
    results = iter([None, 2.0, 0.0])

    async def work(key: str) -> float | None:
        seen_active.append(value(metrics, "controller_runtime_active_workers", controller="test"))
        if key == "boom":
            raise RuntimeError("boom")
        return next(results)

    queue: WorkQueue[str] = WorkQueue(work, concurrency=1, observer=metrics.queue("test"))
    task = asyncio.create_task(queue.run())
    for key in ("a", "b", "boom", "c"):
        queue.mark(key)
    for _ in range(1000):
        if value(metrics, "controller_runtime_reconcile_time_seconds_count", controller="test") == 4:
            break
        await asyncio.sleep(0)
    task.cancel()
    total = {
        r: value(metrics, "controller_runtime_reconcile_total", controller="test", result=r)
        for r in ("success", "error", "requeue", "requeue_after")
    }
    assert total == {"success": 1.0, "error": 1.0, "requeue": 1.0, "requeue_after": 1.0}
    assert value(metrics, "controller_runtime_reconcile_errors_total", controller="test") == 1
    assert seen_active == [1.0, 1.0, 1.0, 1.0]
    assert value(metrics, "controller_runtime_active_workers", controller="test") == 0


def test_unmet_reasons_no_longer_seen_lose_their_series() -> None:
    metrics = Metrics()
    metrics.round(KEY, pending=5, unmet={"MAX_REPLICAS": 3, "BACKOFF": 2}, backing_off=1)
    assert (
        value(metrics, "rayscale_autoscaler_unmet_demand", namespace="ns", cluster="rc", reason="BACKOFF")
        == 2
    )
    metrics.round(KEY, pending=3, unmet={"MAX_REPLICAS": 3}, backing_off=0)
    labels = {"namespace": "ns", "cluster": "rc"}
    assert value(metrics, "rayscale_autoscaler_unmet_demand", **labels, reason="BACKOFF") is None
    assert value(metrics, "rayscale_autoscaler_unmet_demand", **labels, reason="MAX_REPLICAS") == 3
    assert value(metrics, "rayscale_autoscaler_pending_demand", **labels) == 3
    assert value(metrics, "rayscale_autoscaler_groups_backing_off", **labels) == 0


def test_forget_removes_every_series_of_the_cluster_and_only_those() -> None:
    metrics = Metrics()
    other = ("ns", "other")
    for key in (KEY, other):
        metrics.round(key, pending=1, unmet={"MAX_REPLICAS": 1}, backing_off=1)
        metrics.gcs(key, reachable=False)
        metrics.scaled(key, "gpu", up=2, down={"IDLE": 1})
        metrics.launches_failed(key, "gpu", 1)
    text = generate_latest(metrics.registry).decode()
    for name in (
        "rayscale_autoscaler_pending_demand",
        "rayscale_autoscaler_unmet_demand",
        "rayscale_autoscaler_groups_backing_off",
        "rayscale_autoscaler_gcs_reachable",
        "rayscale_autoscaler_gcs_errors_total",
        "rayscale_autoscaler_scaled_up_total",
        "rayscale_autoscaler_scaled_down_total",
        "rayscale_autoscaler_failed_launches_total",
    ):
        assert re.search(rf'^{name}{{[^}}]*cluster="rc"', text, re.M), name
    assert 'cause="IDLE"' in text
    metrics.forget_cluster(KEY)
    text = generate_latest(metrics.registry).decode()
    assert 'cluster="rc"' not in text
    assert text.count('cluster="other"') >= 8
    metrics.forget_cluster(KEY)  # twice is fine


def test_gcs_errors_count_failed_rounds() -> None:
    metrics = Metrics()
    labels = {"namespace": "ns", "cluster": "rc"}
    metrics.gcs(KEY, reachable=False)
    metrics.gcs(KEY, reachable=False)
    metrics.gcs(KEY, reachable=True)
    assert value(metrics, "rayscale_autoscaler_gcs_errors_total", **labels) == 2
    assert value(metrics, "rayscale_autoscaler_gcs_reachable", **labels) == 1


def test_serve_answers_on_metrics() -> None:
    metrics = Metrics()
    metrics.queue("raycluster")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = serve(metrics, "127.0.0.1", port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        server.shutdown()
    assert 'controller_runtime_reconcile_total{controller="raycluster",result="success"} 0.0' in text
