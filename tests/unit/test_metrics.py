"""Metrics bookkeeping: controller-runtime's reconcile series from the work queue, per-cluster series
that disappear with their cluster, KubeRay's kuberay_cluster_* series, and the /metrics endpoint."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import generate_latest
from tests.support.operators import free_port
from tests.support.polling import until

from rayscale.api.names import RAYCLUSTER
from rayscale.common.workqueue import WorkQueue
from rayscale.metrics import Metrics, serve

KEY = ("ns", "rc")


def value(metrics: Metrics, name: str, /, **labels: str) -> float | None:
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
    await until(
        lambda: value(metrics, "controller_runtime_reconcile_time_seconds_count", controller="test") == 4
    )
    task.cancel()
    total = {
        r: value(metrics, "controller_runtime_reconcile_total", controller="test", result=r)
        for r in ("success", "error", "requeue", "requeue_after")
    }
    assert total == {"success": 1.0, "error": 1.0, "requeue": 1.0, "requeue_after": 1.0}
    assert value(metrics, "controller_runtime_reconcile_errors_total", controller="test") == 1
    assert seen_active == [1.0, 1.0, 1.0, 1.0]
    assert value(metrics, "controller_runtime_active_workers", controller="test") == 0


def test_failed_runs_count_as_retries_and_the_clusters_backing_off_are_a_gauge() -> None:
    metrics = Metrics()
    queue = metrics.queue("raycluster")
    queue.backoff(1.0, 1)
    queue.backoff(2.0, 2)
    queue.backoff(None, 1)  # a run that did not fail: no retry
    assert value(metrics, "workqueue_retries_total", name="raycluster") == 2
    assert value(metrics, "rayscale_backing_off_clusters", controller="raycluster") == 1


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
    port = free_port()
    server = serve(metrics, "127.0.0.1", port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        server.shutdown()
    assert 'controller_runtime_reconcile_total{controller="raycluster",result="success"} 0.0' in text


# ---- KubeRay's kuberay_cluster_* series ----

CREATED = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def raycluster(
    name: str = "rc",
    *,
    uid: str = "uid-1",
    provisioned: bool | None = None,
    labels: dict[str, str] | None = None,
    managed_by: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        **RAYCLUSTER.type_meta(),
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid,
            "labels": labels or {},
            "creationTimestamp": "2026-01-01T12:00:00Z",
        },
        "spec": {"headGroupSpec": {"template": {}}},
    }
    if managed_by:
        body["spec"]["managedBy"] = managed_by
    if provisioned is not None:
        condition = {"type": "RayClusterProvisioned", "status": str(provisioned), "reason": "x"}
        body["status"] = {"conditions": [condition]}
    return body


def kuberay_lines(metrics: Metrics) -> list[str]:
    text = generate_latest(metrics.registry).decode()
    return [line for line in text.splitlines() if "kuberay_cluster_" in line]


def duration(metrics: Metrics, name: str = "rc", uid: str = "uid-1") -> float | None:
    labels = {"name": name, "namespace": "ns", "uid": uid}
    return value(metrics, "kuberay_cluster_provisioned_duration_seconds", **labels)


def test_kuberay_cluster_series_have_kuberays_names_help_types_and_labels() -> None:
    metrics = Metrics()
    metrics.raycluster_watched(raycluster(labels={"ray.io/originated-from-crd": "RayJob"}))
    metrics.raycluster_watched(raycluster("plain", uid="uid-2", provisioned=False), now=CREATED)
    metrics.raycluster_watched(raycluster("plain", uid="uid-2", provisioned=True), now=CREATED)
    assert kuberay_lines(metrics) == [
        "# HELP kuberay_cluster_provisioned_duration_seconds The time, in seconds, when a RayCluster's "
        "`RayClusterProvisioned` status transitions from false (or unset) to true",
        "# TYPE kuberay_cluster_provisioned_duration_seconds gauge",
        'kuberay_cluster_provisioned_duration_seconds{name="plain",namespace="ns",uid="uid-2"} 0.0',
        "# HELP kuberay_cluster_info Metadata information about RayCluster custom resources",
        "# TYPE kuberay_cluster_info gauge",
        'kuberay_cluster_info{name="plain",namespace="ns",owner_kind="None",uid="uid-2"} 1.0',
        'kuberay_cluster_info{name="rc",namespace="ns",owner_kind="RayJob",uid="uid-1"} 1.0',
        "# HELP kuberay_cluster_condition_provisioned Indicates whether the RayCluster is provisioned",
        "# TYPE kuberay_cluster_condition_provisioned gauge",
        'kuberay_cluster_condition_provisioned{condition="true",name="plain",namespace="ns",uid="uid-2"} 1.0',
        'kuberay_cluster_condition_provisioned{condition="false",name="rc",namespace="ns",uid="uid-1"} 1.0',
    ]


def test_condition_follows_the_cluster_and_every_series_goes_with_it() -> None:
    metrics = Metrics()
    labels = {"name": "rc", "namespace": "ns", "uid": "uid-1"}
    metrics.raycluster_watched(raycluster())
    metrics.raycluster_watched(raycluster("other", uid="uid-9"))
    cond = "kuberay_cluster_condition_provisioned"
    assert value(metrics, cond, **labels, condition="false") == 1
    metrics.raycluster_watched(raycluster(provisioned=True))
    assert value(metrics, cond, **labels, condition="false") is None
    assert value(metrics, cond, **labels, condition="true") == 1
    assert duration(metrics) is not None
    metrics.raycluster_watched(raycluster(provisioned=True), deleted=True)
    assert not [line for line in kuberay_lines(metrics) if 'name="rc"' in line]
    assert value(
        metrics, "kuberay_cluster_info", name="other", namespace="ns", uid="uid-9", owner_kind="None"
    )
    metrics.raycluster_watched(raycluster(), deleted=True)  # twice is fine


def test_provisioned_duration_is_the_age_when_the_condition_turns_true() -> None:
    metrics = Metrics()
    metrics.raycluster_watched(raycluster(), now=CREATED)  # created: no status yet
    metrics.raycluster_watched(raycluster(provisioned=False), now=CREATED + timedelta(seconds=3))
    assert duration(metrics) is None
    metrics.raycluster_watched(raycluster(provisioned=True), now=CREATED + timedelta(seconds=42.5))
    assert duration(metrics) == 42.5
    metrics.raycluster_watched(raycluster(provisioned=True), now=CREATED + timedelta(seconds=99))
    assert duration(metrics) == 42.5  # still true: not measured again
    # suspended (False), resumed (True): measured again from the creation, as KubeRay does
    metrics.raycluster_watched(raycluster(provisioned=False), now=CREATED + timedelta(seconds=200))
    metrics.raycluster_watched(raycluster(provisioned=True), now=CREATED + timedelta(seconds=300))
    assert duration(metrics) == 300


def test_provisioned_duration_not_set_for_a_cluster_provisioned_before_it_was_first_seen() -> None:
    metrics = Metrics()
    metrics.raycluster_watched(raycluster(provisioned=True), now=CREATED + timedelta(seconds=5))
    assert duration(metrics) is None
    assert value(
        metrics,
        "kuberay_cluster_condition_provisioned",
        name="rc",
        namespace="ns",
        uid="uid-1",
        condition="true",
    )


def test_provisioned_duration_only_for_clusters_this_controller_reconciles() -> None:
    metrics = Metrics()
    for managed_by in ("kueue.x-k8s.io/multikueue", "ray.io/kuberay-operator"):
        name = managed_by.split("/")[0].replace(".", "-")
        metrics.raycluster_watched(raycluster(name, managed_by=managed_by, provisioned=False))
        metrics.raycluster_watched(raycluster(name, managed_by=managed_by, provisioned=True))
    assert duration(metrics, "kueue-x-k8s-io") is None
    assert duration(metrics, "ray-io") is not None


def test_a_new_cluster_under_an_old_name_starts_from_its_own_first_sighting() -> None:
    metrics = Metrics()
    metrics.raycluster_watched(raycluster(provisioned=False))
    metrics.raycluster_watched(raycluster(uid="uid-2", provisioned=True))  # its deletion was missed
    assert duration(metrics, uid="uid-2") is None
    labels = {"name": "rc", "namespace": "ns", "owner_kind": "None"}
    assert value(metrics, "kuberay_cluster_info", **labels, uid="uid-1") is None
    assert value(metrics, "kuberay_cluster_info", **labels, uid="uid-2") == 1


def test_the_raycluster_index_feeds_them_only_where_the_controller_runs() -> None:
    from rayscale.controller.runner import ControllerConfig
    from rayscale.handlers import Runtime, indexes

    for run_controller in (True, False):
        metrics = Metrics()
        runtime = Runtime(ControllerConfig(), None, run_controller=run_controller, metrics=metrics)
        clusters = indexes(runtime).clusters
        clusters.upsert(raycluster())
        assert bool(metrics.rayclusters()) is run_controller
        clusters.delete(raycluster())
        assert metrics.rayclusters() == {}
