"""One operator autoscaling a fleet of RayClusters, beside what Ray's autoscaler costs as a sidecar.

    python -m bench.autoscaler_fleet [--clusters 100 1000] [--reps 3] [--real-heads 2]
                                     [--duration 120] [--sidecar-duration 180] [--operator-args ARGS]
                                     [--write-docs] [--note TEXT] [--out FILE] [--render-only]

`rayscale run --namespace NS` (default settings, or with `--operator-args`) on the local control
plane (kwok fake nodes) is handed, for each size of `--clusters` and `--reps` times, that many
RayClusters with in-tree autoscaling: a head and one group `cpu` of 1-CPU Ray
workers, 0 to 3 replicas, idle timeout 30 s. Each cluster has its own GCS: `--real-heads` of them a
real Ray 2.60 head (local processes), the rest a fake GCS in this process answering as Ray's does
(bench/fake_gcs_fleet.py: a Ray node for each Running worker pod, tasks placed on free CPUs, the
rest pending demand, idle times, drains). Once every head runs, demand changes over time: every
cluster gets a wave every `--period` seconds (a random phase per cluster, seeded) of 1 to 3 tasks of
{CPU: 1} that run `--task-seconds` on the workers they get (on a real head: `request_resources` of
that many CPUs, cleared after the same time). A wave that needs more workers than the cluster has
asked for starts a clock; it stops when a watch sees the group's `replicas` cover the wave (demand
to patch). Rounds are the fake GCSes' GetClusterResourceState calls per second (one per round).
Operator CPU seconds and RSS (VmHWM, VmRSS) come from /proc, the machine's load average and the
control plane's CPU seconds are recorded beside them.

Then, in the same run, Ray's own autoscaler as KubeRay runs it (`ray kuberay-autoscaler`, a
sidecar of the head) on one RayCluster with a real Ray head and the same kind of waves
(bench/ray_sidecar.py): its CPU seconds and RSS for that one cluster and its demand to patch.

Results go to bench/results/autoscaler_fleet.json (--out); --write-docs rewrites the generated
blocks in docs/benchmarks.md and docs/scaling.md (bench/autoscaler_fleet_docs.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import re
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from hack.localk8s import launcher, testcluster

from bench.autoscaler_reaction import autoscaling_cluster
from bench.fake_gcs_fleet import FakeRay, serving
from bench.fleet_watch import MAX_WORKERS, Fleet, Wave, wait_heads, watching
from bench.operator_fleet import extra_nodes
from bench.operator_scale import ROOT, bench_namespace, kube_apis, measured_main
from bench.procstat import tree_cpu_seconds, tree_memory_kib
from rayscale.api.names import RAYCLUSTER

IDLE_TIMEOUT = 30
CREATES_IN_FLIGHT = 50
SETTLE_SECONDS = 60  # after the run, how long the last waves may wait for their patch
PODS_PER_NODE = 110


# --------------------------------------------------------------------------- the load


def waves(names: list[str], args: argparse.Namespace) -> list[Wave]:
    """Every cluster's waves over the run: one per period at a random phase, 1 to 3 tasks each."""
    rng = random.Random(args.seed)
    out = []
    for name in names:
        at = rng.uniform(0, args.period)
        while at < args.duration:
            out.append(Wave(name, at, rng.randint(1, MAX_WORKERS)))
            at += args.period
    return sorted(out, key=lambda w: w.at)


async def drive(fleet: Fleet, plan: list[Wave], rays: dict[str, FakeRay], drivers: dict[str, Any],
                start: float, task_seconds: float) -> None:  # fmt: skip
    """Send each wave at its time: tasks to a fake GCS, `request_resources` to a real head."""
    clears: list[asyncio.Task[Any]] = []
    for wave in plan:
        delay = start + wave.at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)  # the load's own timetable, not a synchronisation
        wave.started = time.monotonic()
        wave.needed = fleet.replicas.get(wave.cluster, 0) < min(wave.tasks, MAX_WORKERS)
        if wave.needed:
            fleet.open.setdefault(wave.cluster, []).append(wave)
        if wave.cluster in rays:
            rays[wave.cluster].submit(wave.tasks, task_seconds)
        else:
            driver = drivers[wave.cluster]
            await driver.call("request_resources", num_cpus=wave.tasks)
            clears.append(asyncio.create_task(clear_later(driver, task_seconds)))
    for task in clears:
        task.cancel()


