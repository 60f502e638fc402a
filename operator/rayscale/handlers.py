"""kopf wiring: indexes of RayClusters, their services (slim copies: rayscale.common.pods),
RayResourceRequests and RayVirtualClusters, dirty marks, settings, probes. The pods are indexed by
the pod informer (rayscale.kube.informer), not by kopf: it costs a fraction of kopf's CPU per event.

No decisions are made here: every event only marks its RayCluster dirty; the controller's
work queue runs one level-based reconcile per cluster at a time (rayscale.controller.runner), and
the autoscaler's queue one autoscaling round (rayscale.autoscaler.loop). Both report to one
Prometheus registry, served at /metrics from a daemon thread (rayscale.metrics).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import kopf

from rayscale.autoscaler.loop import Autoscaler, AutoscalerConfig
from rayscale.common import gc_tuning, pods
from rayscale.common import labels as L
from rayscale.common.scope import Scope
from rayscale.controller.runner import ClusterKey, ControllerConfig, RayClusterController
from rayscale.fence import WRITE_FENCE, Fenced
from rayscale.kube import kopf_views
from rayscale.kube.client import make_api_client
from rayscale.kube.events import EventRecorder
from rayscale.kube.informer import Informer
from rayscale.kube.kopf_storage import NoDiffBase
from rayscale.kube.pod_index import PodIndex
from rayscale.kube.watchhealth import WatchHealth
from rayscale.metrics import Metrics, process_registry

log = logging.getLogger(__name__)
registry = kopf.OperatorRegistry()
LIST_CHUNK = 500  # objects per page of kopf's LISTs
IDLE_WORKER_SECONDS = 0.5  # kopf's per-object task outlives its last event by this
RAYCLUSTERS = ("ray.io", "v1", "rayclusters")
RAYRESOURCEREQUESTS = ("rayscale.io", "v1alpha1", "rayresourcerequests")
RAYVIRTUALCLUSTERS = ("rayscale.io", "v1alpha1", "rayvirtualclusters")
INDEXES = (
    "rayclusters_by_name",
    "foreign_rayclusters",
    "ray_services_by_cluster",
    "rayresourcerequests_by_cluster",
    "rayvirtualclusters_by_cluster",
)
PREFIX = "rayscale.io"
# kopf retries a failed API request (its watches too) after each of these waits, then gives up on
# it and starts over. kopf's default (1, 1, 2, 3, 5, 8, 13, 21 s) left pods following a patch up to
# 21 s after an API server outage ended; these wait at most 2 s, for about the same minute in all.
API_RETRY_BACKOFFS: tuple[float, ...] = (0.5, 1.0, *([2.0] * 29))


@dataclasses.dataclass
class Runtime:
    """Shared through kopf's memo: set up at startup, used by every handler."""

    config: ControllerConfig
    namespaces: list[str] | None  # names or kopf's patterns; None: every namespace
    autoscaler_config: AutoscalerConfig | None = None  # None: no autoscaler
    run_controller: bool = True
    kube_api_qps: float = 0.0  # 0: no client-side rate limit
    kube_api_burst: int = 0
    controller: RayClusterController | None = None
    autoscaler: Autoscaler | None = None
    health: WatchHealth | None = None
    indexes: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Set once kopf has listed every resource it indexes (its first handler call brings them)
    indexed: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    pods: PodIndex | None = None
    pod_informer: Informer | None = None
    tasks: list[asyncio.Task[None]] = dataclasses.field(default_factory=list)
    recorder: EventRecorder | None = None
    api: Any = None
    metrics: Metrics | None = None
    # With leader election: stop renewing and release the Lease (writes are fenced from then on).
    # Called first thing on a clean stop, so a standby takes over while this replica winds down.
    hand_over: Callable[[], Awaitable[None]] | None = None
    # Which RayClusters are this operator's (--cluster-selector; its namespaces are kopf's to filter)
    scope: Scope = dataclasses.field(default_factory=Scope)
    # The RayClusters handed to the controller and the autoscaler so far: one that leaves the scope
    # is handed over once more, so that both let go of it.
    owned: set[ClusterKey] = dataclasses.field(default_factory=set)
    # What of each owned RayCluster, when it changes, the controller acts on (`reconciled_facts`)
    facts: dict[ClusterKey, tuple[Any, ...]] = dataclasses.field(default_factory=dict)


