"""A fleet of RayJobs on one operator, rayscale and KubeRay's operator side by side in one run.

    python -m bench.rayjob_fleet [--jobs 1000] [--reps 2] [--operators rayscale,kuberay]
                                 [--pending 10] [--running 20] [--timeout 1200]
                                 [--write-docs] [--note TEXT] [--out FILE] [--render-only]

Each operator in turn (the order rotates with each repetition), in a fresh namespace with a fresh
process, is handed `--jobs` RayJobs at once (50 create calls in flight) in HTTPMode: each makes its
RayCluster (a head and an empty autoscaled worker group, 100m CPU / 128Mi pods, kwok runs them), then
submits its job to the cluster's dashboard. Ray is faked in this process (bench/rayjob_fake_ray.py):
every job submitted is PENDING for `--pending` seconds, RUNNING for `--running` seconds, then
SUCCEEDED, on one schedule both operators read:

- rayscale (`rayscale run --namespace NS --allow-gcs-address-override`, default settings) reads the
  status from the fake GCS's key-value store, as it does Ray's (the annotation
  ``rayscale.io/gcs-address`` of each RayJob, copied to its RayCluster, names it; the autoscaler's
  connection serves the reads), and submits through the fake dashboard (``rayscale.io/dashboard-
  address``);
- `rayscale-nopoll` (only when asked): rayscale with ``--gcs-poll-interval 0``, its autoscaler
  reading Ray only in its rounds (every 5 s), not also every second between them;
- `rayscale-c16` (only when asked): rayscale with ``--rayjob-concurrency 16`` (the setting before
  the default became 64), to show what the RayJob reconciles in parallel change;
- KubeRay's operator (the version of tools/kuberay-oracle/versions.env, `make kuberay-operator`; its
  defaults, leader election off) polls ``http://<head-svc>.<ns>.svc.cluster.local:8265/api/jobs/<id>``:
  that name does not resolve here, so the operator's process gets ``HTTP_PROXY`` = the fake dashboard
  (``NO_PROXY`` the API server) and its requests arrive there in proxy form (counted: a run with none
  is a failure).

Per run: the time from the first create call until every RayJob is Complete; the lag from each
status change of the schedule (RUNNING, SUCCEEDED) to a watch seeing ``status.jobStatus`` change
(p50, p99 over the jobs; the watch runs in a process of its own, bench/rayjob_watch.py, so that the
fake Ray's work in this one does not delay what it sees); the dashboard's status calls (rayscale:
must be 0), submits and proxied calls; the GCS's key-value reads and state reads, and the
connections they came on (how many connections carried job-record reads but no autoscaler read);
the operator's CPU seconds (utime + stime, from the first create to the last Complete) and mean
cores over that time, its VmHWM and
VmRSS; the load average at the start and the end (other work on the machine shows there). Results
go to bench/results/rayjob_fleet.json (--out); --write-docs rewrites the section "RayJobs: a fleet
at once, beside KubeRay's operator" of docs/benchmarks.md (bench/rayjob_fleet_docs.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import aiohttp
from hack.localk8s import testcluster
from kubernetes_asyncio.client.exceptions import ApiException

from bench import apiserver_requests, rayjob_fleet_docs
from bench.operator_fleet import CREATE_CONCURRENCY, extra_nodes
from bench.operator_scale import ROOT, kube_apis, measured_main, raycluster, warm_up, watching
from bench.procstat import load_average, tree_cpu_seconds, tree_memory_kib
from bench.rayjob_fake_ray import Schedule, serving_dashboard, serving_gcs
from bench.rayjob_watch import JobWatch
from bench.vs_kuberay import (
    Bench,
    Operated,
    at_most,
    choices,
    kuberay_bindir,
    kuberay_version,
    operated,
    positive,
    turns,
)
from rayscale.api.names import RAYJOB

OPERATORS = ("rayscale", "kuberay", "kuberay-matched", "rayscale-nopoll", "rayscale-c16")
NO_POLL = ("--gcs-poll-interval", "0")  # rayscale-nopoll: the autoscaler reads Ray only in its rounds
PODS_PER_NODE = 100
STATUSES = ("RUNNING", "SUCCEEDED")  # the changes Ray makes on its own (PENDING is the submission)
WINDOW = 20  # seconds: the lag is also given per window of the run, by when Ray changed


def rayjob(name: str, gcs: str, dashboard: str) -> dict[str, Any]:
    """A RayJob in HTTPMode whose cluster is autoscaled (rayscale's autoscaler holds its GCS link)."""
    spec = raycluster(name, 0, max_replicas=1)["spec"] | {"enableInTreeAutoscaling": True}
    return {
        **RAYJOB.type_meta(),
        "metadata": {
            "name": name,
            "annotations": {"rayscale.io/gcs-address": gcs, "rayscale.io/dashboard-address": dashboard},
        },
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "HTTPMode",
            "shutdownAfterJobFinishes": False,
            "rayClusterSpec": spec,
        },
    }