async def clear_later(driver: Any, seconds: float) -> None:
    await asyncio.sleep(seconds)  # the tasks' run time on a real head
    await driver.call("request_resources", num_cpus=0)


@contextlib.asynccontextmanager
async def real_heads(names: list[str], logs: Path) -> AsyncIterator[tuple[dict[str, str], dict[str, Any]]]:
    """A real Ray head (no CPU) and a driver on it for each of `names`: their GCS addresses and drivers."""
    from e2e.raybridge import rayproc
    from e2e.raybridge.driver import RayDriver

    async with contextlib.AsyncExitStack() as stack:
        addresses, drivers = {}, {}
        for name in names:
            head = await asyncio.to_thread(
                stack.enter_context, rayproc.running_head(timeout=120, num_cpus=0, die_with_parent=True)
            )
            addresses[name] = head.address
            drivers[name] = await stack.enter_async_context(
                RayDriver.start(head.address, logs / f"{name}.log")
            )
        yield addresses, drivers


# --------------------------------------------------------------------------- one run

COUNTED = {  # of the operator's metrics: what a window counts
    "rounds": "rayscale_autoscaler_decision_duration_seconds_count",
    "quiet_reads": "rayscale_autoscaler_quiet_reads_total",
}


async def scrape(port: int) -> dict[str, float]:
    """Every sample the operator serves, by its line's name and labels (``name{labels}``)."""
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as reply:
        text = await reply.text()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def counted(samples: dict[str, float]) -> dict[str, float]:
    """The counters of `COUNTED`, summed over their series."""
    out = dict.fromkeys(COUNTED, 0.0)
    for name, value in samples.items():
        for key, metric in COUNTED.items():
            if name.split("{")[0] == metric:
                out[key] += value
    return out