class IndexSource:
    """The controller's view of the cluster, read from kopf's indexes.

    A RayCluster outside this operator's `Scope` (another shard's) is not there, and neither are
    the RayResourceRequests and RayVirtualClusters bound to it: the autoscaler lets go of it
    without a word. A RayCluster that does not exist at all is not there either, but its requests
    and virtual clusters are: they are told so, as without shards.
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def _index(self, name: str) -> Any:
        return self.runtime.indexes.get(name) or {}

    def cluster(self, key: ClusterKey) -> Mapping[str, Any] | None:
        for body in self._index("rayclusters_by_name").get(key, ()):
            found: Mapping[str, Any] = body
            return found
        return None

    def pods(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        return self.runtime.pods.pods(key) if self.runtime.pods is not None else []

    def services(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        return list(self._index("ray_services_by_cluster").get(key, ()))

    def foreign(self, key: ClusterKey) -> bool:
        """`key` is a RayCluster that exists and is another shard's."""
        return key in self._index("foreign_rayclusters") and key not in self._index("rayclusters_by_name")

    def requests(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        if self.foreign(key):
            return []
        return list(self._index("rayresourcerequests_by_cluster").get(key, ()))

    def virtual_clusters(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        if self.foreign(key):
            return []
        return list(self._index("rayvirtualclusters_by_cluster").get(key, ()))

    def cluster_keys(self) -> Sequence[ClusterKey]:
        return list(self._index("rayclusters_by_name"))

    def resource_versions(self) -> dict[ClusterKey, str]:
        """Every RayCluster the watch delivered, this shard's or not, at its resourceVersion."""
        out: dict[ClusterKey, str] = {}
        for key, versions in self._index("foreign_rayclusters").items():
            for version in versions:
                out[key] = version
        for key, store in self._index("rayclusters_by_name").items():
            for body in store:
                out[key] = body["metadata"].get("resourceVersion", "")
        return out


@kopf.on.startup(registry=registry)
async def configure(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    runtime: Runtime = memo.runtime
    kopf_views.install()  # each watch event freed once handled, not by the cyclic collector
    settings.persistence.finalizer = f"{PREFIX}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = NoDiffBase()  # no handler diffs an object
    settings.posting.level = logging.WARNING
    settings.posting.loggers = False
    settings.posting.reporting_component = "rayscale"
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.watching.inactivity_timeout = 70
    # kopf LISTs a resource when it starts watching it and again when a watch ends with 410 Gone:
    # in pages, as client-go's reflector does. Unpaged, a 10,000-pod fleet's list decoded at once
    # (about 160 MB of Python objects) set the operator's peak memory.
    settings.watching.chunk_size = LIST_CHUNK
    settings.networking.request_timeout = 30
    settings.networking.connect_timeout = 10
    settings.networking.error_backoffs = API_RETRY_BACKOFFS
    settings.execution.max_workers = 4
    # kopf runs a task per object with events, which keeps the object's last watch event (a pod:
    # about 45 KB decoded) until it exits, idle_timeout after that event. Its 5 s default held the
    # last event of every object that changed in the last 5 s while a fleet started; rayscale's
    # handlers keep what they need in the indexes, so the task may go soon.
    settings.queueing.idle_timeout = IDLE_WORKER_SECONDS
    settings.watching.label_selectors["services"] = L.RAY_CLUSTER
    # --cluster-selector is applied here, not by the API server: a RayCluster whose labels move it
    # to another shard must be seen leaving (and one that is deleted told apart from one that is
    # another shard's, for its requests and virtual clusters), so the watch delivers every
    # RayCluster of the watched namespaces and the index keeps only this shard's (docs/scaling.md).

    api = await make_api_client(qps=runtime.kube_api_qps, burst=runtime.kube_api_burst, fence=WRITE_FENCE)
    runtime.recorder = EventRecorder(api)
    runtime.recorder.start()
    if runtime.metrics is None:  # `rayscale run` serves them before the leader election
        runtime.metrics = Metrics(process_registry())
    metrics = runtime.metrics
    source = IndexSource(runtime)
    runtime.health = WatchHealth(api, runtime.namespaces, source.resource_versions)
    runtime.tasks = [asyncio.create_task(runtime.health.run(), name="rayscale-watch-health")]
    runtime.pods = PodIndex(functools.partial(pod_changed, runtime))
    # Its own client: each watch stream holds a connection for minutes, outside the write pool
    # and the rate limit (a LIST per stream at start, then one request per stream every 5 min).
    runtime.pod_informer = Informer(
        await make_api_client(connections=0),
        runtime.pods,
        label_selector=L.RAY_CLUSTER,
        namespaces=runtime.namespaces,
    )
    runtime.tasks.append(asyncio.create_task(_informing(runtime.pod_informer), name="rayscale-pod-watch"))
    if runtime.run_controller:
        runtime.controller = RayClusterController(
            api, source, runtime.recorder, runtime.config, observer=metrics.queue("raycluster")
        )
        runtime.tasks.append(
            asyncio.create_task(_once_indexed(runtime, runtime.controller.run), name="rayscale-controller")
        )
    if runtime.autoscaler_config is not None:
        runtime.autoscaler = Autoscaler(
            api, source, runtime.recorder, runtime.autoscaler_config, metrics=metrics
        )
        runtime.tasks.append(
            asyncio.create_task(_once_indexed(runtime, runtime.autoscaler.run), name="rayscale-autoscaler")
        )
    runtime.api = api
    log.debug("garbage collector settled: %d objects frozen", gc_tuning.settle())
    runtime.tasks.append(asyncio.create_task(gc_tuning.collect_on_a_clock(), name="rayscale-gc"))


async def _informing(informer: Informer) -> None:
    try:
        await informer.run()
    finally:
        await informer.api.close()


async def _once_indexed(runtime: Runtime, work: Callable[[], Awaitable[None]]) -> None:
    """Run `work` once every index is whole: the pods listed, and kopf's indexes listed (kopf calls
    no handler before). Until then an index may lack objects that exist, and a reconcile would
    create pods that are already there."""
    assert runtime.pod_informer is not None
    await runtime.pod_informer.synced.wait()
    await runtime.indexed.wait()
    await work()


@kopf.on.login(registry=registry)
def login(**kwargs: Any) -> Any:
    """In-cluster service account first, else $KUBECONFIG / ~/.kube/config."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.cleanup(registry=registry)
async def shutdown(memo: Any, **_: Any) -> None:
    runtime: Runtime = memo.runtime
    if runtime.hand_over is not None:
        await runtime.hand_over()
    for task in runtime.tasks:
        task.cancel()
    for task in runtime.tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    try:
        if runtime.recorder is not None:
            with contextlib.suppress(Fenced):  # a replica that lost the Lease posts no more Events
                await runtime.recorder.stop()
    finally:
        if runtime.api is not None:
            await runtime.api.close()


@kopf.index(*RAYCLUSTERS, registry=registry)
async def rayclusters_by_name(
    namespace: str | None, name: str, body: kopf.Body, memo: Any, **_: Any
) -> dict[Any, Any]:
    if not memo.runtime.scope.owns(body):
        return {}
    obj = dict(body)
    obj["metadata"] = {k: v for k, v in body.metadata.items() if k != "managedFields"}
    return {(namespace or "", name): obj}


@kopf.index(*RAYCLUSTERS, registry=registry)
async def foreign_rayclusters(
    namespace: str | None, name: str, body: kopf.Body, memo: Any, **_: Any
) -> dict[Any, Any]:
    """The RayClusters of other shards (--cluster-selector): only that they exist, and their
    resourceVersion (the watch-health check compares it)."""
    if memo.runtime.scope.owns(body):
        return {}
    return {(namespace or "", name): body.metadata.get("resourceVersion", "")}


@kopf.index("services", labels={L.RAY_CLUSTER: kopf.PRESENT}, registry=registry)
async def ray_services_by_cluster(
    namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[Any, Any]:
    return {(namespace or "", labels[L.RAY_CLUSTER]): pods.slim(body, ("clusterIP", "ports", "type"))}


@kopf.index(*RAYRESOURCEREQUESTS, registry=registry)
async def rayresourcerequests_by_cluster(namespace: str | None, body: kopf.Body, **_: Any) -> dict[Any, Any]:
    meta = body.metadata
    slim = {
        "metadata": {k: meta[k] for k in (
            "name", "namespace", "uid", "generation", "deletionTimestamp", "resourceVersion"
        ) if k in meta},
        "spec": dict(body.spec),
        "status": dict(body.status),
    }  # fmt: skip
    return {(namespace or "", str(body.spec.get("clusterName", ""))): slim}


@kopf.index(*RAYVIRTUALCLUSTERS, registry=registry)
async def rayvirtualclusters_by_cluster(namespace: str | None, body: kopf.Body, **_: Any) -> dict[Any, Any]:
    meta = body.metadata
    slim = {
        "metadata": {k: meta[k] for k in (
            "name", "namespace", "uid", "generation", "deletionTimestamp", "resourceVersion", "finalizers"
        ) if k in meta},
        "spec": dict(body.spec),
        "status": dict(body.status),
    }  # fmt: skip
    return {(namespace or "", str(body.spec.get("rayClusterName", ""))): slim}


def _attach(memo: Any, kwargs: Mapping[str, Any]) -> Runtime:
    runtime: Runtime = memo.runtime
    if not runtime.indexes:
        for name in INDEXES:
            runtime.indexes[name] = kwargs[name]
        runtime.indexed.set()
    return runtime


def _mark(
    memo: Any, kwargs: Mapping[str, Any], key: ClusterKey, reason: str, *, controller: bool = True
) -> None:
    """Mark `key` for the controller (unless `controller` is False) and the autoscaler, which
    records `reason` (the kind of object that changed) as its next round's trigger. Nothing for
    another shard's RayCluster (its pods, requests, virtual clusters)."""
    runtime = _attach(memo, kwargs)
    if not IndexSource(runtime).foreign(key):
        _hand(runtime, key, reason, controller=controller)


def _hand(runtime: Runtime, key: ClusterKey, reason: str, *, controller: bool = True) -> None:
    if controller and runtime.controller is not None:
        runtime.controller.mark(key)
    if runtime.autoscaler is not None:
        runtime.autoscaler.mark(key, reason)


@kopf.on.event(*RAYCLUSTERS, registry=registry)
async def raycluster_event(
    type: str | None, namespace: str | None, name: str, body: kopf.Body, memo: Any, **kwargs: Any
) -> None:
    """A RayCluster of this shard is marked; one that was and is no longer (deleted, or its labels
    moved it to another shard) is marked once more, so that both halves let go of it (its series
    go with it); another shard's is not touched."""
    runtime: Runtime = memo.runtime
    key = (namespace or "", name)
    ours = type != "DELETED" and runtime.scope.owns(body)
    if not ours and key not in runtime.owned:
        return
    if runtime.run_controller and runtime.metrics is not None:  # series of the RayCluster controller
        runtime.metrics.raycluster_watched(body, deleted=not ours)
    controller = True
    if ours:
        runtime.owned.add(key)
        facts = reconciled_facts(body)
        controller = runtime.facts.get(key) != facts
        runtime.facts[key] = facts
    else:
        runtime.owned.discard(key)
        runtime.facts.pop(key, None)
        if type != "DELETED":
            log.info(
                "RayCluster %s/%s left this operator's scope (%s): let go", *key, runtime.scope.describe()
            )
    _hand(_attach(memo, kwargs), key, "RayCluster", controller=controller)


def reconciled_facts(body: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a RayCluster, when it changes, the controller reconciles: its spec (generation),
    labels, annotations, finalizers, deletion, and its status's state and conditions (a step such
    as suspending acts on the condition the step before wrote). A status write that moves only
    the worker counts or times (most of this controller's own) is not reconciled; the autoscaler
    is told of every change."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    return (
        meta.get("uid"),
        meta.get("generation"),
        meta.get("deletionTimestamp"),
        dict(meta.get("labels") or {}),
        dict(meta.get("annotations") or {}),
        list(meta.get("finalizers") or []),
        status.get("state"),
        [(c.get("type"), c.get("status"), c.get("reason")) for c in status.get("conditions") or []],
    )


def pod_changed(runtime: Runtime, key: ClusterKey) -> None:
    """A pod of `key` came, changed or went (the pod informer's call)."""
    if not IndexSource(runtime).foreign(key):
        _hand(runtime, key, "pod")


@kopf.on.event("services", labels={L.RAY_CLUSTER: kopf.PRESENT}, registry=registry)
async def ray_service_event(
    namespace: str | None, labels: Mapping[str, str], memo: Any, **kwargs: Any
) -> None:
    runtime = _attach(memo, kwargs)
    key = (namespace or "", labels[L.RAY_CLUSTER])
    if runtime.controller is not None and not IndexSource(runtime).foreign(key):
        runtime.controller.mark(key)


@kopf.on.event(*RAYRESOURCEREQUESTS, registry=registry)
async def rayresourcerequest_event(namespace: str | None, body: kopf.Body, memo: Any, **kwargs: Any) -> None:
    key = (namespace or "", str(body.spec.get("clusterName", "")))
    _mark(memo, kwargs, key, "RayResourceRequest", controller=False)


@kopf.on.event(*RAYVIRTUALCLUSTERS, registry=registry)
async def rayvirtualcluster_event(namespace: str | None, body: kopf.Body, memo: Any, **kwargs: Any) -> None:
    key = (namespace or "", str(body.spec.get("rayClusterName", "")))
    _mark(memo, kwargs, key, "RayVirtualCluster", controller=False)


@kopf.on.probe(id="watch", registry=registry)
async def watch_probe(memo: Any, **_: Any) -> str:
    runtime: Runtime = memo.runtime
    for problem in (
        runtime.health.verdict() if runtime.health is not None else None,
        runtime.pod_informer.problem() if runtime.pod_informer is not None else None,
    ):
        if problem:
            raise kopf.PermanentError(problem)
    for task in runtime.tasks:
        if task.done():
            raise kopf.PermanentError(f"{task.get_name()} stopped")
    return "ok"
