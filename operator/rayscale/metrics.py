"""Prometheus metrics: controller-runtime's reconcile series for both loops, the autoscaler's, and
KubeRay's ``kuberay_cluster_*`` series about RayClusters.

Every metric lives in the registry of one `Metrics` object (the operator makes one, tests make
their own and read values with ``registry.get_sample_value``). The loops call the small methods
below; per-cluster series are remembered so `forget_cluster` can remove them all when the cluster
is deleted or stops autoscaling. The ``kuberay_cluster_*`` series follow the RayClusters the
controller's watch delivers (`raycluster_watched`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar
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
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric

from rayscale.api.raycluster import KUBERAY_MANAGER, PROVISIONED
from rayscale.common.labels import ORIGINATED_FROM_CRD
from rayscale.common.timefmt import parse_time
from rayscale.common.types import ClusterKey

__all__ = ["RESULTS", "Metrics", "QueueMetrics", "process_registry", "serve"]

M = TypeVar("M", bound=MetricWrapperBase)
RESULTS = ("success", "error", "requeue", "requeue_after")  # controller-runtime's result label
CLUSTER = ("namespace", "cluster")
# controller-runtime's reconcile_time_seconds buckets (v0.15+), seconds
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
                     0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9,
                     10, 15, 20, 25, 30, 40, 50, 60)  # fmt: skip
WAIT_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
DECISION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# KubeRay's RayCluster series: names, help texts and labels exactly as KubeRay (v1.6.2) exports them
KUBERAY_CLUSTER = ("name", "namespace", "uid")
PROVISIONED_DURATION = (
    "kuberay_cluster_provisioned_duration_seconds",
    "The time, in seconds, when a RayCluster's `RayClusterProvisioned` status transitions from false (or "
    "unset) to true",
)
CLUSTER_INFO = ("kuberay_cluster_info", "Metadata information about RayCluster custom resources")
CONDITION_PROVISIONED = (
    "kuberay_cluster_condition_provisioned",
    "Indicates whether the RayCluster is provisioned",
)


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
        self._retries = metrics.retries.labels(controller)
        self._backing_off = metrics.backing_off.labels(controller)

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

    def backoff(self, delay: float | None, backing_off: int) -> None:
        if delay is not None:
            self._retries.inc()
        self._backing_off.set(backing_off)


@dataclasses.dataclass(frozen=True)
class RayClusterFacts:
    """What KubeRay's RayCluster series say about one RayCluster, read from its body."""

    uid: str
    owner_kind: str  # the ray.io/originated-from-crd label (RayJob, RayService), else "None"
    provisioned: bool  # its RayClusterProvisioned condition is True
    created: datetime | None
    reconciled: bool  # spec.managedBy leaves it to this controller

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> RayClusterFacts:
        meta = body.get("metadata") or {}
        conditions = (body.get("status") or {}).get("conditions") or []
        managed_by = (body.get("spec") or {}).get("managedBy")
        return cls(
            uid=str(meta.get("uid") or ""),
            owner_kind=str((meta.get("labels") or {}).get(ORIGINATED_FROM_CRD, "None")),
            provisioned=any(c.get("type") == PROVISIONED and c.get("status") == "True" for c in conditions),
            created=parse_time(meta.get("creationTimestamp")),
            reconciled=managed_by in (None, "", KUBERAY_MANAGER),
        )


