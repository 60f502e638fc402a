"""The RayCluster controller at scale on the local control plane (kwok fake nodes).

    python -m bench.operator_scale [--write-docs] [--note TEXT] [--out FILE] [--docs-from FILE]

Two cases, each in a fresh namespace with its own `rayscale run --namespace NS` subprocess:

1. scale-up: one RayCluster (a head and one worker group) whose head is Running, patched from
   `replicas: 0` to 100: seconds from the patch until 100 worker pods exist, and until all
   100 are Running;
2. many clusters: 50 RayClusters of a head and 10 workers created in parallel: seconds until
   every create call returned, until all 550 pods exist, and until all are Running.

Every pod's Ray container asks for 100m CPU and 128Mi (200m CPU with its injected init container),
so all fit the fake nodes of hack/localk8s/nodes.yaml. Pods are
followed by one watch per namespace (raw JSON events, resumed on expiry, re-listed on 410);
each milestone is the first moment the watch shows it. Nothing sleeps a fixed time: every
wait has a deadline. The operator is started before the clock runs and is known to be
watching when a warm-up RayCluster (a head only, not counted) has its head Running.
Namespaces are deleted (while the operator still runs, so its finalizers are removed) and
waited for; the operator gets SIGTERM, then SIGKILL, and also dies with this process.

The cluster is the local control plane of `make cluster-up`, else a fresh one that is stopped
at the end, or the one RAYSCALE_TARGET_KUBECONFIG names, checked; never $KUBECONFIG's
(hack/localk8s/testcluster.py, target.py). --write-docs rewrites the "Operator on
the local control plane" section of docs/benchmarks.md, keeping every other section.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
from hack.localk8s import launcher, testcluster
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from bench import provenance
from bench.docs import Block, add_output_options, finish, measured, paragraphs
from rayscale.api.names import RAYCLUSTER, RAYRESOURCEREQUEST

ROOT = Path(__file__).resolve().parent.parent

IMAGE = "rayproject/ray:2.60.0"
POD_RESOURCES = {"cpu": "100m", "memory": "128Mi"}
DOCS = ROOT / "docs" / "benchmarks.md"
TITLE = "## Operator on the local control plane"
COMMAND = ".venv/bin/python -m bench.operator_scale --write-docs"
BLOCK = Block("bench.operator_scale", "bench/results/operator_scale.json")


# --------------------------------------------------------------------------- objects


def raycluster(name: str, replicas: int, max_replicas: int | None = None) -> dict[str, Any]:
    """A RayCluster: a head and one worker group `cpu`, every pod 100m CPU / 128Mi.

    The group's `maxReplicas` is `max_replicas`, else the larger of `replicas` and 100.
    """
    resources = {"requests": POD_RESOURCES, "limits": POD_RESOURCES}
    return {
        "apiVersion": RAYCLUSTER.api_version,
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "rayVersion": "2.60.0",
            "headGroupSpec": {
                "rayStartParams": {"num-cpus": "0"},
                "template": {
                    "spec": {"containers": [{"name": "ray-head", "image": IMAGE, "resources": resources}]}
                },
            },
            "workerGroupSpecs": [
                {
                    "groupName": "cpu",
                    "replicas": replicas,
                    "minReplicas": 0,
                    "maxReplicas": max(replicas, 100) if max_replicas is None else max_replicas,
                    "rayStartParams": {},
                    "template": {
                        "spec": {
                            "containers": [{"name": "ray-worker", "image": IMAGE, "resources": resources}]
                        }
                    },
                }
            ],
        },
    }


# --------------------------------------------------------------------------- pods, by watch


class PodWatch:
    """Every pod of a namespace as (labels, phase, deleting), kept current by a raw watch.

    `milestone(name, check)` registers a predicate over the pods; the first moment (monotonic)
    it holds is recorded in `reached[name]`.
    """

    def __init__(self, core: Any, namespace: str) -> None:
        self.core = core
        self.ns = namespace
        self.pods: dict[str, tuple[dict[str, str], str, bool]] = {}
        self.checks: dict[str, Callable[[PodWatch], bool]] = {}
        self.reached: dict[str, float] = {}
        self.changed = asyncio.Event()
        self.synced = asyncio.Event()

    def _set(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        phase = (pod.get("status") or {}).get("phase", "")
        self.pods[meta["name"]] = (meta.get("labels") or {}, phase, bool(meta.get("deletionTimestamp")))

    def _remove(self, name: str) -> None:
        """The pod `name` is gone (a DELETED event)."""
        self.pods.pop(name, None)

    def _reset(self) -> None:
        """Forget every pod: a full list follows (the start, or a 410 Gone)."""
        self.pods.clear()

    def _update(self) -> None:
        now = time.monotonic()
        for name, check in self.checks.items():
            if name not in self.reached and check(self):
                self.reached[name] = now
        self.changed.set()

    def milestone(self, name: str, check: Callable[[PodWatch], bool]) -> None:
        self.checks[name] = check
        self._update()

    def count(self, select: Callable[[dict[str, str]], bool], *, running: bool = False) -> int:
        return sum(
            1
            for labels, phase, deleting in self.pods.values()
            if not deleting and select(labels) and (phase == "Running" or not running)
        )

    async def run(self) -> None:
        rv: str | None = None
        while True:
            if rv is None:
                resp = await self.core.list_namespaced_pod(self.ns, _preload_content=False)
                try:
                    listing = json.loads(await resp.read())
                finally:
                    resp.release()
                self._reset()
                for pod in listing["items"]:
                    self._set(pod)
                rv = listing["metadata"]["resourceVersion"]
                self._update()
                self.synced.set()
            resp = await self.core.list_namespaced_pod(
                self.ns,
                watch=True,
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=60,
                _preload_content=False,
            )
            try:
                async for line in resp.content:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":  # 410 Gone: the resourceVersion is too old
                        rv = None
                        break
                    rv = obj["metadata"]["resourceVersion"]
                    if event["type"] == "BOOKMARK":
                        continue
                    if event["type"] == "DELETED":
                        self._remove(obj["metadata"]["name"])
                    else:
                        self._set(obj)
                    self._update()
            finally:
                resp.release()

    async def wait(self, names: list[str], deadline: float, task: asyncio.Task[None]) -> None:
        """Until every named milestone is reached; TimeoutError at `deadline` (monotonic)."""
        while not all(n in self.reached for n in names):
            if task.done():
                task.result()  # re-raise what stopped the watch
                raise RuntimeError("the pod watch stopped")
            left = deadline - time.monotonic()
            if left <= 0:
                missing = [n for n in names if n not in self.reached]
                raise TimeoutError(f"{self.ns}: not reached before the deadline: {missing}")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=min(left, 5))


@contextlib.asynccontextmanager
async def watching(core: Any, namespace: str, watch: PodWatch | None = None) -> Any:
    """(watch, its task): `watch` (a new PodWatch of the namespace by default) running and synced."""
    watch = PodWatch(core, namespace) if watch is None else watch
    task = asyncio.create_task(watch.run())
    try:
        await asyncio.wait_for(watch.synced.wait(), timeout=60)
        yield watch, task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


# --------------------------------------------------------------------------- the operator


def rayscale_command(namespace: str) -> list[str]:
    """`rayscale run --namespace NS` as the benchmarks run it: default settings, no listening ports.

    With ``--allow-gcs-address-override``: the benchmarks point clusters at a fake GCS (or at
    nothing) with the annotation ``rayscale.io/gcs-address``.
    """
    return [sys.executable, "-m", "rayscale", "run", "--namespace", namespace,
            "--liveness", "", "--metrics-port", "0", "--status-port", "0",
            "--allow-gcs-address-override"]  # fmt: skip


@contextlib.contextmanager
def operator(
    cluster: testcluster.ClusterHandle, namespace: str, extra: Sequence[str] = (), log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`rayscale run --namespace NS` (`rayscale_command`, then the flags `extra`) as a subprocess,
    its output in `log` (kept) or a temporary file; stopped on the way out."""
    env = {**cluster.env, "PYTHONPATH": str(ROOT / "operator")}
    with process([*rayscale_command(namespace), *extra], env, "rayscale", namespace, log) as proc:
        yield proc


