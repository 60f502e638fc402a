"""What must hold while Ray itself fails under a scaling cluster, checked on every event as it arrives.

`RayLedger` follows the worker pods of one RayCluster and the RayCluster itself (two watches on
the real API server, fed to it event by event) against what the test knows of Ray: which pods run
an actor of the test right now (`busy`, kept up to date by `BusyTracker` from the GCS and the
bridge), which pods the fault broke (`killed`), when Ray's state could not be known
(`blind`), and when the demand went down (`released`). At each event it checks:

- **no busy node drained or removed**: a pod whose Ray node runs an actor of the test is never
  named in ``workersToDelete``, marked for deletion or deleted; and (sampled by `BusyTracker`
  every 0.25 s) its Ray node is never ``DRAINING``;
- **no healthy worker removed**: a worker pod is removed (named in ``workersToDelete``, marked for
  deletion or deleted, whichever the watches see first) only if the fault broke it (its raylet
  was killed: it may go once, as ``NODE_DEAD``), or as expected scale-down: it is not busy, the
  demand went down at T, and the removal comes no earlier than T + the group's idle timeout.
  Any other removal is a violation: a pod whose Ray node is gone because the head restarted is
  healthy (its raylet comes back), and so is every pod while Ray's state is unknown;
- **no worker removed while Ray's state is unknown**: no removal at all in a `blind` window (the
  GCS frozen), whatever the pod;
- **no pod created twice for one replica slot**: the worker pods ever created never exceed the
  most workers the demand needed at once, plus one replacement per pod the fault broke;
- **no failed launch counted**: no group of the RayCluster shows ``backoffUntil``.

Convergence (exactly the workers the demand needs, all Running, each with a live Ray node running
its actor) is the test's to poll; `RayLedger` gives it the live pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Protocol

from kubernetes_asyncio import client, watch

from rayscale.api.names import RAYCLUSTER
from rayscale.common.tasks import cancel_and_wait
from rayscale.ray.client import GcsClient, GcsError
from rayscale.ray.model import NodeStatus

WORKER = "worker"
SLACK = 0.5  # seconds: the test notes a release just before the tasks see it


@dataclasses.dataclass
class PodRecord:
    group: str
    created: float
    phase: str = ""
    terminating: float | None = None
    removed: float | None = None  # the first sign: workersToDelete, deletionTimestamp or DELETED
    how: str = ""


class RayLedger:
    def __init__(self, cluster: str, idle_timeout: float) -> None:
        self.cluster = cluster
        self.idle_timeout = idle_timeout
        self.pods: dict[str, PodRecord] = {}
        self.busy: dict[str, str] = {}  # pod -> the actor running on its Ray node
        self.killed: set[str] = set()  # pods whose Ray node the fault broke
        self.blind: list[tuple[float, float | None]] = []  # Ray's state unknown from .. to (None: now)
        self.released: float | None = None  # the demand last went down then
        self.releases: list[float] = []
        self.needed_peak = 0  # the most workers the demand needed at once
        self.violations: list[str] = []
        self.events = 0
        self.replicas: dict[str, int] = {}  # group -> spec replicas, as last seen

    # ---- what the test tells ----

    def need(self, workers: int) -> None:
        self.needed_peak = max(self.needed_peak, workers)

    def release(self) -> None:
        self.released = time.monotonic()
        self.releases.append(self.released)

    def kill(self, pod: str) -> None:
        self.killed.add(pod)

    def blind_from(self) -> None:
        self.blind.append((time.monotonic(), None))

    def blind_until(self) -> None:
        start, _ = self.blind[-1]
        self.blind[-1] = (start, time.monotonic())

    def set_busy(self, busy: dict[str, str]) -> None:
        self.busy = dict(busy)

    # ---- what the watches feed ----

    def _violate(self, text: str) -> None:
        if text not in self.violations:
            self.violations.append(text)

    def _removing(self, name: str, how: str, now: float) -> None:
        record = self.pods.get(name)
        if record is None or record.removed is not None:
            return
        record.removed, record.how = now, how
        if name in self.busy:
            self._violate(f"busy node removed: {name} ({how}) while it runs actor {self.busy[name]}")
        for start, end in self.blind:
            if start <= now and (end is None or now <= end):
                self._violate(f"worker removed while Ray's state is unknown: {name} ({how})")
                return
        if name in self.killed:
            return
        if self.released is None or now < self.released + self.idle_timeout - SLACK:
            since = (
                "the demand never went down"
                if self.released is None
                else f"{now - self.released:.1f}s after the demand went down, idle timeout "
                f"{self.idle_timeout:g}s"
            )
            self._violate(f"healthy worker removed: {name} ({how}), {since}")

    def pod_event(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get("ray.io/cluster") != self.cluster or labels.get("ray.io/node-type") != WORKER:
            return
        self.events += 1
        now = time.monotonic()
        name = str(meta["name"])
        if name not in self.pods:
            self.pods[name] = PodRecord(str(labels.get("ray.io/group", "")), now)
            allowed = self.needed_peak + len(self.killed)
            if len(self.pods) > allowed:
                self._violate(
                    f"pod created twice: {name} is worker pod {len(self.pods)}, at most {allowed} were "
                    f"needed ({self.needed_peak} for the demand, {len(self.killed)} broken by the fault)"
                )
        record = self.pods[name]
        record.phase = str((pod.get("status") or {}).get("phase") or "")
        if kind == "DELETED" or meta.get("deletionTimestamp"):
            record.terminating = record.terminating or now
            self._removing(name, "deleted" if kind == "DELETED" else "marked for deletion", now)

    def cluster_event(self, kind: str, body: dict[str, Any]) -> None:
        if (body.get("metadata") or {}).get("name") != self.cluster or kind == "DELETED":
            return
        self.events += 1
        now = time.monotonic()
        for spec in (body.get("spec") or {}).get("workerGroupSpecs") or []:
            self.replicas[str(spec.get("groupName"))] = int(spec.get("replicas") or 0)
            for name in (spec.get("scaleStrategy") or {}).get("workersToDelete") or []:
                self._removing(str(name), "named in workersToDelete", now)
        groups = (((body.get("status") or {}).get("autoscaler") or {}).get("groups")) or []
        for group in groups:
            if group.get("backoffUntil"):
                self._violate(
                    f"failed launch counted: group {group.get('name')} backs off until "
                    f"{group['backoffUntil']}"
                )

    def drained(self, pod: str, actor: str) -> None:
        self._violate(f"busy node drained: {pod}'s Ray node is DRAINING while it runs actor {actor}")

    # ---- what the test reads ----

    def live(self) -> dict[str, PodRecord]:
        """Worker pods neither removed nor terminating."""
        return {n: r for n, r in self.pods.items() if r.removed is None and r.terminating is None}

    def gone(self) -> list[str]:
        return sorted(n for n, r in self.pods.items() if r.removed is not None)

    def _after_release(self, at: float) -> str:
        releases = [r for r in self.releases if r <= at]
        return f"{at - releases[-1]:.1f}s after the demand went down" if releases else "before any release"

    def summary(self) -> dict[str, Any]:
        return {
            "pods_created": len(self.pods),
            "pods_removed": {
                n: f"{r.how}, {self._after_release(r.removed)}"
                for n, r in sorted(self.pods.items())
                if r.removed is not None
            },
            "broken_by_fault": sorted(self.killed),
            "events_checked": self.events,
        }


class Fed(Protocol):
    """What `feeding` feeds: a ledger of one RayCluster's pod and RayCluster events."""

    cluster: str

    def pod_event(self, kind: str, pod: dict[str, Any]) -> None: ...

    def cluster_event(self, kind: str, body: dict[str, Any]) -> None: ...