class RayClusterCollector:
    """``kuberay_cluster_info`` and ``kuberay_cluster_condition_provisioned``, made at scrape time from
    the RayClusters last seen, as KubeRay's collector makes them from its informer's cache: a series
    per RayCluster that exists, gone with it."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return self._families({})

    def collect(self) -> Iterable[Metric]:
        return self._families(self._metrics.rayclusters())

    @staticmethod
    def _families(clusters: Mapping[ClusterKey, RayClusterFacts]) -> list[Metric]:
        info = GaugeMetricFamily(*CLUSTER_INFO, labels=[*KUBERAY_CLUSTER, "owner_kind"])
        provisioned = GaugeMetricFamily(*CONDITION_PROVISIONED, labels=[*KUBERAY_CLUSTER, "condition"])
        for (namespace, name), facts in sorted(clusters.items()):
            info.add_metric([name, namespace, facts.uid, facts.owner_kind], 1)
            provisioned.add_metric([name, namespace, facts.uid, str(facts.provisioned).lower()], 1)
        return [info, provisioned]


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
        self.retries = Counter("workqueue_retries_total", "Total number of retries handled by workqueue "
                               "(runs that failed and were scheduled again after their backoff)", ["name"],
                               registry=r)
        self.backing_off = Gauge("rayscale_backing_off_clusters", "RayClusters whose latest run failed and "
                                 "that wait for their retry (exponential backoff)", per, registry=r)
        self.leader = Gauge("leader_election_master_status", "1 while this replica holds the Lease "
                            "(--leader-elect), else 0", ["name"], registry=r)
        self.kube_requests = Counter("rayscale_kube_requests", "Requests rayscale's API client sent to the "
                                     "API server (watches aside), by verb and resource", ["verb", "resource"],
                                     registry=r)
        self.rate_limit_wait = Histogram("rayscale_kube_rate_limit_wait_seconds", "Time a request waited for "
                                         "a token of the client-side rate limit (--kube-api-qps), by flow: "
                                         "cluster (a RayCluster's reconcile or autoscaling round), report "
                                         "(status.autoscaler), transition, events, rayjob, raycronjob, "
                                         "other", ["flow"], buckets=WAIT_BUCKETS, registry=r)
        self.loop_lag = Histogram("rayscale_event_loop_lag_seconds", "How late the operator's event loop "
                                  "ran a short sleep, measured every 0.25 s: the wait of all work ready "
                                  "when the process needs more CPU than it gets", buckets=WAIT_BUCKETS,
                                  registry=r)
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
        self.quiet_reads = Counter(f"{a}_quiet_reads", "Reads of Ray's state between rounds that found "
                                   "nothing new, so no round followed (--gcs-poll-interval)", registry=r)
        self.gcs_errors = Counter(f"{a}_gcs_errors", "Autoscaling rounds that could not read the cluster's "
                                  "GCS", CLUSTER, registry=r)
        self.gcs_read = Histogram(f"{a}_gcs_read_seconds", "Time one read of a cluster's state from its GCS "
                                  "(GetClusterResourceState) took, failed ones included",
                                  buckets=DECISION_BUCKETS, registry=r)
        self.gcs_reachable = Gauge(f"{a}_gcs_reachable", "1 when the latest read of the cluster's GCS "
                                   "succeeded, else 0", CLUSTER, registry=r)
        self.provisioned_duration = Gauge(*PROVISIONED_DURATION, KUBERAY_CLUSTER, registry=r)
        # fmt: on
        self._series: dict[ClusterKey, set[tuple[MetricWrapperBase, tuple[str, ...]]]] = {}
        self._rayclusters: dict[ClusterKey, RayClusterFacts] = {}
        self._provisioned_uids: dict[ClusterKey, set[str]] = {}
        self._lock = threading.Lock()
        r.register(RayClusterCollector(self))

    def kube_request(self, verb: str, resource: str, flow: str, waited: float) -> None:
        """One request of the API client, and how long it waited for its token."""
        self.kube_requests.labels(verb, resource).inc()
        self.rate_limit_wait.labels(flow).observe(waited)

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

    # ---- KubeRay's RayCluster series ----

    def raycluster_watched(
        self, body: Mapping[str, Any], *, deleted: bool = False, now: datetime | None = None
    ) -> None:
        """A RayCluster as the watch delivers it (`deleted`: its deletion).

        Its ``kuberay_cluster_info`` and ``kuberay_cluster_condition_provisioned`` follow it; when
        its RayClusterProvisioned condition turned True since the watch last delivered it,
        ``kuberay_cluster_provisioned_duration_seconds`` is set to its age, as KubeRay sets it when
        its status write turns the condition True. The first delivery (also after a restart) is
        the baseline: a cluster provisioned before is not measured again. A deleted RayCluster
        loses all its series, the duration of every uid it had under its name included.
        """
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if deleted:
            with self._lock:
                self._rayclusters.pop(key, None)
                uids = self._provisioned_uids.pop(key, set())
            for uid in uids:
                self.provisioned_duration.remove(key[1], key[0], uid)
            return
        facts = RayClusterFacts.of(body)
        with self._lock:
            before = self._rayclusters.get(key)
            self._rayclusters[key] = facts
        turned = before is not None and before.uid == facts.uid and not before.provisioned
        if turned and facts.provisioned and facts.reconciled and facts.created is not None:
            age = ((now or datetime.now(UTC)) - facts.created).total_seconds()
            self.provisioned_duration.labels(key[1], key[0], facts.uid).set(age)
            with self._lock:
                self._provisioned_uids.setdefault(key, set()).add(facts.uid)

    def rayclusters(self) -> dict[ClusterKey, RayClusterFacts]:
        """The RayClusters last seen, by (namespace, name)."""
        with self._lock:
            return dict(self._rayclusters)


def serve(metrics: Metrics, address: str, port: int) -> WSGIServer:
    """Serve ``/metrics`` from a daemon thread (answers even while the event loop is busy).

    Stop it with ``server.shutdown()`` (blocking: call it from a thread).
    """
    server, _ = start_http_server(port, addr=address, registry=metrics.registry)
    return server