@contextlib.contextmanager
def process(
    cmd: list[str], env: dict[str, str], label: str, namespace: str, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """An operator's process, its output in a log file (`log`, kept; else a new temporary file);
    stopped on the way out (and if we die).

    SIGTERM to its process group, then SIGKILL; the log is printed (its end) when the body failed,
    else removed.
    """
    temporary = log is None
    if log is None:
        log = Path(tempfile.mkstemp(prefix=f"{label}-bench-{namespace}-", suffix=".log")[1])
    with log.open("ab") as out:
        argv, preexec = launcher.dying_with_parent(cmd)
        proc = subprocess.Popen(
            argv,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=preexec,
        )
    failed = True
    try:
        yield proc
        failed = False
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if failed:
            print(f"--- {label} log ({log}) ---\n{log.read_text(errors='replace')[-4000:]}", file=sys.stderr)
        elif temporary:
            log.unlink(missing_ok=True)


# --------------------------------------------------------------------------- namespaces


async def create_namespace(core: Any, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:5]}"
    meta = client.V1ObjectMeta(name=name, labels={"rayscale.io/bench": "true"})
    await core.create_namespace(client.V1Namespace(metadata=meta))
    deadline = time.monotonic() + 60
    while not any(
        sa.metadata.name == "default" for sa in (await core.list_namespaced_service_account(name)).items
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no ServiceAccount default in {name}")
        await asyncio.sleep(0.1)
    return name


async def delete_namespace(core: Any, objects: Any, name: str, limit: float = 300) -> None:
    """Delete and wait until gone; past half the time, strip finalizers that hold it.

    Once the namespace is terminating nothing new can be created in it, so its pods are deleted
    at once, all in one call and without a grace period (kwok's pods run nothing), instead of one
    by one by the namespace controller: thousands of pods then go in seconds, not minutes. That call
    can outlast the API server's request timeout on a busy machine (the connection drops): the
    namespace controller deletes what it left."""
    with contextlib.suppress(ApiException):
        await core.delete_namespace(name)
    with contextlib.suppress(ApiException, aiohttp.ClientError, asyncio.TimeoutError):
        await core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
    deadline = time.monotonic() + limit
    stripped = False
    while True:
        try:
            await core.read_namespace(name)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        if time.monotonic() > deadline:
            raise TimeoutError(f"namespace {name} still there after {limit:.0f}s")
        if not stripped and time.monotonic() > deadline - limit / 2:
            stripped = True
            await strip_finalizers(core, objects, name)
        await asyncio.sleep(0.5)


async def strip_finalizers(core: Any, objects: Any, ns: str) -> None:
    patch = {"metadata": {"finalizers": None}}
    for rc in (await objects.list_namespaced_custom_object(*RAYCLUSTER.at(ns)))["items"]:
        if rc["metadata"].get("finalizers"):
            with contextlib.suppress(ApiException):
                await objects.patch_namespaced_custom_object(
                    *RAYCLUSTER.at(ns), rc["metadata"]["name"], patch,
                    _content_type="application/merge-patch+json",
                )  # fmt: skip
    for pod in (await core.list_namespaced_pod(ns)).items:
        if pod.metadata.finalizers:
            with contextlib.suppress(ApiException):
                await core.patch_namespaced_pod(pod.metadata.name, ns, patch)


@contextlib.asynccontextmanager
async def bench_namespace(
    cluster: testcluster.ClusterHandle,
    core: Any,
    objects: Any,
    prefix: str,
    extra: Sequence[str] = (),
    log: Path | None = None,
) -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    """A fresh namespace and its operator (`operator`: `extra` flags, `log`); on the way out the
    namespace goes, then the operator."""
    ns = await create_namespace(core, prefix)
    try:
        with operator(cluster, ns, extra, log) as proc:
            try:
                yield ns, proc
            finally:
                await delete_namespace(core, objects, ns)
    finally:
        with contextlib.suppress(Exception):
            await core.delete_namespace(ns)


def in_cluster(name: str) -> Callable[[dict[str, str]], bool]:
    return lambda labels: labels.get("ray.io/cluster") == name


async def warm_up(
    objects: Any, watch: PodWatch, task: asyncio.Task[None], ns: str, name: str = "warmup"
) -> None:
    """A head-only RayCluster `name` whose head is Running: the operator is up and watching."""
    await objects.create_namespaced_custom_object(*RAYCLUSTER.at(ns), raycluster(name, 0))
    watch.milestone(name, lambda w: w.count(in_cluster(name), running=True) >= 1)
    await watch.wait([name], time.monotonic() + 120, task)


# --------------------------------------------------------------------------- the cases


async def scale_up(
    cluster: testcluster.ClusterHandle, core: Any, objects: Any, replicas: int, limit: float
) -> dict[str, Any]:
    async with (
        bench_namespace(cluster, core, objects, "bench-scale") as (ns, _),
        watching(core, ns) as (watch, task),
    ):
        await warm_up(objects, watch, task, ns)
        await objects.create_namespaced_custom_object(*RAYCLUSTER.at(ns), raycluster("scale", 0))
        watch.milestone("head", lambda w: w.count(in_cluster("scale"), running=True) >= 1)
        await watch.wait(["head"], time.monotonic() + 120, task)

        def workers(labels: dict[str, str]) -> bool:
            return in_cluster("scale")(labels) and labels.get("ray.io/node-type") == "worker"

        watch.milestone("created", lambda w: w.count(workers) >= replicas)
        watch.milestone("running", lambda w: w.count(workers, running=True) >= replicas)
        start = time.monotonic()
        await objects.patch_namespaced_custom_object(
            *RAYCLUSTER.at(ns), "scale",
            [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": replicas}],
            _content_type="application/json-patch+json",
        )  # fmt: skip
        await watch.wait(["created", "running"], start + limit, task)
        return {
            "replicas": replicas,
            "created_seconds": watch.reached["created"] - start,
            "running_seconds": watch.reached["running"] - start,
        }


async def many_clusters(
    cluster: testcluster.ClusterHandle, core: Any, objects: Any, clusters: int, workers: int, limit: float
) -> dict[str, Any]:
    names = [f"rc-{i:03d}" for i in range(clusters)]
    wanted = set(names)
    pods = clusters * (1 + workers)

    def ours(labels: dict[str, str]) -> bool:
        return labels.get("ray.io/cluster") in wanted

    async with (
        bench_namespace(cluster, core, objects, "bench-many") as (ns, _),
        watching(core, ns) as (watch, task),
    ):
        await warm_up(objects, watch, task, ns)
        start = time.monotonic()
        watch.milestone("created", lambda w: w.count(ours) >= pods)
        watch.milestone("running", lambda w: w.count(ours, running=True) >= pods)
        await asyncio.gather(
            *(
                objects.create_namespaced_custom_object(*RAYCLUSTER.at(ns), raycluster(n, workers))
                for n in names
            )
        )
        crs = time.monotonic() - start
        await watch.wait(["created", "running"], start + limit, task)
        return fleet_figures(clusters, workers, pods, crs, watch.reached, start)


def fleet_figures(
    clusters: int, workers: int, pods: int, crs: float, reached: Mapping[str, float], start: float
) -> dict[str, Any]:
    """What a many-clusters case reports: its size, and the seconds from `start` to the RayClusters
    created (`crs`), to every pod created and to every pod running."""
    return {
        "clusters": clusters,
        "workers": workers,
        "pods": pods,
        "crs_seconds": crs,
        "created_seconds": reached["created"] - start,
        "running_seconds": reached["running"] - start,
    }


# --------------------------------------------------------------------------- docs


def render(r: dict[str, Any]) -> str:
    s, m = r["scale_up"], r["many"]
    about = (
        "rayscale's controller (`rayscale run --namespace NS`, default settings: 16 clusters reconciled"
        " in parallel) on the local control plane (`hack/localk8s`: etcd, kube-apiserver, kube-scheduler,"
        f" kube-controller-manager and kwok, Kubernetes {r['kubernetes']}) with the fake nodes of"
        " `hack/localk8s/nodes.yaml` (four 16-CPU, two 32-CPU and four 240-CPU nodes)."
        " Every pod's Ray container asks for 100m CPU and 128Mi (the kube-scheduler counts 200m CPU:"
        " the injected wait-gcs-ready init container asks for that)."
        " Each case runs in a fresh namespace with its own operator, which is known to be watching"
        " before the clock starts (a head-only warm-up RayCluster, not counted, has its head Running)."
        " Times come from one watch on the namespace's pods: the first moment it shows the milestone."
        " Pods are Running when kwok says so (no containers run), so these times are the controller's,"
        " the API server's and the scheduler's. One run each."
    )
    lines = [
        *paragraphs(TITLE, about, measured(r, f"`make bench-operator` (or `{COMMAND}`)")),
        "| case | pods | CRs created s | pods created s | pods Running s |",
        "|---|---:|---:|---:|---:|",
        f"| 1 RayCluster, worker `replicas: 0 -> {s['replicas']}` (from the patch) | {s['replicas']}"
        f" | — | {s['created_seconds']:.1f} | {s['running_seconds']:.1f} |",
        f"| {m['clusters']} RayClusters of 1 head + {m['workers']} workers, created in parallel | {m['pods']}"
        f" | {m['crs_seconds']:.2f} | {m['created_seconds']:.1f} | {m['running_seconds']:.1f} |",
        "",
        f"That is {s['replicas'] / s['created_seconds']:.0f} pods/s created for one cluster and"
        f" {m['pods'] / m['created_seconds']:.0f} pods/s across {m['clusters']} clusters.",
    ]
    return "\n".join(lines) + "\n"


def write_section(path: Path, results: dict[str, Any]) -> None:
    """Replace this section's generated block; everything else stays as it is."""
    BLOCK.write(path, render(results))


# --------------------------------------------------------------------------- main


CRDS = (RAYCLUSTER.crd_name, RAYRESOURCEREQUEST.crd_name)


@contextlib.asynccontextmanager
async def kube_apis(cluster: testcluster.ClusterHandle) -> AsyncIterator[tuple[Any, Any]]:
    """rayscale's CRDs applied and Established, then (CoreV1Api, CustomObjectsApi) on the cluster."""
    cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    for crd in CRDS:
        cluster.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd}")
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
    async with client.ApiClient(configuration=cfg) as api:
        yield client.CoreV1Api(api), client.CustomObjectsApi(api)


async def run(cluster: testcluster.ClusterHandle, args: argparse.Namespace) -> dict[str, Any]:
    async with kube_apis(cluster) as (core, objects):
        s = await scale_up(cluster, core, objects, args.replicas, args.timeout)
        print(
            f"scale-up 0 -> {s['replicas']}: created {s['created_seconds']:.2f}s,"
            f" running {s['running_seconds']:.2f}s",
            flush=True,
        )
        m = await many_clusters(cluster, core, objects, args.clusters, args.workers, args.timeout)
        print(
            f"{m['clusters']} clusters x (1 + {m['workers']}): CRs {m['crs_seconds']:.2f}s,"
            f" {m['pods']} pods created {m['created_seconds']:.2f}s, running {m['running_seconds']:.2f}s",
            flush=True,
        )
    return {"scale_up": s, "many": m}


def kubernetes_version(cluster: testcluster.ClusterHandle) -> str:
    try:
        out = json.loads(cluster.kubectl_run("version", "-o", "json"))
        return str(out["serverVersion"]["gitVersion"])
    except (RuntimeError, KeyError, ValueError):
        return "unknown"


def measure(
    bench: Callable[[testcluster.ClusterHandle], Coroutine[Any, Any, dict[str, Any]]], note: str
) -> dict[str, Any]:
    """The results of `bench` on the cluster (acquired and released here), with where and when."""
    load = os.getloadavg()[0]
    started = provenance.begin(provenance.command())
    cluster = testcluster.acquire()
    try:
        version = kubernetes_version(cluster)
        results = asyncio.run(bench(cluster))
    finally:
        cluster.stop()
    cpu = platform.processor() or platform.machine()
    return results | {
        "machine": f"{cpu}, {os.cpu_count()} cores (shared), Python {platform.python_version()}",
        "date": datetime.date.today().isoformat(),
        "load": load,
        "kubernetes": version,
        "cluster": cluster.origin,
        "note": note,
        "provenance": provenance.end(started),
    }


Bench = Callable[[testcluster.ClusterHandle, argparse.Namespace], Coroutine[Any, Any, dict[str, Any]]]


def measured_main(
    parser: argparse.ArgumentParser,
    argv: list[str] | None,
    stored: Path,
    bench: Bench,
    write: Callable[[dict[str, Any]], None],
    shown: Callable[[dict[str, Any]], Any] = lambda results: results,
) -> int:
    """A benchmark's main once `parser` has its own flags: the output options (results stored in
    `stored`), then `bench` measured on the local control plane, or the stored results `write`n."""
    add_output_options(parser, stored)
    args = parser.parse_args(argv)
    return finish(args, lambda: measure(lambda cluster: bench(cluster, args), args.note), write, shown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=100, help="case 1: workers to scale to")
    parser.add_argument("--clusters", type=int, default=50, help="case 2: RayClusters")
    parser.add_argument("--workers", type=int, default=10, help="case 2: workers per RayCluster")
    parser.add_argument("--timeout", type=float, default=900, help="deadline per case, seconds")
    return measured_main(parser, argv, ROOT / BLOCK.source, run, lambda results: write_section(DOCS, results))


if __name__ == "__main__":
    sys.exit(main())