@contextlib.asynccontextmanager
async def feeding(ledger: Fed, api: client.ApiClient, namespace: str) -> AsyncIterator[None]:
    """Two watches (the cluster's worker pods, the RayCluster) fed to `ledger` event by event."""
    core, objects = client.CoreV1Api(api), client.CustomObjectsApi(api)
    listed = asyncio.Event()
    watches: list[watch.Watch] = []

    async def follow(
        lister: Callable[..., Any], args: tuple[Any, ...], feed: Callable[..., None], **kw: Any
    ) -> None:
        """List, then watch from the last resourceVersion seen; list again only after an error (an
        object gone meanwhile is fed as DELETED), so no event between two watches is lost."""
        version: str | None = None
        known: dict[str, dict[str, Any]] = {}
        while True:
            events = watch.Watch()
            watches.append(events)
            try:
                if version is None:
                    first = await lister(*args, _preload_content=False, **kw)
                    body = await first.json()
                    items = {i["metadata"]["name"]: i for i in body.get("items") or []}
                    for name in set(known) - set(items):
                        feed("DELETED", known.pop(name))
                    for item in items.values():
                        feed("ADDED", item)
                    known.update(items)
                    version = body["metadata"]["resourceVersion"]
                    listed.set()
                async for event in events.stream(
                    lister, *args, resource_version=version, timeout_seconds=60, **kw
                ):
                    obj = event["raw_object"]
                    if event["type"] == "ERROR":  # e.g. 410 Gone: list again
                        version = None
                        break
                    version = obj["metadata"].get("resourceVersion", version)
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        name = obj["metadata"]["name"]
                        if event["type"] == "DELETED":
                            known.pop(name, None)
                        else:
                            known[name] = obj
                        feed(event["type"], obj)
            except (TimeoutError, client.ApiException, OSError, ValueError):
                version = None
                await asyncio.sleep(0.5)  # list and watch again
            finally:
                await events.close()

    selector = f"ray.io/cluster={ledger.cluster}"
    rayclusters = RAYCLUSTER.at(namespace)
    tasks = [
        asyncio.create_task(
            follow(core.list_namespaced_pod, (namespace,), ledger.pod_event, label_selector=selector)
        ),
        asyncio.create_task(follow(objects.list_namespaced_custom_object, rayclusters, ledger.cluster_event)),
    ]
    try:
        await asyncio.wait_for(listed.wait(), 30)
        yield
    finally:
        for events in watches:
            events.stop()
        await cancel_and_wait(tasks)