class ProxiedBench(Bench):
    """vs_kuberay's Bench whose KubeRay operator sends its plain-HTTP requests to `proxy`."""

    proxy = ""

    def command(self, name: str, namespace: str) -> tuple[list[str], dict[str, str]]:
        if name in ("rayscale-nopoll", "rayscale-c16"):
            cmd, env = super().command("rayscale", namespace)
            return [*cmd, *(NO_POLL if name == "rayscale-nopoll" else ("--rayjob-concurrency", "16"))], env
        cmd, env = super().command(name, namespace)
        if name.startswith("kuberay"):
            server = urlparse(self.api_server()).hostname or "127.0.0.1"
            env = env | {"HTTP_PROXY": self.proxy, "http_proxy": self.proxy,
                         "NO_PROXY": f"{server},localhost", "no_proxy": f"{server},localhost"}  # fmt: skip
        return cmd, env

    def api_server(self) -> str:
        text = Path(self.cluster.kubeconfig).read_text()
        return next((ln.split("server:", 1)[1].strip() for ln in text.splitlines() if "server:" in ln), "")


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))] if ordered else math.nan


def lags(schedule: Schedule, watch: JobWatch, began: float) -> dict[str, dict[str, Any]]:
    """Per status Ray changed to on its own: the lag (seconds) from the change to the RayJob showing
    it (p50, p99, max over the jobs), how many jobs never showed it (a later status came first), and
    per `WINDOW` seconds of the run (by when Ray changed, from `began`, wall clock): [start, jobs,
    p50, p99], which shows when in the run the late ones were."""
    out: dict[str, dict[str, Any]] = {}
    for status in STATUSES:
        found, skipped = [], 0
        read_waits, after_reads = [], []  # change -> the GCS's first answer with it -> the watch
        windows: dict[int, list[float]] = {}
        for name, job_id in watch.job_ids.items():
            job = schedule.jobs.get(job_id)
            if job is None:
                continue
            seen = watch.seen.get(name, {}).get(status)
            if seen is None:
                skipped += 1
                continue
            changed = schedule.changes(job)[status]
            found.append(seen - changed)
            read = schedule.first_read.get((job_id, status))
            if read is not None:
                read_waits.append(read - changed)
                after_reads.append(seen - read)
            windows.setdefault(int((changed - began) // WINDOW), []).append(seen - changed)
        out[status] = {
            "p50_s": percentile(found, 0.5),
            "p99_s": percentile(found, 0.99),
            "max_s": max(found, default=math.nan),
            "mean_s": statistics.fmean(found) if found else math.nan,
            "jobs": len(found),
            "skipped": skipped,
            "read_wait_p50_s": percentile(read_waits, 0.5),
            "read_wait_p99_s": percentile(read_waits, 0.99),
            "after_read_p50_s": percentile(after_reads, 0.5),
            "after_read_p99_s": percentile(after_reads, 0.99),
            "windows": [
                [w * WINDOW, len(v), round(percentile(v, 0.5), 2), round(percentile(v, 0.99), 2)]
                for w, v in sorted(windows.items())
            ],
        }
    return out


async def probe_loop(out: list[tuple[float, float]], every: float = 0.1) -> None:
    """Append (wall clock, lag) every `every` s: how much later than asked a sleep woke up."""
    while True:
        asked = time.monotonic()
        await asyncio.sleep(every)
        out.append((time.time(), max(0.0, time.monotonic() - asked - every)))


def _window_max(samples: Sequence[tuple[float, float]], began: float) -> dict[int, float]:
    out: dict[int, float] = {}
    for at, lag in samples:
        w = int((at - began) // WINDOW)
        out[w] = max(out.get(w, 0.0), lag)
    return out


async def delete_jobs(objects: Any, ns: str, limit: float = 300) -> float:
    """Delete every RayJob while the operator runs (its finalizers are its own); seconds taken."""
    began = time.monotonic()
    with contextlib.suppress(ApiException, aiohttp.ClientError, asyncio.TimeoutError):
        await objects.delete_collection_namespaced_custom_object(*RAYJOB.at(ns))
    while time.monotonic() - began < limit:
        # best effort, as the teardown: a busy API server may drop a call (Server disconnected)
        with contextlib.suppress(ApiException, aiohttp.ClientError, asyncio.TimeoutError):
            if not (await objects.list_namespaced_custom_object(*RAYJOB.at(ns), limit=1))["items"]:
                break
        await asyncio.sleep(1)  # the poll's interval
    return time.monotonic() - began


async def measured_run(bench: ProxiedBench, name: str, rep: int, args: argparse.Namespace) -> dict[str, Any]:
    """One operator handed `args.jobs` RayJobs: until all are Complete, then what it cost."""
    schedule = Schedule(args.pending, args.running)
    names = [f"rj-{i:04d}" for i in range(args.jobs)]
    async with serving_gcs(schedule, args.jobs) as gcs, serving_dashboard(schedule) as dashboard:
        bench.proxy = dashboard
        async with operated(bench, name, "rj-fleet") as run:
            async with watching(bench.core, run.ns) as (pods, pods_task):
                await warm_up(bench.objects, pods, pods_task, run.ns)
            watch = JobWatch(bench.cluster.kubeconfig, run.ns)
            task = asyncio.create_task(watch.run())
            try:
                await asyncio.wait_for(watch.synced.wait(), timeout=60)
                result = await timed(bench, run, schedule, watch, task, names, gcs, dashboard, args)
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            result["delete_seconds"] = await delete_jobs(bench.objects, run.ns)
    result |= {"operator": name, "rep": rep, "jobs": args.jobs}
    bench.say(
        f"  {name} rep {rep}: all Complete {result['complete_s']:.1f}s, lag RUNNING p50"
        f" {result['lag']['RUNNING']['p50_s']:.2f}s p99 {result['lag']['RUNNING']['p99_s']:.2f}s,"
        f" dashboard status calls {result['calls'].get('dashboard_status', 0)},"
        f" CPU {result['cpu_seconds']:.1f}s, RSS {result['rss_peak_mib']:.0f} MiB"
    )
    return result


async def timed(
    bench: ProxiedBench, run: Operated, schedule: Schedule, watch: JobWatch, task: asyncio.Task[None],
    names: list[str], gcs: list[str], dashboard: str, args: argparse.Namespace,
) -> dict[str, Any]:  # fmt: skip
    pid = run.running.pid
    schedule.calls.clear()  # the warm-up's calls are not the run's
    schedule.peers.clear()
    requests0 = await apiserver_requests.snapshot(bench.cluster)
    cpu0, load0, mono0, wall0 = tree_cpu_seconds(pid), load_average(), time.monotonic(), time.time()
    fake0 = time.process_time()  # this process serves the fake Ray
    lagging: list[tuple[float, float]] = []  # (wall clock, how late this process's loop ran a sleep)
    prober = asyncio.create_task(probe_loop(lagging))

    async def create(body: dict[str, Any]) -> None:
        await bench.objects.create_namespaced_custom_object(*RAYJOB.at(run.ns), body)

    calls = [
        functools.partial(create, rayjob(n, address, dashboard))
        for n, address in zip(names, gcs, strict=True)
    ]
    await at_most(CREATE_CONCURRENCY, calls)
    created = time.monotonic() - mono0
    await watch.all_complete(len(names), mono0 + args.timeout, run.running, task)
    wall = time.monotonic() - mono0
    prober.cancel()
    cpu = tree_cpu_seconds(pid) - cpu0
    memory = tree_memory_kib(pid)
    requests1 = await apiserver_requests.snapshot(bench.cluster)
    submitted = [job.submitted - wall0 for job in schedule.jobs.values()]
    if run.name.startswith("kuberay") and not schedule.calls.get("proxied"):
        raise RuntimeError("KubeRay's operator never called the fake dashboard through the proxy")
    return {
        "complete_s": max(watch.complete.values()) - wall0,
        "created_s": created,
        "submitted_p50_s": percentile(submitted, 0.5),
        "submitted_last_s": max(submitted, default=math.nan),
        "lag": lags(schedule, watch, wall0),
        "calls": dict(schedule.calls),
        "gcs_connections": {  # job-record reads on connections the autoscaler's reads did not use
            "kv": len(schedule.peers["kv"]),
            "state": len(schedule.peers["state"]),
            "kv_only": len(schedule.peers["kv"] - schedule.peers["state"]),
        },
        "cpu_seconds": cpu,
        "cores": cpu / wall,
        "fake_ray_cpu_seconds": time.process_time() - fake0,  # the fake GCSes and dashboards, one process
        # how late the fake Ray's loop ran (its replies waited that long): p99, max, max per WINDOW
        "fake_ray_loop_lag": {
            "p99_s": percentile([lag for _, lag in lagging], 0.99),
            "max_s": max((lag for _, lag in lagging), default=math.nan),
            "windows": [[w * WINDOW, round(v, 2)] for w, v in sorted(_window_max(lagging, wall0).items())],
        },
        "rss_peak_mib": memory["VmHWM"] / 1024,
        "rss_end_mib": memory["VmRSS"] / 1024,
        # every client's, the benchmark's and the control plane's too
        "api_writes": apiserver_requests.writes(requests0, requests1),
        "api_reads": apiserver_requests.reads(requests0, requests1),
        "load_start": list(load0),
        "load_end": list(load_average()),
    }


async def settle(load: float, limit: float) -> float:
    """Before a run that follows another: wait until the 1-min load average is below `load` (the
    control plane and kube-controller-manager still clean up the last run's 1,000 clusters after
    its namespace is gone), at most `limit` seconds; the seconds waited. Every run but the first
    of a sequence would otherwise start on a busier machine than the first."""
    began = time.monotonic()
    while time.monotonic() - began < limit:
        if load_average()[0] < load:
            break
        await asyncio.sleep(5)  # the poll's interval: the load average moves over a minute
    return time.monotonic() - began


async def install_rayservice_crd(cluster: testcluster.ClusterHandle, bindir: Path) -> None:
    """KubeRay's RayService CRD (its operator watches RayServices); RayCluster and RayJob stay rayscale's."""
    crd = bindir / "crds" / "ray.io_rayservices.yaml"
    cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", str(crd))
    deadline = time.monotonic() + 60
    while True:  # `kubectl wait` fails at once while a new CRD has no conditions yet
        try:
            cluster.kubectl_run(
                "wait", "--for=condition=Established", "--timeout=60s", "crd/rayservices.ray.io"
            )
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)  # the poll's interval


async def run(cluster: testcluster.ClusterHandle, args: argparse.Namespace) -> dict[str, Any]:
    began = time.monotonic()
    bindir = kuberay_bindir()
    runs: list[dict[str, Any]] = []
    async with kube_apis(cluster) as (core, objects):
        cluster.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", "crd/rayjobs.ray.io")
        await install_rayservice_crd(cluster, bindir)
        bench = ProxiedBench(cluster, core, objects, bindir, args.timeout)
        nodes = math.ceil((args.jobs + 10) / PODS_PER_NODE)
        bench.say(f"{args.jobs} RayJobs: {args.reps} repetition(s) x {args.operators}, {nodes} extra nodes")
        async with extra_nodes(core, nodes):
            for rep in range(args.reps):
                for name in turns(args.operators, rep):
                    settled = await settle(args.settle_load, args.settle_seconds) if runs else 0.0
                    runs.append(await measured_run(bench, name, rep, args) | {"settle_s": settled})
    return {
        "runs": runs,
        "jobs": args.jobs,
        "reps": args.reps,
        "operators": args.operators,
        "pending_s": args.pending,
        "running_s": args.running,
        "settle_load": args.settle_load,
        "kuberay_version": kuberay_version(),
        "run_seconds": time.monotonic() - began,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=positive, default=1000, help="RayJobs per run")
    parser.add_argument("--reps", type=positive, default=2, help="repetitions per operator")
    parser.add_argument("--operators", type=choices(OPERATORS), default=list(OPERATORS[:2]))
    parser.add_argument("--pending", type=float, default=10.0, help="seconds each job is PENDING")
    parser.add_argument("--running", type=float, default=20.0, help="seconds each job is RUNNING")
    parser.add_argument("--timeout", type=float, default=1200, help="deadline per run, seconds")
    parser.add_argument(
        "--settle-load",
        type=float,
        default=1.5,
        help="before each run after the first, wait for the 1-min load average below this",
    )
    parser.add_argument("--settle-seconds", type=float, default=300,
                        help="... at most this long (0: do not wait)")  # fmt: skip
    return measured_main(
        parser,
        argv,
        ROOT / rayjob_fleet_docs.BLOCK.source,
        run,
        rayjob_fleet_docs.write,
        rayjob_fleet_docs.shown,
    )


if __name__ == "__main__":
    sys.exit(main())