def client_requests(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
    """Requests per second of the operator's API client in the window, by ``verb resource``."""
    out: dict[str, float] = {}
    for name, value in after.items():
        if name.startswith("rayscale_kube_requests_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', name))
            rate = (value - before.get(name, 0.0)) / seconds
            if rate > 0:
                out[f"{labels['verb']} {labels['resource']}"] = rate
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def rate_limit_waits(before: dict[str, float], after: dict[str, float]) -> dict[str, dict[str, float]]:
    """Per flow: requests in the window and the bucket bound under which 50 % and 99 % of them
    waited for their rate-limit token (seconds; inf: above the largest bucket)."""
    return histogram(before, after, "rayscale_kube_rate_limit_wait_seconds", by="flow")


def histogram(
    before: dict[str, float], after: dict[str, float], metric: str, by: str | None = None
) -> dict[str, dict[str, float]]:
    """A histogram's observations in the window (per value of label `by`, else under ""): how
    many, and the bucket bounds under which 50 % and 99 % fell."""
    buckets: dict[str, list[tuple[float, float]]] = {}
    prefix = metric + "_bucket{"
    for name, value in after.items():
        if name.startswith(prefix):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', name))
            bound = float(labels["le"].replace("+Inf", "inf"))
            series = labels.get(by, "") if by else ""
            buckets.setdefault(series, []).append((bound, value - before.get(name, 0.0)))
    out = {}
    for series, counts in sorted(buckets.items()):
        counts.sort()
        total = counts[-1][1]
        if total > 0:
            p50, p99 = _bound(counts, 0.5), _bound(counts, 0.99)
            out[series] = {"requests": total, "p50_le_s": p50, "p99_le_s": p99}
    return out


def _bound(counts: list[tuple[float, float]], q: float) -> float:
    """The smallest bucket bound holding a `q` share of the (cumulative, sorted) counts."""
    return next(b for b, c in counts if c >= q * counts[-1][1])


BUSY: list[float] = []  # the autoscaler's rounds in progress, sampled during a run


async def sample_busy(port: int) -> None:
    """Sample the rounds in progress (``controller_runtime_active_workers``) every 15 s into `BUSY`."""
    BUSY.clear()
    while True:
        await asyncio.sleep(15)  # a sampling period (as a Prometheus scrape), not a synchronisation
        samples = await scrape(port)
        BUSY.append(samples.get('controller_runtime_active_workers{controller="autoscaler"}', 0.0))


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[round(q * 100) - 1]


def latencies(plan: list[Wave], end: float) -> dict[str, Any]:
    """Demand to patch of the waves that needed one. A wave not patched by `end` counts with what it
    had waited by then (a lower bound: `unpatched` says how many)."""
    needed = [w for w in plan if w.needed]
    done = [(w.patched if w.patched is not None else end) - w.started for w in needed]
    real = [w.patched - w.started for w in needed if w.patched is not None and w.cluster.startswith("real-")]
    unpatched = sum(1 for w in needed if w.patched is None)
    out: dict[str, Any] = {"waves": len(plan), "needing_patch": len(needed),
                           "patched": len(needed) - unpatched, "unpatched": unpatched}  # fmt: skip
    if done:
        out |= {"median_s": statistics.median(done), "p90_s": quantile(done, 0.9),
                "p99_s": quantile(done, 0.99), "max_s": max(done), "real_heads_s": real}  # fmt: skip
    return out


async def settle(fleet: Fleet, seconds: float) -> None:
    """Wait until no wave waits for its patch, `seconds` at most."""
    deadline = time.monotonic() + seconds
    while any(fleet.open.values()) and time.monotonic() < deadline:
        fleet.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(fleet.changed.wait(), max(0.0, deadline - time.monotonic()))


async def autoscaled_fleet(
    cluster: testcluster.ClusterHandle, args: argparse.Namespace, size: int
) -> dict[str, Any]:
    """One repetition with `size` clusters."""
    args = argparse.Namespace(**(vars(args) | {"clusters": size}))
    names = [f"real-{i}" for i in range(args.real_heads)]
    names += [f"c{i:04d}" for i in range(args.clusters - args.real_heads)]
    rays: dict[str, FakeRay] = {}
    logs = Path(os.environ.get("TMPDIR", "/tmp")) / f"autoscaler-fleet-{os.getpid()}"
    result: dict[str, Any] = {}
    try:
        await measure_fleet(cluster, args, names, rays, logs, result)
    except TimeoutError as exc:
        if not result:
            raise
        print(f"measured, but the clean-up did not finish: {exc}", file=sys.stderr, flush=True)
    return result


async def measure_fleet(cluster: testcluster.ClusterHandle, args: argparse.Namespace, names: list[str],
                        rays: dict[str, FakeRay], logs: Path, result: dict[str, Any]) -> None:  # fmt: skip
    """`autoscaled_fleet`'s run: its figures go into `result` as soon as they are measured."""
    from bench.vs_kuberay import control_plane_cpu

    async with contextlib.AsyncExitStack() as stack:
        core, objects = await stack.enter_async_context(kube_apis(cluster))
        pods = args.clusters * (1 + MAX_WORKERS)
        await stack.enter_async_context(extra_nodes(core, math.ceil(pods / PODS_PER_NODE) + 1))
        fleet = Fleet()
        for name in names[args.real_heads :]:
            rays[name] = FakeRay(running=lambda name=name: fleet.workers(name))  # type: ignore[misc]
        addresses = await stack.enter_async_context(serving(rays))
        real, drivers = await stack.enter_async_context(real_heads(names[: args.real_heads], logs))
        addresses |= real
        port = launcher.free_port()
        flags = [f"--metrics-port={port}", *args.operator_args.split()]
        ns, proc = await stack.enter_async_context(
            bench_namespace(cluster, core, objects, "bench-asfleet", flags, args.operator_log)
        )
        await stack.enter_async_context(watching(core, objects, ns, fleet))

        gate = asyncio.Semaphore(CREATES_IN_FLIGHT)

        async def create(name: str) -> None:
            body = autoscaling_cluster(name, MAX_WORKERS, addresses[name])
            body["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": IDLE_TIMEOUT}
            async with gate:
                await objects.create_namespaced_custom_object(*RAYCLUSTER.at(ns), body)

        created = time.monotonic()
        await asyncio.gather(*(create(n) for n in names))
        ready = await wait_heads(fleet, names, args.timeout)
        print(f"{len(names)} clusters, heads Running after {ready - created:.1f}s", flush=True)

        plan = waves(names, args)
        cpu0, plane0, calls0 = (
            tree_cpu_seconds(proc.pid),
            control_plane_cpu(cluster),
            sum(r.calls for r in rays.values()),
        )
        load0, start, samples0 = os.getloadavg(), time.monotonic(), await scrape(port)
        own0 = time.process_time()
        busy = asyncio.create_task(sample_busy(port))
        await drive(fleet, plan, rays, drivers, start, args.task_seconds)
        await asyncio.sleep(max(0.0, start + args.duration - time.monotonic()))  # the rest of the run
        elapsed = time.monotonic() - start
        busy.cancel()
        cpu, plane = tree_cpu_seconds(proc.pid) - cpu0, control_plane_cpu(cluster)
        own = time.process_time() - own0
        calls = sum(r.calls for r in rays.values()) - calls0
        samples = await scrape(port)
        count = {k: v - counted(samples0)[k] for k, v in counted(samples).items()}
        await settle(fleet, SETTLE_SECONDS)  # the last waves' patches
        settled = time.monotonic()
        memory = tree_memory_kib(proc.pid)
        result |= {
            "clusters": args.clusters,
            "real_heads": args.real_heads,
            "duration_s": elapsed,
            "heads_running_s": ready - created,
            "rounds_per_s": calls / elapsed,
            "rounds_per_cluster_s": calls / elapsed / max(1, len(rays)),
            "full_rounds_per_s": count["rounds"] / elapsed,
            "quiet_reads_per_s": count["quiet_reads"] / elapsed,
            "demand_to_patch": latencies(plan, settled),
            "api_requests_per_s": client_requests(samples0, samples, elapsed),
            "rate_limit_wait": rate_limit_waits(samples0, samples),
            "gcs_read": histogram(samples0, samples, "rayscale_autoscaler_gcs_read_seconds").get(""),
            "autoscaler_busy": statistics.mean(BUSY) if BUSY else None,
            "bench_process_cores": own / elapsed,
            "operator_cpu_s": cpu,
            "operator_cores": cpu / elapsed,
            "operator_rss_peak_mib": memory["VmHWM"] / 1024,
            "operator_rss_end_mib": memory["VmRSS"] / 1024,
            "control_plane_cpu_s": None if plane is None or plane0 is None else plane - plane0,
            "load_start": list(load0),
            "load_end": list(os.getloadavg()),
            "drains": sum(r.drains for r in rays.values()),
        }
        print(f"measured: {result}", flush=True)


async def run(cluster: testcluster.ClusterHandle, args: argparse.Namespace) -> dict[str, Any]:
    reps = []
    for size in args.clusters:
        for rep in range(args.reps):
            result = await autoscaled_fleet(cluster, args, size) | {"rep": rep}
            print(f"{size} clusters, rep {rep}: {result}", flush=True)
            reps.append(result)
    out: dict[str, Any] = {"fleet": reps, "settings": {k: getattr(args, k) for k in SETTINGS}}
    if args.sidecar_duration > 0:
        from bench.ray_sidecar import measure_sidecar

        schedule = sidecar_schedule(args)
        out["sidecar"] = await measure_sidecar(cluster, duration=args.sidecar_duration, schedule=schedule)
    return out


SETTINGS = (
    "clusters",
    "real_heads",
    "duration",
    "period",
    "task_seconds",
    "seed",
    "reps",
    "sidecar_duration",
    "operator_args",
)


def sidecar_schedule(args: argparse.Namespace) -> list[tuple[float, int]]:
    """The sidecar's cluster gets the fleet's kind of waves: k CPUs asked for, cleared after the
    tasks' time, every period."""
    rng, out, at = random.Random(args.seed), [], 0.0
    while at < args.sidecar_duration:
        out += [(at, rng.randint(1, MAX_WORKERS)), (at + args.task_seconds, 0)]
        at += args.period
    return out


def main(argv: list[str] | None = None) -> int:
    from bench.autoscaler_fleet_docs import write_docs

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--clusters",
        type=int,
        nargs="+",
        default=[100, 1000],
        help="autoscaled RayClusters (each size in turn)",
    )
    parser.add_argument("--real-heads", type=int, default=2, help="of them with a real Ray head")
    parser.add_argument("--duration", type=float, default=180, help="seconds of changing demand")
    parser.add_argument("--period", type=float, default=60, help="seconds between a cluster's waves")
    parser.add_argument("--task-seconds", type=float, default=20, help="how long a wave's tasks run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sidecar-duration", type=float, default=180, help="0: no sidecar measurement")
    parser.add_argument("--timeout", type=float, default=900, help="deadline of a wait, seconds")
    parser.add_argument(
        "--operator-args", default="", help="more flags for `rayscale run`, e.g. '--gcs-poll-interval 0'"
    )
    parser.add_argument(
        "--operator-log", type=Path, default=None, help="keep the operator's log in this file"
    )
    return measured_main(parser, argv, ROOT / "bench/results/autoscaler_fleet.json", run, write_docs)


if __name__ == "__main__":
    sys.exit(main())