# ---------------------------------------------------------------------------- busy nodes


class BusyTracker:
    """Which pods run an actor of the test, every 0.25 s from the GCS, into `ledger.busy`; a busy
    pod's Ray node seen ``DRAINING`` is reported to the ledger.

    An actor the test made (`add`) and has not killed (`release`) is busy on the pod of its node
    while the GCS says it is ``ALIVE`` there, the node is not ``DEAD``, and the pod's Ray worker
    process has not exited since the actor was first seen there (the raylet was killed, or gave up
    on a lost GCS: the bridge's history says so, before the GCS knows). While the GCS does not
    answer the last view stands; an actor the GCS no longer lists (a new Ray session) runs nowhere.
    """

    def __init__(self, ledger: RayLedger, gcs_address: str, exits: Callable[[str], Iterable[float]]) -> None:
        self.ledger = ledger
        self.gcs_address = gcs_address
        self.exits = exits  # pod -> when its Ray worker process exited (the bridge's history)
        self.actors: dict[str, bool] = {}  # name -> released
        self.placed: dict[str, tuple[str, float]] = {}  # name -> (node id, first seen ALIVE there)
        self.node_pod: dict[str, str] = {}  # node id -> pod, as ever seen
        self.dead: set[str] = set()
        self.views = 0  # GCS views read

    def add(self, name: str) -> None:
        self.actors[name] = False

    def release(self, name: str) -> None:
        self.actors[name] = True

    def wanted(self) -> list[str]:
        return sorted(n for n, released in self.actors.items() if not released)

    def running(self) -> dict[str, str]:
        """Actor name -> pod, for the actors not released that run now."""
        out: dict[str, str] = {}
        for name in self.wanted():
            if name not in self.placed:
                continue
            node, since = self.placed[name]
            pod = self.node_pod.get(node)
            if node in self.dead or pod is None or any(at > since for at in self.exits(pod)):
                continue
            out[name] = pod
        return out

    async def poll(self, gcs: GcsClient) -> None:
        try:
            state = await gcs.get_cluster_resource_state()
            actors = await gcs.get_all_actor_info()
        except GcsError:
            await gcs.close()  # the next call dials afresh
            return
        self.views += 1
        for node in state.nodes:
            if node.instance_id:
                self.node_pod[node.node_id] = node.instance_id
            if node.status is NodeStatus.DEAD:
                self.dead.add(node.node_id)
        now = time.monotonic()
        alive = {a.name: a.node_id for a in actors if a.state == "ALIVE" and a.node_id and a.name}
        for name in self.actors:
            where = alive.get(name)
            if where is None:
                self.placed.pop(name, None)
            elif self.placed.get(name, ("", 0.0))[0] != where:
                self.placed[name] = (where, now)
        busy = {pod: name for name, pod in self.running().items()}
        self.ledger.set_busy(busy)
        for node in state.nodes:
            if node.status is NodeStatus.DRAINING and node.instance_id in busy:
                self.ledger.drained(node.instance_id, busy[node.instance_id])

    async def run(self) -> None:
        gcs = GcsClient(self.gcs_address, timeout=1.5, retries=0)
        try:
            while True:
                await self.poll(gcs)
                # Between GCS views (which may hang while the GCS is frozen), exits still count.
                self.ledger.set_busy({pod: name for name, pod in self.running().items()})
                await asyncio.sleep(0.25)
        finally:
            await gcs.close()

    @contextlib.asynccontextmanager
    async def tracking(self) -> AsyncIterator[BusyTracker]:
        task = asyncio.create_task(self.run())
        try:
            yield self
        finally:
            await cancel_and_wait([task])
