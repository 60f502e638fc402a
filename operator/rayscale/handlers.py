"""kopf wiring: startup (the informers and their indexes, the controller, the autoscaler), cleanup,
login, the liveness probe; and what each watch event does: mark its RayCluster dirty.

The RayClusters, Ray pods, Ray Services, RayResourceRequests and RayVirtualClusters are listed and
watched by informers of rayscale's own (rayscale.kube.informer) into indexes by RayCluster
(rayscale.kube.raycluster_index, rayscale.kube.by_cluster), not by kopf's resource handlers: they
cost a fraction of kopf's CPU per event. kopf runs the process: its start and stop, the API
login, the liveness endpoint.

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
from rayscale.kube.by_cluster import ByCluster, by_spec
from rayscale.kube.client import make_api_client
from rayscale.kube.events import EventRecorder
from rayscale.kube.informer import PODS, SERVICES, Informer, Kind, Obj
from rayscale.kube.raycluster_index import RayClusterIndex
from rayscale.kube.watchhealth import WatchHealth
from rayscale.metrics import Metrics, process_registry

log = logging.getLogger(__name__)
registry = kopf.OperatorRegistry()
RAYCLUSTERS = Kind("rayclusters", "ray.io", "v1")
RAYRESOURCEREQUESTS = Kind("rayresourcerequests", "rayscale.io", "v1alpha1")
RAYVIRTUALCLUSTERS = Kind("rayvirtualclusters", "rayscale.io", "v1alpha1")
# kopf retries a failed API request (its namespace watch too) after each of these waits, then gives
# up on it and starts over. kopf's default (1, 1, 2, 3, 5, 8, 13, 21 s) waits up to 21 s after an
# API server outage ended; these wait at most 2 s, for about the same minute in all.
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
    # The indexes the informers fill (`indexes`), the informers and their client
    clusters: RayClusterIndex | None = None
    pods: ByCluster | None = None
    services: ByCluster | None = None
    requests: ByCluster | None = None
    virtual_clusters: ByCluster | None = None
    informers: list[Informer] = dataclasses.field(default_factory=list)
    watch_api: Any = None
    tasks: list[asyncio.Task[None]] = dataclasses.field(default_factory=list)
    recorder: EventRecorder | None = None
    api: Any = None
    metrics: Metrics | None = None
    # With leader election: stop renewing and release the Lease (writes are fenced from then on).
    # Called first thing on a clean stop, so a standby takes over while this replica winds down.
    hand_over: Callable[[], Awaitable[None]] | None = None
    # Which RayClusters are this operator's (--cluster-selector; its namespaces are the informers')
    scope: Scope = dataclasses.field(default_factory=Scope)
    # What of each RayCluster handed to the controller and the autoscaler, when it changes, the
    # controller acts on (`reconciled_facts`). One that leaves the scope is handed over once more,
    # so that both let go of it.
    facts: dict[ClusterKey, tuple[Any, ...]] = dataclasses.field(default_factory=dict)


def indexes(runtime: Runtime) -> list[tuple[Kind, str, Any]]:
    """Give `runtime` its indexes; the (kind, label selector, index) of each informer to feed them."""
    runtime.clusters = RayClusterIndex(runtime.scope.owns, functools.partial(raycluster_changed, runtime))
    runtime.pods = ByCluster(functools.partial(pod_changed, runtime))
    runtime.services = ByCluster(functools.partial(service_changed, runtime), slim=slim_service)
    runtime.requests = ByCluster(
        functools.partial(request_changed, runtime, "RayResourceRequest"),
        cluster_of=by_spec("clusterName"),
        slim=functools.partial(slim_custom, ()),
    )
    runtime.virtual_clusters = ByCluster(
        functools.partial(request_changed, runtime, "RayVirtualCluster"),
        cluster_of=by_spec("rayClusterName"),
        slim=functools.partial(slim_custom, ("finalizers",)),
    )
    return [
        (RAYCLUSTERS, "", runtime.clusters),
        (PODS, L.RAY_CLUSTER, runtime.pods),
        (SERVICES, L.RAY_CLUSTER, runtime.services),
        (RAYRESOURCEREQUESTS, "", runtime.requests),
        (RAYVIRTUALCLUSTERS, "", runtime.virtual_clusters),
    ]


def slim_service(obj: Obj) -> dict[str, Any]:
    return pods.slim(obj, ("clusterIP", "ports", "type"))


def slim_custom(more: Sequence[str], obj: Obj) -> dict[str, Any]:
    """A RayResourceRequest or RayVirtualCluster: what the autoscaler reads of its metadata, its
    spec and status."""
    meta = obj.get("metadata") or {}
    keep = ("name", "namespace", "uid", "generation", "deletionTimestamp", "resourceVersion", *more)
    return {
        "metadata": {k: meta[k] for k in keep if k in meta},
        "spec": dict(obj.get("spec") or {}),
        "status": dict(obj.get("status") or {}),
    }


class IndexSource:
    """The controller's view of the cluster, read from the informers' indexes.

    A RayCluster outside this operator's `Scope` (another shard's) is not there, and neither are
    the RayResourceRequests and RayVirtualClusters bound to it: the autoscaler lets go of it
    without a word. A RayCluster that does not exist at all is not there either, but its requests
    and virtual clusters are: they are told so, as without shards.
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def cluster(self, key: ClusterKey) -> Mapping[str, Any] | None:
        clusters = self.runtime.clusters
        return clusters.owned.get(key) if clusters is not None else None

    def pods(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        return self.runtime.pods.of(key) if self.runtime.pods is not None else []

    def services(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        return self.runtime.services.of(key) if self.runtime.services is not None else []

    def foreign(self, key: ClusterKey) -> bool:
        """`key` is a RayCluster that exists and is another shard's."""
        clusters = self.runtime.clusters
        return clusters is not None and key in clusters.foreign and key not in clusters.owned

    def requests(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        if self.foreign(key) or self.runtime.requests is None:
            return []
        return self.runtime.requests.of(key)

    def virtual_clusters(self, key: ClusterKey) -> Sequence[Mapping[str, Any]]:
        if self.foreign(key) or self.runtime.virtual_clusters is None:
            return []
        return self.runtime.virtual_clusters.of(key)

    def cluster_keys(self) -> Sequence[ClusterKey]:
        return list(self.runtime.clusters.owned) if self.runtime.clusters is not None else []

    def resource_versions(self) -> dict[ClusterKey, str]:
        """Every RayCluster the watch delivered, this shard's or not, at its resourceVersion."""
        clusters = self.runtime.clusters
        if clusters is None:
            return {}
        out = dict(clusters.foreign)
        for key, body in clusters.owned.items():
            out[key] = str(body["metadata"].get("resourceVersion", ""))
        return out


@kopf.on.startup(registry=registry)
async def configure(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    runtime: Runtime = memo.runtime
    # kopf itself watches no resource: what it sends is its namespace watch (with -n patterns).
    settings.posting.level = logging.WARNING
    settings.posting.loggers = False
    settings.posting.reporting_component = "rayscale"
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.watching.inactivity_timeout = 70
    settings.networking.request_timeout = 30
    settings.networking.connect_timeout = 10
    settings.networking.error_backoffs = API_RETRY_BACKOFFS

    api = await make_api_client(qps=runtime.kube_api_qps, burst=runtime.kube_api_burst, fence=WRITE_FENCE)
    runtime.recorder = EventRecorder(api)
    runtime.recorder.start()
    if runtime.metrics is None:  # `rayscale run` serves them before the leader election
        runtime.metrics = Metrics(process_registry())
    metrics = runtime.metrics
    source = IndexSource(runtime)
    runtime.health = WatchHealth(api, runtime.namespaces, source.resource_versions)
    runtime.tasks = [asyncio.create_task(runtime.health.run(), name="rayscale-watch-health")]
    # The informers' own client: each watch stream holds a connection for minutes, outside the
    # write pool and the rate limit (a LIST per stream at start, then one request per stream every
    # 5 min). --cluster-selector is applied here, not by the API server: a RayCluster whose labels
    # move it to another shard must be seen leaving (and one that is deleted told apart from one
    # that is another shard's, for its requests and virtual clusters), so the RayCluster informer
    # keeps every RayCluster of the watched namespaces and its index tells them apart
    # (docs/scaling.md).
    runtime.watch_api = await make_api_client(connections=0)
    runtime.informers = [
        Informer(runtime.watch_api, index, kind=kind, label_selector=selector, namespaces=runtime.namespaces)
        for kind, selector, index in indexes(runtime)
    ]
    for informer in runtime.informers:
        runtime.tasks.append(
            asyncio.create_task(informer.run(), name=f"rayscale-{informer.kind.plural}-watch")
        )
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


async def _once_indexed(runtime: Runtime, work: Callable[[], Awaitable[None]]) -> None:
    """Run `work` once every index is whole: every informer has listed. Until then an index may
    lack objects that exist, and a reconcile would create pods that are already there."""
    for informer in runtime.informers:
        await informer.synced.wait()
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
        for api in (runtime.api, runtime.watch_api):
            if api is not None:
                await api.close()


def _hand(runtime: Runtime, key: ClusterKey, reason: str, *, controller: bool = True) -> None:
    """Mark `key` for the controller (unless `controller` is False) and the autoscaler, which
    records `reason` (the kind of object that changed) as its next round's trigger."""
    if controller and runtime.controller is not None:
        runtime.controller.mark(key)
    if runtime.autoscaler is not None:
        runtime.autoscaler.mark(key, reason)


def raycluster_changed(runtime: Runtime, key: ClusterKey, body: Mapping[str, Any] | None) -> None:
    """A RayCluster of this shard (the index keeps it) is marked; one that was and is no longer
    (deleted: `body` None, or its labels moved it to another shard) is marked once more, so that
    both halves let go of it (its series go with it); another shard's is not touched."""
    ours = body is not None and IndexSource(runtime).cluster(key) is not None
    if not ours and key not in runtime.facts:
        return
    if runtime.run_controller and runtime.metrics is not None:  # series of the RayCluster controller
        named = {"metadata": {"namespace": key[0], "name": key[1]}}
        runtime.metrics.raycluster_watched(body if body is not None else named, deleted=not ours)
    controller = True
    if ours:
        assert body is not None
        facts = reconciled_facts(body)
        controller = runtime.facts.get(key) != facts
        runtime.facts[key] = facts
    else:
        runtime.facts.pop(key, None)
        if body is not None:
            log.info(
                "RayCluster %s/%s left this operator's scope (%s): let go", *key, runtime.scope.describe()
            )
    _hand(runtime, key, "RayCluster", controller=controller)


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
    """A pod of `key` came, changed or went."""
    if not IndexSource(runtime).foreign(key):
        _hand(runtime, key, "pod")


def service_changed(runtime: Runtime, key: ClusterKey) -> None:
    """A Service of `key` came, changed or went: the controller's business only."""
    if runtime.controller is not None and not IndexSource(runtime).foreign(key):
        runtime.controller.mark(key)


def request_changed(runtime: Runtime, reason: str, key: ClusterKey) -> None:
    """A RayResourceRequest or RayVirtualCluster (`reason`) bound to `key` came, changed or went:
    the autoscaler's business only. Nothing for another shard's RayCluster."""
    if not IndexSource(runtime).foreign(key):
        _hand(runtime, key, reason, controller=False)


@kopf.on.probe(id="watch", registry=registry)
async def watch_probe(memo: Any, **_: Any) -> str:
    runtime: Runtime = memo.runtime
    problems = [runtime.health.verdict() if runtime.health is not None else None]
    problems += [informer.problem() for informer in runtime.informers]
    for problem in problems:
        if problem:
            raise kopf.PermanentError(problem)
    for task in runtime.tasks:
        if task.done():
            raise kopf.PermanentError(f"{task.get_name()} stopped")
    return "ok"
