"""Prometheus metrics: controller-runtime's reconcile series for both loops, and the autoscaler's.

Every metric lives in the registry of one `Metrics` object (the operator makes one, tests make
their own and read values with ``registry.get_sample_value``). The loops call the small methods
below; per-cluster series are remembered so `forget_cluster` can remove them all when the cluster
is deleted or stops autoscaling.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TypeVar
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.metrics import MetricWrapperBase

__all__ = ["RESULTS", "Metrics", "QueueMetrics", "process_registry", "serve"]

ClusterKey = tuple[str, str]  # (namespace, name)
M = TypeVar("M", bound=MetricWrapperBase)
RESULTS = ("success", "error", "requeue", "requeue_after")  # controller-runtime's result label
CLUSTER = ("namespace", "cluster")
# controller-runtime's reconcile_time_seconds buckets (v0.15+), seconds
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
                     0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9,
                     10, 15, 20, 25, 30, 40, 50, 60)  # fmt: skip
DECISION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def process_registry() -> CollectorRegistry:
    """A registry with the process, platform and GC collectors (what the default registry has)."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class QueueMetrics:
    """controller-runtime's reconcile series of one work queue (label ``controller``)."""

    def __init__(self, metrics: Metrics, controller: str) -> None:
        self._total = {r: metrics.reconcile_total.labels(controller, r) for r in RESULTS}
        self._errors = metrics.reconcile_errors.labels(controller)
        self._time = metrics.reconcile_time.labels(controller)
        self._active = metrics.active_workers.labels(controller)

    def started(self) -> None:
        self._active.inc()

    def finished(self, result: str | None, seconds: float) -> None:
        self._active.dec()
        if result is None:  # cancelled: the operator stops
            return
        self._total[result].inc()
        if result == "error":
            self._errors.inc()
        self._time.observe(seconds)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        cr, per = "controller_runtime", ["controller"]
        # fmt: off
        self.reconcile_total = Counter(f"{cr}_reconcile_total", "Total number of reconciliations per "
                                       "controller", [*per, "result"], registry=r)
        self.reconcile_errors = Counter(f"{cr}_reconcile_errors_total", "Total number of reconciliation "
                                        "errors per controller", per, registry=r)
        self.reconcile_time = Histogram(f"{cr}_reconcile_time_seconds", "Length of time per reconciliation "
                                        "per controller", per, buckets=RECONCILE_BUCKETS, registry=r)
        self.active_workers = Gauge(f"{cr}_active_workers", "Number of currently used workers per "
                                    "controller", per, registry=r)
        self.leader = Gauge("leader_election_master_status", "1 while this replica holds the Lease "
                            "(--leader-elect), else 0", ["name"], registry=r)
        a = "rayscale_autoscaler"
        self.decision_duration = Histogram(f"{a}_decision_duration_seconds", "Time to build one cluster's "
                                           "snapshot and run the scheduler", buckets=DECISION_BUCKETS,
                                           registry=r)
        self.pending_demand = Gauge(f"{a}_pending_demand", "Units of demand (tasks/actors, placement group "
                                    "bundles, resource request bundles) not on a running worker: waiting for "
                                    "a worker to start, or unmet", CLUSTER, registry=r)
        self.unmet_demand = Gauge(f"{a}_unmet_demand", "Units of demand the latest decision could not "
                                  "place, by reason", [*CLUSTER, "reason"], registry=r)
        self.scaled_up = Counter(f"{a}_scaled_up", "Worker nodes (pods) added by the autoscaler's patches",
                                 [*CLUSTER, "group"], registry=r)
        self.scaled_down = Counter(f"{a}_scaled_down", "Worker nodes (pods) removed by the autoscaler's "
                                   "patches, by cause", [*CLUSTER, "group", "cause"], registry=r)
        self.failed_launches = Counter(f"{a}_failed_launches", "Worker nodes removed because they were not "
                                       "provisioned in time", [*CLUSTER, "group"], registry=r)
        self.groups_backing_off = Gauge(f"{a}_groups_backing_off", "Worker groups backing off after failed "
                                        "launches", CLUSTER, registry=r)
        self.gcs_errors = Counter(f"{a}_gcs_errors", "Autoscaling rounds that could not read the cluster's "
                                  "GCS", CLUSTER, registry=r)
        self.gcs_reachable = Gauge(f"{a}_gcs_reachable", "1 when the latest read of the cluster's GCS "
                                   "succeeded, else 0", CLUSTER, registry=r)
        # fmt: on
        self._series: dict[ClusterKey, set[tuple[MetricWrapperBase, tuple[str, ...]]]] = {}
        self._lock = threading.Lock()

    def queue(self, controller: str) -> QueueMetrics:
        return QueueMetrics(self, controller)

    # ---- per cluster ----

    def _child(self, metric: M, key: ClusterKey, *labels: str) -> M:
        values = (*key, *labels)
        with self._lock:
            self._series.setdefault(key, set()).add((metric, values))
        return metric.labels(*values)

    def _drop(self, metric: MetricWrapperBase, key: ClusterKey, *labels: str) -> None:
        values = (*key, *labels)
        with self._lock:
            self._series.get(key, set()).discard((metric, values))
        metric.remove(*values)

    def round(
        self,
        key: ClusterKey,
        *,
        pending: int,
        unmet: Mapping[str, int],
        backing_off: int,
    ) -> None:
        """The gauges of one decision for `key`; unmet reasons no longer seen lose their series."""
        self._child(self.pending_demand, key).set(pending)
        self._child(self.groups_backing_off, key).set(backing_off)
        with self._lock:
            seen = {v[2] for m, v in self._series.get(key, set()) if m is self.unmet_demand}
        for reason in seen - set(unmet):
            self._drop(self.unmet_demand, key, reason)
        for reason, count in unmet.items():
            self._child(self.unmet_demand, key, reason).set(count)

    def gcs(self, key: ClusterKey, *, reachable: bool) -> None:
        self._child(self.gcs_reachable, key).set(1 if reachable else 0)
        errors = self._child(self.gcs_errors, key)
        if not reachable:
            errors.inc()

    def scaled(
        self, key: ClusterKey, group: str, *, up: int = 0, down: Mapping[str, int] | None = None
    ) -> None:
        """`up` nodes added to `group`, and nodes removed by cause."""
        if up:
            self._child(self.scaled_up, key, group).inc(up)
        for cause, count in (down or {}).items():
            self._child(self.scaled_down, key, group, cause).inc(count)

    def launches_failed(self, key: ClusterKey, group: str, nodes: int) -> None:
        self._child(self.failed_launches, key, group).inc(nodes)

    def forget_cluster(self, key: ClusterKey) -> None:
        """Remove every series of `key`."""
        with self._lock:
            series = self._series.pop(key, set())
        for metric, values in series:
            metric.remove(*values)


def serve(metrics: Metrics, address: str, port: int) -> WSGIServer:
    """Serve ``/metrics`` from a daemon thread (answers even while the event loop is busy).

    Stop it with ``server.shutdown()`` (blocking: call it from a thread).
    """
    server, _ = start_http_server(port, addr=address, registry=metrics.registry)
    return server
