"""The kopf operator: kopf watches rayscale's custom resources (RayClusters, RayResourceRequests,
RayVirtualClusters) and runs the process (startup, login, cleanup, the liveness probe). With the
autoscaler it watches the Nodes too, for their disruption notices (`rayscale.nodewatch`).

Each custom resource has an event handler (`@kopf.on.event`), which keeps the object (a slim copy)
in rayscale's index of its kind (`rayscale.kube.index_source.Indexes`) as it is listed, as it
changes, and drops it when it is deleted. The controller and the autoscaler wait until the indexes
hold every custom resource a LIST shows (`rayscale.kube.listing`, `Runtime.indexed`). The Ray pods
and Services are watched by informers of rayscale's own (`rayscale.kube.informer`) into the same
indexes: they are most of a fleet's events, and kopf's per-event machinery would cost a large share
of the CPU (docs/architecture.md, "The watches"). kopf writes nothing to the objects: no finalizer,
progress or diffbase annotation (no resource-changing handler; `NoDiffBase`).

No decisions are made here: an event only marks its RayCluster dirty
(`rayscale.controller.event_filter`); the controller's work queue runs one level-based reconcile
per cluster at a time (`rayscale.controller.runner`), and the autoscaler's queue one autoscaling
round (`rayscale.autoscaler.loop`). Both report to one Prometheus registry, served at /metrics
from a daemon thread (`rayscale.metrics`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from datetime import UTC, datetime
from typing import Any

import kopf

from rayscale import gc_tuning, loop_lag, nodewatch
from rayscale.api.names import RAYCLUSTER, RAYCRONJOB, RAYJOB, RAYRESOURCEREQUEST, RAYVIRTUALCLUSTER
from rayscale.autoscaler.loop import Autoscaler, AutoscalerConfig
from rayscale.common import labels as L
from rayscale.common.tasks import cancel_and_wait
from rayscale.controller.event_filter import EventFilter
from rayscale.controller.runner import ControllerConfig, RayClusterController
from rayscale.disruption.nodes import NodeNotices
from rayscale.disruption.notice import NoticeConfig
from rayscale.disruption.podslim import slim_pod
from rayscale.fence import WRITE_FENCE, Fenced
from rayscale.kube import kopf_views, listing
from rayscale.kube.by_cluster import ByCluster, by_spec, slim_custom, slim_service
from rayscale.kube.client import make_api_client
from rayscale.kube.events import EventRecorder
from rayscale.kube.index_source import Indexes, IndexSource
from rayscale.kube.informer import PODS, SERVICES, Informer
from rayscale.kube.raycluster_index import RayClusterIndex
from rayscale.kube.scope import Scope
from rayscale.kube.watchhealth import WatchHealth
from rayscale.metrics import Metrics, process_registry
from rayscale.rayjob.controller import RayJobController
from rayscale.rayjob.cron_controller import RayCronJobController
from rayscale.rayjob.index import RayJobIndex
from rayscale.rayjob.ray_link import RayJobRay

log = logging.getLogger(__name__)
registry = kopf.OperatorRegistry()
LIST_CHUNK = 500  # objects per page of kopf's LISTs
IDLE_WORKER_SECONDS = 0.5  # kopf's per-object task outlives its last event by this
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
    # The indexes kopf's handlers and the informers fill (`indexes`), the informers, their client
    indexes: Indexes | None = None
    marks: EventFilter | None = None
    informers: list[Informer] = dataclasses.field(default_factory=list)
    watch_api: Any = None
    # Set once the indexes hold every custom resource a LIST showed (`listing` waits for it).
    indexed: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    listing: asyncio.Task[None] | None = None
    tasks: list[asyncio.Task[None]] = dataclasses.field(default_factory=list)
    recorder: EventRecorder | None = None
    api: Any = None
    metrics: Metrics | None = None
    # With leader election: stop renewing and release the Lease (writes are fenced from then on).
    # Called first thing on a clean stop, so a standby takes over while this replica winds down.
    hand_over: Callable[[], Awaitable[None]] | None = None
    # Which RayClusters are this operator's (--cluster-selector; its namespaces are kopf's)
    scope: Scope = dataclasses.field(default_factory=Scope)
    # RayJobs, their submitter Jobs and head Services (kopf's handlers), and their controller
    rayjobs: RayJobIndex = dataclasses.field(default_factory=RayJobIndex)
    rayjob_controller: RayJobController | None = None
    rayjob_ray: RayJobRay | None = None
    raycronjob_controller: RayCronJobController | None = None
    disruption_notices: NoticeConfig = dataclasses.field(default_factory=NoticeConfig)  # --disruption-notice


def indexes(runtime: Runtime) -> Indexes:
    """Give `runtime` its indexes, and the event filter that marks the queues for their changes."""
    marks = runtime.marks = EventFilter(
        runtime.scope, metrics=runtime.metrics, run_controller=runtime.run_controller
    )
    changed = marks.request_changed
    runtime.indexes = Indexes(
        clusters=RayClusterIndex(runtime.scope.owns, marks.raycluster_changed),
        pods=ByCluster(marks.pod_changed, slim=slim_pod),  # with what disruption notices read
        services=ByCluster(marks.service_changed, slim=slim_service),
        requests=ByCluster(
            functools.partial(changed, RAYRESOURCEREQUEST.kind),
            cluster_of=by_spec("clusterName"),
            slim=functools.partial(slim_custom, ()),
        ),
        virtual_clusters=ByCluster(
            functools.partial(changed, RAYVIRTUALCLUSTER.kind),
            cluster_of=by_spec("rayClusterName"),
            slim=functools.partial(slim_custom, ("finalizers",)),
        ),
    )
    marks.source = IndexSource(runtime.indexes)
    return runtime.indexes


def _indexes(memo: Any) -> Indexes:
    runtime: Runtime = memo.runtime
    assert runtime.indexes is not None  # made by `configure`, before kopf watches
    return runtime.indexes


# ---- The custom resources: kopf's event handlers keep the indexes. --cluster-selector is applied
# by the index, not by the API server: a RayCluster whose labels move it to another shard must be
# seen leaving (and one that is deleted told apart from one that is another shard's, for its
# requests and virtual clusters), so every RayCluster of the watched namespaces is indexed, another
# shard's as its resourceVersion only (docs/scaling.md).


@kopf.on.event(*RAYCLUSTER.path, registry=registry)
async def raycluster_event(event: kopf.RawEvent, memo: Any, **_: Any) -> None:
    """A RayCluster listed, changed or deleted: the RayCluster index follows it (and a RayJob
    that made it is looked at again)."""
    _follow(event, _indexes(memo).clusters)
    controller = memo.runtime.rayjob_controller
    if controller is not None:
        controller.mark_cluster(event["object"])


# ---- RayJobs and their submitter Jobs (labelled ray.io/originated-from-crd=RayJob): few objects,
# kopf's own watches carry them. The RayJobs' head Services are an informer's (below), with the
# label as its selector: a kopf watch would decode every Service of the namespaces.
_MADE_BY_RAYJOB = {L.ORIGINATED_FROM_CRD: "RayJob"}


def _shard_kind(event: kopf.RawEvent, runtime: Runtime) -> str:
    """The event's type for this shard: a RayJob or RayCronJob whose labels the shard's
    ``--cluster-selector`` does not match is another shard's, and leaves this one's tables as if
    deleted (its RayCluster carries the RayJob's labels, so the same shard takes both)."""
    return str(event["type"] or "ADDED") if runtime.scope.owns(event["object"]) else "DELETED"


@kopf.on.event(*RAYJOB.path, registry=registry)
async def rayjob_event(event: kopf.RawEvent, memo: Any, **_: Any) -> None:
    memo.runtime.rayjobs.rayjob_event(_shard_kind(event, memo.runtime), event["object"])
    if memo.runtime.raycronjob_controller is not None:  # a RayCronJob's RayJob: look at it again
        memo.runtime.raycronjob_controller.rayjob_changed(event["object"])


@kopf.on.event(*RAYCRONJOB.path, registry=registry)
async def raycronjob_event(event: kopf.RawEvent, memo: Any, **_: Any) -> None:
    if memo.runtime.raycronjob_controller is not None:
        memo.runtime.raycronjob_controller.cronjob_event(_shard_kind(event, memo.runtime), event["object"])


@kopf.on.event("batch", "v1", "jobs", labels=_MADE_BY_RAYJOB, registry=registry)
async def submitter_event(event: kopf.RawEvent, memo: Any, **_: Any) -> None:
    memo.runtime.rayjobs.submitter_event(event["type"], event["object"])


@kopf.on.event(*RAYRESOURCEREQUEST.path, registry=registry)
async def rayresourcerequest_event(event: kopf.RawEvent, memo: Any, **_: Any) -> None:
    _follow(event, _indexes(memo).requests)


@kopf.on.event(*RAYVIRTUALCLUSTER.path, registry=registry)
async def rayvirtualcluster_event(event: kopf.RawEvent, memo: Any, **_: Any) -> None:
    _follow(event, _indexes(memo).virtual_clusters)


def _follow(event: kopf.RawEvent, index: RayClusterIndex | ByCluster) -> None:
    """The event's object (as decoded: kopf's views would resolve each read) into its index, or
    out of it when deleted."""
    if event["type"] == "DELETED":
        index.delete(event["object"])
    else:
        index.upsert(event["object"])


def _held(index: Indexes) -> list[tuple[tuple[str, str, str], Callable[[], Collection[tuple[str, str]]]]]:
    """What `listing.wait_indexed` compares with its LISTs: each custom resource and its index."""
    return [
        (RAYCLUSTER.path, index.clusters.keys),
        (RAYRESOURCEREQUEST.path, index.requests.keys),
        (RAYVIRTUALCLUSTER.path, index.virtual_clusters.keys),
    ]


class NoDiffBase(kopf.DiffBaseStorage):
    """No last-handled state: rayscale's resource handlers are event handlers, which need no diff
    (kopf's default deep-copies every object on every event to build one, and reads an annotation)."""

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        del body, extra_fields  # kopf's keywords; nothing is built from them
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        del body
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        del body, patch, essence  # nothing is kept


@kopf.on.startup(registry=registry)
async def configure(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    runtime: Runtime = memo.runtime
    # kopf made cheap for watching. Nothing written to the objects: no finalizer, progress or
    # diffbase annotation (rayscale has no resource-changing handler), and no diff built for one.
    # No Event posted from log messages. Each watch event freed once handled, not by the cyclic
    # collector (`kopf_views`).
    kopf_views.install()
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.posting.enabled = False
    settings.posting.reporting_component = "rayscale"
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.watching.inactivity_timeout = 70
    # kopf LISTs a resource when it starts watching it and again after a 410 Gone or a broken
    # stream: in pages, as client-go's reflector does, so that a large list is not decoded at once.
    settings.watching.chunk_size = LIST_CHUNK
    # kopf runs a task per object with events, which keeps the object's last watch event until it
    # exits, idle_timeout after that event (5 s by default); the handlers keep what they need in
    # the indexes, so the task may go soon.
    settings.queueing.idle_timeout = IDLE_WORKER_SECONDS
    settings.networking.request_timeout = 30
    settings.networking.connect_timeout = 10
    settings.networking.error_backoffs = API_RETRY_BACKOFFS

    if runtime.metrics is None:  # `rayscale run` serves them before the leader election
        runtime.metrics = Metrics(process_registry())
    metrics = runtime.metrics
    api = await make_api_client(
        qps=runtime.kube_api_qps,
        burst=runtime.kube_api_burst,
        fence=WRITE_FENCE,
        observe=metrics.kube_request,
    )
    runtime.recorder = EventRecorder(api)
    runtime.recorder.start()
    index = indexes(runtime)
    source = IndexSource(index)
    runtime.health = WatchHealth(
        api, runtime.namespaces, source.resource_versions, gone=index.clusters.forget
    )
    runtime.tasks = [asyncio.create_task(runtime.health.run(), name="rayscale-watch-health")]
    # The informers' own client: each watch stream holds a connection for minutes, outside the
    # write pool and the rate limit (a LIST per stream at start, then one request per stream every
    # 5 min).
    runtime.watch_api = await make_api_client(connections=0)
    runtime.informers = [
        Informer(
            runtime.watch_api, sink, kind=kind, label_selector=L.RAY_CLUSTER, namespaces=runtime.namespaces
        )
        for kind, sink in ((PODS, index.pods), (SERVICES, index.services))
    ]
    if runtime.run_controller:
        runtime.informers.append(
            Informer(
                runtime.watch_api,
                runtime.rayjobs,
                kind=SERVICES,
                label_selector=f"{L.ORIGINATED_FROM_CRD}=RayJob",
                namespaces=runtime.namespaces,
            )
        )
    for informer in runtime.informers:
        runtime.tasks.append(
            asyncio.create_task(informer.run(), name=f"rayscale-{informer.kind.plural}-watch")
        )
    runtime.listing = asyncio.create_task(_listed(runtime, api, index), name="rayscale-listing")
    marks = runtime.marks
    assert marks is not None
    if runtime.run_controller:
        runtime.controller = marks.controller = RayClusterController(
            api, source, runtime.recorder, runtime.config, observer=metrics.queue("raycluster"), creates=marks
        )
        runtime.tasks.append(
            asyncio.create_task(_once_indexed(runtime, runtime.controller.run), name="rayscale-controller")
        )
        allow = runtime.autoscaler_config is not None and runtime.autoscaler_config.allow_gcs_address_override
        runtime.rayjob_ray = RayJobRay(api, allow_gcs_address_override=allow)
        runtime.rayjob_controller = RayJobController(
            api,
            runtime.rayjobs,
            source,
            runtime.rayjob_ray,
            runtime.recorder,
            concurrency=runtime.config.rayjob_concurrency,
            observer=metrics.queue("rayjob"),
        )
        runtime.tasks.append(
            asyncio.create_task(
                _once_indexed(runtime, runtime.rayjob_controller.run), name="rayscale-rayjobs"
            )
        )
        cron = runtime.raycronjob_controller = RayCronJobController(
            api, runtime.rayjobs, runtime.recorder, observer=metrics.queue("raycronjob")
        )
        runtime.tasks.append(
            asyncio.create_task(_once_indexed(runtime, cron.run), name="rayscale-raycronjobs")
        )
    if runtime.autoscaler_config is not None:
        notices = NodeNotices(runtime.disruption_notices, functools.partial(datetime.now, UTC))
        runtime.autoscaler = marks.autoscaler = Autoscaler(
            api, source, runtime.recorder, runtime.autoscaler_config, metrics=metrics, node_notices=notices
        )
        await nodewatch.start(registry, runtime.watch_api, notices, runtime.autoscaler.node_changed)
        if runtime.rayjob_ray is not None:  # the RayJobs' submissions read on the rounds' connections
            runtime.rayjob_ray.shared = runtime.autoscaler.link
        runtime.tasks.append(
            asyncio.create_task(_once_indexed(runtime, runtime.autoscaler.run), name="rayscale-autoscaler")
        )
    runtime.api = api
    log.debug("garbage collector settled: %d objects frozen", gc_tuning.settle())
    runtime.tasks.append(asyncio.create_task(gc_tuning.collect_on_a_clock(), name="rayscale-gc"))
    runtime.tasks.append(asyncio.create_task(loop_lag.watch_lag(metrics.loop_lag), name="rayscale-loop-lag"))


async def _listed(runtime: Runtime, api: Any, index: Indexes) -> None:
    await listing.wait_indexed(api, runtime.namespaces, _held(index))
    runtime.indexed.set()


async def _once_indexed(runtime: Runtime, work: Callable[[], Awaitable[None]]) -> None:
    """Run `work` once every index is whole: kopf's event handlers have indexed every custom
    resource a LIST showed, every informer has listed. Until then an index may lack objects that
    exist, and a reconcile would create pods that are already there."""
    await runtime.indexed.wait()
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
    await cancel_and_wait([*runtime.tasks, *([runtime.listing] if runtime.listing is not None else [])])
    if runtime.rayjob_ray is not None:
        await runtime.rayjob_ray.close()
    try:
        if runtime.recorder is not None:
            with contextlib.suppress(Fenced):  # a replica that lost the Lease posts no more Events
                await runtime.recorder.stop()
    finally:
        for api in (runtime.api, runtime.watch_api):
            if api is not None:
                await api.close()


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
