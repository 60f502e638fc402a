"""One operator for a fleet: many RayClusters at once on the local control plane (kwok fake nodes).

    python -m bench.operator_fleet [--clusters 1000] [--workers 9] [--write-docs] [--note TEXT]

The scale target: 1,000 RayClusters / 10,000 pods on one operator, no cluster waiting
behind another, RSS < 300 MB. One `rayscale run --namespace NS` (default settings) in a fresh
namespace; the bench adds enough fake kwok nodes for every pod (32 CPU, 110 pods each, removed at
the end), creates the RayClusters (a head and `--workers` workers, 100m CPU / 128Mi pods) in
parallel, and follows the pods with one watch. It reports the seconds until all pods exist and
until all are Running; per cluster, the seconds from the start until its own pods all exist and
all run (median, p90, max: a cluster that waits behind others shows in the tail); and the
operator's resident memory (VmRSS once all pods run, VmHWM peak) from /proc.

The cluster is the local control plane of `make cluster-up`, else a fresh one that is stopped at
the end, or the one RAYSCALE_TARGET_KUBECONFIG names, checked (hack/localk8s/target.py); never
$KUBECONFIG's. --write-docs rewrites the "Operator at fleet scale" section of
docs/benchmarks.md, keeping every other section.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import statistics
import sys
import time
from collections.abc import Mapping
from typing import Any

from hack.localk8s import testcluster
from kubernetes_asyncio.client.exceptions import ApiException

from bench.docs import Block, measured, paragraphs
from bench.operator_scale import (
    DOCS,
    ROOT,
    PodWatch,
    create_namespace,
    delete_namespace,
    fleet_figures,
    kube_apis,
    measured_main,
    operator,
    raycluster,
    warm_up,
)
from bench.procstat import cpu_seconds, memory_kib
from rayscale.api.names import RAYCLUSTER

TITLE = "## Operator at fleet scale"
COMMAND = ".venv/bin/python -m bench.operator_fleet --write-docs"
BLOCK = Block("bench.operator_fleet", "bench/results/fleet.json")
NODE_POOL = "bench-fleet"
PODS_PER_NODE = 110
CREATE_CONCURRENCY = 50  # RayCluster create calls in flight


class FleetWatch(PodWatch):
    """PodWatch that keeps per-cluster tallies, so each event costs O(1) however many pods exist.

    `sizes`: each followed cluster's pod count; a cluster's pods all exist (all run) once that many
    of its pods were seen (seen Running). Milestones "created" and "running": every cluster's did.
    """

    def __init__(self, core: Any, namespace: str, sizes: Mapping[str, int]) -> None:
        super().__init__(core, namespace)
        self.sizes = dict(sizes)
        self.clusters = set(sizes)
        self.created: dict[str, set[str]] = {c: set() for c in self.clusters}
        self.running: dict[str, set[str]] = {c: set() for c in self.clusters}
        self.bound: dict[str, set[str]] = {c: set() for c in self.clusters}
        self.all_bound: dict[str, float] = {}  # cluster -> when its pods all had a node
        self.all_created: dict[str, float] = {}  # cluster -> when its pods all existed
        self.all_running: dict[str, float] = {}

    def _set(self, pod: dict[str, Any]) -> None:
        super()._set(pod)
        meta = pod["metadata"]
        cluster = (meta.get("labels") or {}).get("ray.io/cluster")
        if cluster not in self.clusters or meta.get("deletionTimestamp"):
            return
        now = time.monotonic()
        stages = (
            (True, self.created, self.all_created),
            (bool((pod.get("spec") or {}).get("nodeName")), self.bound, self.all_bound),
            ((pod.get("status") or {}).get("phase") == "Running", self.running, self.all_running),
        )
        for reached, seen, all_at in stages:
            if reached:
                seen[cluster].add(meta["name"])
                if len(seen[cluster]) >= self.sizes[cluster]:
                    all_at.setdefault(cluster, now)

    def _update(self) -> None:
        now = time.monotonic()
        if len(self.all_created) == len(self.clusters):
            self.reached.setdefault("created", now)
        if len(self.all_running) == len(self.clusters):
            self.reached.setdefault("running", now)
        super()._update()  # the registered milestones (the warm-up); each is checked until reached


def fake_nodes(count: int) -> list[dict[str, Any]]:
    """`count` kwok nodes of 32 CPU / 64Gi / 110 pods, labelled as the bench's own pool.

    A pod takes 200m CPU to the scheduler (its 100m container, but the injected wait-gcs-ready
    init container asks for 200m), so 110 pods fit in 22 CPU.
    """
    names = [f"kwok-{NODE_POOL}-{i}" for i in range(count)]
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "type": "kwok",
                    "rayscale.io/node-pool": NODE_POOL,
                },
                "annotations": {"kwok.x-k8s.io/node": "fake"},
            },
            "spec": {"providerID": f"kwok://{name}"},
            "status": {
                "capacity": {"cpu": "32", "memory": "64Gi", "pods": str(PODS_PER_NODE)},
                "allocatable": {"cpu": "32", "memory": "64Gi", "pods": str(PODS_PER_NODE)},
            },
        }
        for name in names
    ]


@contextlib.asynccontextmanager
async def extra_nodes(core: Any, count: int) -> Any:
    """Create the bench's fake nodes (and wait until kwok has them Ready); delete them afterwards."""
    selector = f"rayscale.io/node-pool={NODE_POOL}"
    try:

        async def create(body: dict[str, Any]) -> None:
            with contextlib.suppress(ApiException):  # left over from an interrupted run
                await core.create_node(body)

        await asyncio.gather(*(create(body) for body in fake_nodes(count)))
        deadline = time.monotonic() + 120
        while True:
            nodes = (await core.list_node(label_selector=selector)).items
            ready = [
                n
                for n in nodes
                if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
            ]
            if len(ready) >= count:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(ready)} of {count} fake nodes Ready after 120s")
            await asyncio.sleep(0.5)
        yield
    finally:
        with contextlib.suppress(ApiException):
            await core.delete_collection_node(label_selector=selector)


def spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]
    return {"median": statistics.median(ordered), "p90": p90, "max": ordered[-1]}


async def fleet(
    cluster: testcluster.ClusterHandle, core: Any, objects: Any, clusters: int, workers: int, limit: float
) -> dict[str, Any]:
    names = [f"rc-{i:04d}" for i in range(clusters)]
    per_cluster = 1 + workers
    pods = clusters * per_cluster
    ns = await create_namespace(core, "bench-fleet")
    try:
        async with extra_nodes(core, math.ceil(pods / 100)):
            with operator(cluster, ns) as proc:
                watch = FleetWatch(core, ns, dict.fromkeys(names, per_cluster))
                task = asyncio.create_task(watch.run())
                try:
                    await asyncio.wait_for(watch.synced.wait(), timeout=60)
                    await warm_up(objects, watch, task, ns)
                    baseline = memory_kib(proc.pid)
                    cpu_before = cpu_seconds(proc.pid)
                    gate = asyncio.Semaphore(CREATE_CONCURRENCY)

                    async def create(name: str) -> None:
                        async with gate:
                            body = raycluster(name, workers)
                            await objects.create_namespaced_custom_object(*RAYCLUSTER.at(ns), body)

                    start = time.monotonic()
                    await asyncio.gather(*(create(n) for n in names))
                    crs = time.monotonic() - start
                    print(f"{clusters} RayClusters created in {crs:.1f}s", flush=True)
                    await watch.wait(["created"], start + limit, task)
                    print(f"{pods} pods created in {watch.reached['created'] - start:.1f}s", flush=True)
                    await watch.wait(["running"], start + limit, task)
                    print(f"{pods} pods Running in {watch.reached['running'] - start:.1f}s", flush=True)
                    settled = memory_kib(proc.pid)
                    cpu = cpu_seconds(proc.pid) - cpu_before
                finally:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
                await delete_namespace(core, objects, ns, limit=900)
    finally:
        with contextlib.suppress(Exception):
            await core.delete_namespace(ns)
    return fleet_figures(clusters, workers, pods, crs, watch.reached, start) | {
        "cluster_created": spread([t - start for t in watch.all_created.values()]),
        "cluster_running": spread([t - start for t in watch.all_running.values()]),
        "operator_cpu_seconds": cpu,
        "rss_idle_mib": baseline["VmRSS"] / 1024,
        "rss_mib": settled["VmRSS"] / 1024,
        "rss_peak_mib": settled["VmHWM"] / 1024,
    }


