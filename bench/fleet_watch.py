"""What the fleet autoscaling benchmark (bench/autoscaler_fleet.py) watches: the namespace's pods
and RayClusters indexed by cluster, and the clock of each wave of demand until the cluster's
`replicas` cover it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio import watch
from kubernetes_asyncio.client import ApiException

from rayscale.api.names import RAYCLUSTER

MAX_WORKERS = 3  # replicas of each cluster's one group at most


@dataclass
class Wave:
    cluster: str
    at: float  # seconds after the start
    tasks: int
    started: float = 0.0  # monotonic, once sent
    patched: float | None = None  # monotonic, when replicas covered it
    needed: bool = False  # more workers than the cluster had asked for


@dataclass
class Fleet:
    """The namespace's pods and RayClusters as two watches see them, indexed by cluster."""

    running: dict[str, set[str]] = field(default_factory=dict)  # Running worker pods, not deleting
    heads: set[str] = field(default_factory=set)  # clusters whose head runs
    replicas: dict[str, int] = field(default_factory=dict)
    open: dict[str, list[Wave]] = field(default_factory=dict)  # waves waiting for their patch
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def pod(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        cluster, name = labels.get("ray.io/cluster"), meta["name"]
        if cluster is None:
            return
        live = kind != "DELETED" and not meta.get("deletionTimestamp")
        running = live and (pod.get("status") or {}).get("phase") == "Running"
        if labels.get("ray.io/node-type") == "head":
            (self.heads.add if running else self.heads.discard)(cluster)
            self.changed.set()
            return
        workers = self.running.setdefault(cluster, set())
        (workers.add if running else workers.discard)(name)

    def cluster(self, kind: str, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        if kind == "DELETED":
            self.replicas.pop(name, None)
            return
        groups = (body.get("spec") or {}).get("workerGroupSpecs") or [{}]
        replicas = int(groups[0].get("replicas") or 0)
        self.replicas[name] = replicas
        waves = self.open.get(name)
        if waves:
            now = time.monotonic()
            for wave in [w for w in waves if replicas >= min(w.tasks, MAX_WORKERS)]:
                wave.patched = now
                waves.remove(wave)

    def workers(self, cluster: str) -> list[str]:
        return sorted(self.running.get(cluster, ()))


async def follow(fleet: Fleet, kind: str, list_fn: Any, *args: Any) -> None:
    """Keep `fleet` current from one watch; a refused or expired watch starts over."""
    handle = fleet.pod if kind == "pods" else fleet.cluster
    while True:
        try:
            async for event in watch.Watch().stream(list_fn, *args, allow_watch_bookmarks=True):
                if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    handle(event["type"], event["raw_object"])
            return
        except ApiException as exc:
            if exc.status not in (410, 429, 500, 503):
                raise
        await asyncio.sleep(0.5)  # the watch's retry interval


@contextlib.asynccontextmanager
async def watching(core: Any, objects: Any, ns: str, fleet: Fleet) -> AsyncIterator[Fleet]:
    tasks = [
        asyncio.create_task(follow(fleet, "pods", core.list_namespaced_pod, ns)),
        asyncio.create_task(
            follow(fleet, "clusters", objects.list_namespaced_custom_object, *RAYCLUSTER.at(ns))
        ),
    ]
    try:
        yield fleet
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def wait_heads(fleet: Fleet, names: list[str], limit: float) -> float:
    deadline = time.monotonic() + limit
    while len(fleet.heads.intersection(names)) < len(names):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(fleet.heads)} of {len(names)} heads Running after {limit:.0f}s")
        fleet.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(fleet.changed.wait(), timeout=5)
    return time.monotonic()