# --------------------------------------------------------------------------- docs


def render(r: dict[str, Any]) -> str:
    f = r["fleet"]
    about = (
        f"One `rayscale run --namespace NS` (default settings: 16 clusters reconciled in parallel,"
        f" client rate limit 100 requests/s, burst 200) on the local control plane (Kubernetes"
        f" {r['kubernetes']}, kwok fake nodes) is handed {f['clusters']:,} RayClusters of a head and"
        f" {f['workers']} workers ({f['pods']:,} pods; 100m CPU / 128Mi containers, 200m CPU with the"
        " injected wait-gcs-ready init container), created 50 at a time."
        " The bench adds fake nodes of 32 CPU / 110 pods for them. Times run from the first create call"
        " and come from one watch on the namespace's pods. Per cluster: from the start until that"
        " cluster's own pods all exist / all run; a cluster kept waiting behind the others would show"
        " as a long tail. Memory is the operator process's resident set from /proc. One run."
    )
    cc, cr = f["cluster_created"], f["cluster_running"]
    peak_mb = f["rss_peak_mib"] * 1.048576
    lines = [
        *paragraphs(TITLE, about, measured(r, f"`make bench-fleet` (or `{COMMAND}`)")),
        "| what | seconds or MiB |",
        "|---|---:|",
        f"| {f['clusters']:,} RayClusters created (API calls returned) | {f['crs_seconds']:.1f} s |",
        f"| all {f['pods']:,} pods created | {f['created_seconds']:.1f} s |",
        f"| all {f['pods']:,} pods Running | {f['running_seconds']:.1f} s |",
        f"| per cluster, its pods created: median / p90 / max | {cc['median']:.1f} / {cc['p90']:.1f} /"
        f" {cc['max']:.1f} s |",
        f"| per cluster, its pods Running: median / p90 / max | {cr['median']:.1f} / {cr['p90']:.1f} /"
        f" {cr['max']:.1f} s |",
        *(
            [f"| operator CPU time until every pod ran | {f['operator_cpu_seconds']:.0f} s |"]
            if "operator_cpu_seconds" in f
            else []
        ),
        f"| operator RSS before the clusters (one warm-up cluster) | {f['rss_idle_mib']:.0f} MiB |",
        f"| operator RSS with every pod Running / peak | {f['rss_mib']:.0f} / {f['rss_peak_mib']:.0f} MiB |",
        "",
        *paragraphs(
            "",
            f"That is {f['pods'] / f['created_seconds']:.0f} pods/s created across the fleet. The"
            " per-cluster spread is the API throughput: every pod costs a create and an Event under"
            " the client's rate limit, and clusters are reconciled 16 at a time in the order they"
            " came, so a cluster created later gets its pods later.",
            f"RSS with {f['pods']:,} pods: {peak_mb:.0f} MB at its peak; the target is"
            f" < 300 MB: {'met' if peak_mb < 300 else 'not met'}.",
        )[2:],
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


async def run(cluster: testcluster.ClusterHandle, args: argparse.Namespace) -> dict[str, Any]:
    async with kube_apis(cluster) as (core, objects):
        return {"fleet": await fleet(cluster, core, objects, args.clusters, args.workers, args.timeout)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=1000, help="RayClusters")
    parser.add_argument("--workers", type=int, default=9, help="workers per RayCluster")
    parser.add_argument("--timeout", type=float, default=1800, help="deadline, seconds")
    return measured_main(
        parser, argv, ROOT / BLOCK.source, run, lambda results: BLOCK.write(DOCS, render(results))
    )


if __name__ == "__main__":
    sys.exit(main())
