"""rayscale's controller side by side with KubeRay's own operator, on one local control plane, in one run.

    python -m bench.vs_kuberay [--cases a100,a1000,b50,b1000,c,d]
                               [--operators rayscale,kuberay,kuberay-matched] [--reps 3] [--reps-large 1]
                               [--baseline DIR]
                               [--write-docs] [--docs FILE] [--note TEXT] [--out FILE] [--docs-from FILE]

Three operators, one at a time, each case and repetition in a fresh namespace with a fresh operator
process (started before the clock runs, known to be watching once a head-only warm-up RayCluster has
its head Running):

- `rayscale`: `rayscale run --namespace NS` as bench/operator_scale.py runs it (default settings:
  16 clusters reconciled in parallel, client rate limit 100 requests/s, burst 200);
- `kuberay`: KubeRay's operator (the version of tools/kuberay-oracle/versions.env, built by
  `make kuberay-operator`) with `--watch-namespace NS` and its defaults (reconcile concurrency 1,
  QPS 100, burst 200), leader election off, metrics and probes on free ports of 127.0.0.1;
- `kuberay-matched`: the same with `--reconcile-concurrency 16 --qps 100 --burst 200`;
- `rayscale-baseline` (only with `--baseline DIR`): `rayscale` run from another checkout, DIR (a
  `git worktree add DIR <commit>` with its protos generated: `make install` there, or
  `python operator/rayscale/ray/protos/generate.py` in it), to compare two commits of rayscale side by
  side in one run.

One RayCluster CRD for every run: rayscale's (crds/), which KubeRay's operator reads as its own;
KubeRay's RayJob and RayService CRDs are added because its operator watches them. Every RayCluster
is operator_scale.raycluster's (a head and one worker group, 100m CPU / 128Mi pods), the same for
all three. Cases:

- a100, a1000: one cluster whose head runs, workers patched from 0 to N: seconds until all N worker
  pods exist and until all run;
- b50, b1000: 50 clusters of a head and 10 workers / 1,000 of a head and 9 (10,000 pods) created at
  once (50 create calls in flight): seconds until all pods exist / run, and per cluster from the
  first create call until its own pods all run (median, p99);
- c: head of line: one cluster patched from 0 to 500 workers and right after it 50 small clusters (a
  head and 2 workers) created; each small cluster's seconds from its create call to its pods all
  Running (median, p99), and to its pods all created and all bound to a node (p99: where the wait
  is); then the same 50 alone, in a fresh namespace, as the baseline;
- d: the a1000 cluster, 1,000 workers Running, under a fresh operator process gets `replicas: 0` and
  every worker's name in `scaleStrategy.workersToDelete` in one patch: seconds until every worker is
  marked for deletion and until every one is gone from the API server (kwok finalises them).

For every case: the operator's CPU seconds (/proc/PID/stat, utime + stime, with any children),
from the clock's start to the case's last milestone, and again once the Events about its
RayClusters stopped changing (both operators post them in the background); its VmHWM then (the
process's lifetime peak: the process is fresh per case); the Events; its log's size; and the
1-minute load average at the start and the end. The bench adds fake kwok nodes (32 CPU / 110 pods,
one per 100 pods of the case; operator_fleet.extra_nodes) for each case, then warms the API
server's pod watch cache with a burst of 600 bare pods (`warm_api_server` says why). Operators take
turns within a repetition, in an order that rotates from one repetition and one case to the next,
so no operator is always first. b1000 runs once by
default (--reps-large): it takes about 10 minutes per operator on 2 cores, teardown included; a
full run about an hour on a busy 2-core machine. Progress goes to stderr; the raw results are JSON
(--out, default bench/results/vs_kuberay.json), which --docs-from renders again. --write-docs
rewrites the section "Side by side with KubeRay's operator" of docs/benchmarks.md (or --docs FILE),
keeping every other section.

The cluster is the local control plane of `make cluster-up`, else a fresh one that is stopped at
the end, or the one RAYSCALE_TARGET_KUBECONFIG names, checked; never $KUBECONFIG's
(hack/localk8s/testcluster.py, target.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
from hack.localk8s import testcluster
from hack.localk8s.launcher import free_port
from kubernetes_asyncio.client.exceptions import ApiException

from bench import provenance
from bench.docs import Block, add_output_options, finish, paragraphs
from bench.operator_fleet import CREATE_CONCURRENCY, FleetWatch, extra_nodes
from bench.operator_scale import (
    DOCS,
    ROOT,
    create_namespace,
    delete_namespace,
    kube_apis,
    measure,
    process,
    raycluster,
    rayscale_command,
    warm_up,
    watching,
)
from bench.procstat import load_average, tree_cpu_seconds, tree_memory_kib
from rayscale.api.names import RAYCLUSTER

TITLE = "## Side by side with KubeRay's operator"
COMMAND = ".venv/bin/python -m bench.vs_kuberay --write-docs"
OUT = ROOT / "bench" / "results" / "vs_kuberay.json"
BLOCK = Block("bench.vs_kuberay", "bench/results/vs_kuberay.json")
BUILD = ROOT / "tools" / "kuberay-oracle" / "build-operator.sh"
VERSIONS = ROOT / "tools" / "kuberay-oracle" / "versions.env"

OPERATORS = ("rayscale", "kuberay", "kuberay-matched", "rayscale-baseline")
DEFAULT_OPERATORS = OPERATORS[:3]  # rayscale-baseline only with --baseline
LABELS = {
    "rayscale": "rayscale",
    "kuberay": "KubeRay default",
    "kuberay-matched": "KubeRay matched",
    "rayscale-baseline": "rayscale baseline",
}
CASES = ("a100", "a1000", "b50", "b1000", "c", "d")
LARGE = "b1000"  # the case --reps-large counts repetitions of
HOL_BIG, HOL_SMALL, HOL_SMALL_WORKERS = 500, 50, 2
FLEETS = {"b50": (50, 10), "b1000": (1000, 9)}  # clusters, workers per cluster
SCALES = {"a100": 100, "a1000": 1000}
DOWN = 1000  # workers of case d
PODS_PER_EXTRA_NODE = 100
WARM_PODS = 600  # bare pods of the burst that warms the API server's pod watch cache (`warm_api_server`)

CLUSTER_LABEL, NODE_TYPE_LABEL = "ray.io/cluster", "ray.io/node-type"
# what client-go's event recorder (KubeRay's) logs when 1,000 Events already wait to be sent
DROPPED = b"too many queued events, dropped event"
PURGES_IN_FLIGHT = 16  # pod delete-collection calls at teardown
MATCHED_FLAGS = ("--reconcile-concurrency=16", "--qps=100", "--burst=200")


# --------------------------------------------------------------------------- statistics (pure)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), interpolated linearly between the order statistics."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, minimum, maximum and count of the repetitions' values."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def per_cluster(values: Sequence[float]) -> dict[str, float]:
    """Median, p99 and max of per-cluster times."""
    return {"median": statistics.median(values), "p99": percentile(values, 99), "max": max(values)}


def number(value: float) -> str:
    """Three significant figures, at most two decimals: 0.123, 1.23, 12.3, 123, 1,234."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def cell(stat: Mapping[str, float] | None, suffix: str = "", fmt: Callable[[float], str] = number) -> str:
    """`median (min-max)`, or the value alone for one repetition (or none spread), or a dash."""
    if stat is None:
        return "—"
    text = fmt(stat["median"]) + suffix
    if stat["n"] > 1 and fmt(stat["min"]) != fmt(stat["max"]):
        text += f" ({fmt(stat['min'])}-{fmt(stat['max'])})"
    return text


def whole(value: float) -> str:
    return f"{value:,.0f}"


def ratio(ours: Mapping[str, float] | None, theirs: Mapping[str, float] | None) -> str:
    """rayscale's median over KubeRay's, as `1.8x`; a dash when either is missing."""
    if ours is None or theirs is None or not theirs["median"]:
        return "—"
    return f"{ours['median'] / theirs['median']:.1f}x"


# --------------------------------------------------------------------------- arguments (pure)


def choices(allowed: Sequence[str]) -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated subset of `allowed` ("all": every one), in `allowed`'s order."""

    def parse(text: str) -> list[str]:
        wanted = {w.strip() for w in text.split(",") if w.strip()}
        if wanted == {"all"}:
            return list(allowed)
        unknown = sorted(wanted - set(allowed))
        if unknown or not wanted:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(allowed)} (got {text!r})")
        return [a for a in allowed if a in wanted]

    return parse


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--cases", type=choices(CASES), default=list(CASES), help=f"comma-separated, of {','.join(CASES)}"
    )
    parser.add_argument(
        "--operators",
        type=choices(OPERATORS),
        default=None,
        help=f"comma-separated, of {','.join(OPERATORS)} (default: {','.join(DEFAULT_OPERATORS)},"
        " and rayscale-baseline with --baseline)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a checkout of another rayscale commit, run as the operator rayscale-baseline",
    )
    parser.add_argument("--reps", type=positive, default=3, help="repetitions of every case but b1000")
    parser.add_argument("--reps-large", type=positive, default=1, help="repetitions of b1000")
    parser.add_argument("--timeout", type=float, default=900, help="deadline of a wait, seconds (b1000: 2x)")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the benchmarks page --write-docs rewrites")
    add_output_options(parser, OUT)
    args = parser.parse_args(argv)
    if args.operators is None:
        args.operators = [*DEFAULT_OPERATORS, *(["rayscale-baseline"] if args.baseline else [])]
    if "rayscale-baseline" in args.operators:
        if args.baseline is None:
            parser.error("rayscale-baseline needs --baseline DIR")
        generated = args.baseline / "operator" / "rayscale" / "ray" / "protos" / "gcs_pb2.py"
        if not generated.exists():
            parser.error(f"{args.baseline}: no generated protos ({generated}); run `make install` there")
        args.baseline = args.baseline.resolve()
    return args


def repetitions(case: str, args: argparse.Namespace) -> int:
    return int(args.reps_large if case == LARGE else args.reps)


def turns(operators: Sequence[str], rep: int, group: int = 0) -> list[str]:
    """The operators' order in repetition `rep` of the `group`-th case group: rotated by one each
    repetition and each group, so that no operator always runs first."""
    k = (rep + group) % len(operators) if operators else 0
    return [*operators[k:], *operators[:k]]


def case_groups(cases: Sequence[str]) -> list[list[str]]:
    """The cases in the order they run, those that share a namespace together: d reuses a1000's
    cluster when both run (a1000 first)."""
    order = ["a100", "b50", "c", "a1000", "d", "b1000"]
    groups: list[list[str]] = []
    for case in order:
        if case not in cases:
            continue
        if case == "d" and "a1000" in cases:
            groups[-1].append(case)
        else:
            groups.append([case])
    return groups


def case_pods(case: str) -> int:
    """The most pods the case has in its namespace at once, warm-up cluster included."""
    if case in SCALES:
        return 2 + SCALES[case]
    if case in FLEETS:
        clusters, workers = FLEETS[case]
        return 1 + clusters * (1 + workers)
    if case == "c":
        return 2 + HOL_BIG + HOL_SMALL * (1 + HOL_SMALL_WORKERS)
    return 3 + DOWN  # d: the two warm-up heads and the cluster


def extra_node_count(cases: Iterable[str]) -> int:
    return math.ceil(max(case_pods(c) for c in cases) / PODS_PER_EXTRA_NODE)


def kuberay_command(name: str, binary: Path, namespace: str, ports: tuple[int, int]) -> list[str]:
    """KubeRay's operator on one namespace: its defaults, or (`kuberay-matched`) rayscale's settings."""
    cmd = [
        str(binary),
        f"--watch-namespace={namespace}",
        f"--metrics-addr=127.0.0.1:{ports[0]}",
        f"--health-probe-bind-address=127.0.0.1:{ports[1]}",
        "--enable-leader-election=false",
    ]
    return cmd + list(MATCHED_FLAGS) if name == "kuberay-matched" else cmd


def kuberay_version(path: Path = VERSIONS) -> str:
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "KUBERAY_VERSION":
            return value.strip()
    return "unknown"


# --------------------------------------------------------------------------- the watch


LIVE, RUNNING, PRESENT = 0, 1, 2


class CaseWatch(FleetWatch):
    """FleetWatch (per cluster: when its pods all existed, all ran) plus O(1) tallies per (cluster,
    node type) of live (not being deleted), Running and present pods, and per cluster when its head
    first ran and its first worker appeared."""

    def __init__(self, core: Any, namespace: str, sizes: Mapping[str, int]) -> None:
        super().__init__(core, namespace, sizes)
        self.tally: dict[tuple[str, str], list[int]] = {}
        self.head_running: dict[str, float] = {}
        self.first_worker: dict[str, float] = {}

    def _count(self, state: tuple[dict[str, str], str, bool] | None, sign: int) -> None:
        if state is None:
            return
        labels, phase, deleting = state
        key = (labels.get(CLUSTER_LABEL, ""), labels.get(NODE_TYPE_LABEL, ""))
        counts = self.tally.setdefault(key, [0, 0, 0])
        counts[PRESENT] += sign
        if not deleting:
            counts[LIVE] += sign
            counts[RUNNING] += sign if phase == "Running" else 0

    def _set(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        self._count(self.pods.get(name), -1)
        super()._set(pod)
        state = self.pods[name]
        self._count(state, 1)
        labels, phase, deleting = state
        cluster = labels.get(CLUSTER_LABEL)
        if cluster is None or deleting:
            return
        now = time.monotonic()
        if labels.get(NODE_TYPE_LABEL) == "worker":
            self.first_worker.setdefault(cluster, now)
        elif labels.get(NODE_TYPE_LABEL) == "head" and phase == "Running":
            self.head_running.setdefault(cluster, now)

    def _remove(self, name: str) -> None:
        self._count(self.pods.get(name), -1)
        super()._remove(name)

    def _reset(self) -> None:
        super()._reset()
        self.tally.clear()

    def pods_of(self, cluster: str, node_type: str, what: int = LIVE) -> int:
        return self.tally.get((cluster, node_type), [0, 0, 0])[what]


async def reach(
    watch: CaseWatch,
    task: asyncio.Task[None],
    names: list[str],
    deadline: float,
    proc: subprocess.Popen[bytes],
) -> None:
    """Until the named milestones are reached (their times are the watch's); fails as soon as the
    operator exits, else at `deadline`."""
    while True:
        try:
            await watch.wait(names, min(deadline, time.monotonic() + 5), task)
            return
        except TimeoutError:
            if proc.poll() is not None:
                raise RuntimeError(f"the operator exited ({proc.returncode})") from None
            if time.monotonic() >= deadline:
                raise


# --------------------------------------------------------------------------- operators


class Bench:
    """What every case needs: the cluster, the API clients, KubeRay's binary, the deadline, the log."""

    def __init__(
        self,
        cluster: testcluster.ClusterHandle,
        core: Any,
        objects: Any,
        kuberay: Path,
        timeout: float,
        baseline: Path | None = None,
    ) -> None:
        self.cluster, self.core, self.objects = cluster, core, objects
        self.kuberay = kuberay
        self.timeout = timeout
        self.baseline = baseline
        self.began = time.monotonic()

    def say(self, text: str) -> None:
        minutes, seconds = divmod(int(time.monotonic() - self.began), 60)
        print(f"[{minutes:3d}:{seconds:02d}] {text}", file=sys.stderr, flush=True)

    def command(self, name: str, namespace: str) -> tuple[list[str], dict[str, str]]:
        if name in ("rayscale", "rayscale-baseline"):
            root = self.baseline if name == "rayscale-baseline" and self.baseline else ROOT
            return rayscale_command(namespace), {**self.cluster.env, "PYTHONPATH": str(root / "operator")}
        ports = (free_port(), free_port())
        return kuberay_command(name, self.kuberay / "kuberay-operator", namespace, ports), self.cluster.env


class Operated:
    """A namespace and the operator process running in it (restartable)."""

    def __init__(self, bench: Bench, name: str, namespace: str) -> None:
        self.bench, self.name, self.ns = bench, name, namespace
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: Path | None = None
        self._stack: contextlib.ExitStack | None = None

    @property
    def running(self) -> subprocess.Popen[bytes]:
        assert self.proc is not None, "the operator is not running"
        return self.proc

    def start(self) -> None:
        cmd, env = self.bench.command(self.name, self.ns)
        self.log = Path(tempfile.mkstemp(prefix=f"{self.name}-bench-{self.ns}-", suffix=".log")[1])
        self._stack = contextlib.ExitStack()
        self.proc = self._stack.enter_context(process(cmd, env, self.name, self.ns, self.log))

    def log_facts(self) -> dict[str, int]:
        """The current process's log: its size, and how many Events client-go said it dropped."""
        if self.log is None or not self.log.exists():
            return {"log_bytes": 0, "dropped_events": 0}
        return {"log_bytes": self.log.stat().st_size, "dropped_events": count_in(self.log, DROPPED)}

    def stop(self, failed: bool = False) -> None:
        """SIGTERM (then SIGKILL); the operator's log printed when `failed`."""
        stack, self._stack, self.proc = self._stack, None, None
        if stack is None:
            return
        if failed:
            stack.__exit__(RuntimeError, RuntimeError("the case failed"), None)
        else:
            stack.close()

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.asynccontextmanager
async def operated(bench: Bench, name: str, prefix: str) -> AsyncIterator[Operated]:
    """A fresh namespace with a fresh operator `name`; at the end the namespace is emptied and deleted
    (and waited for) while the operator still runs, then the operator stops."""
    ns = await create_namespace(bench.core, prefix)
    run = Operated(bench, name, ns)
    failed = True
    try:
        run.start()
        try:
            yield run
            failed = False
        finally:
            await teardown(bench, ns)
    finally:
        run.stop(failed)
        with contextlib.suppress(Exception):
            await bench.core.delete_namespace(ns)


async def teardown(bench: Bench, ns: str) -> None:
    """RayClusters deleted, then their pods at once (grace 0; one delete-collection call per cluster,
    16 at a time: the API server deletes a collection's items one after another), then the
    namespace, waited for."""
    began = time.monotonic()
    names: list[str] = []
    with contextlib.suppress(ApiException):
        listed = await bench.objects.list_namespaced_custom_object(*RAYCLUSTER.at(ns))
        names = [rc["metadata"]["name"] for rc in listed["items"]]
    # best effort, as the purges below: a busy API server may drop the delete-collection of 1,000
    # RayClusters (Server disconnected); the namespace's deletion removes what is left
    with contextlib.suppress(ApiException, aiohttp.ClientError):
        await bench.objects.delete_collection_namespaced_custom_object(*RAYCLUSTER.at(ns))
    gate = asyncio.Semaphore(PURGES_IN_FLIGHT)

    async def purge(selector: str | None) -> None:
        async with gate:
            # best effort: the namespace's deletion below removes what is left (a busy API
            # server may drop a delete-collection of thousands of pods: Server disconnected)
            with contextlib.suppress(ApiException, aiohttp.ClientError):
                await bench.core.delete_collection_namespaced_pod(
                    ns, label_selector=selector, grace_period_seconds=0
                )

    await asyncio.gather(*(purge(f"{CLUSTER_LABEL}={n}") for n in names))
    await purge(None)  # whatever is left
    pods = time.monotonic() - began
    await delete_namespace(bench.core, bench.objects, ns, limit=900)
    bench.say(f"  {ns} removed: pods in {pods:.0f}s, the namespace in {time.monotonic() - began - pods:.0f}s")


def count_in(path: Path, needle: bytes, chunk: int = 1 << 20) -> int:
    """Occurrences of `needle` in a file of any size."""
    found, tail = 0, b""
    with path.open("rb") as f:
        while block := f.read(chunk):
            data = tail + block
            found += data.count(needle)
            # what could start a match that crosses into the next block (too short to hold one)
            tail = data[-(len(needle) - 1) :] if len(needle) > 1 else b""
    return found


def kuberay_bindir() -> Path:
    """make kuberay-operator: the binary's cache directory (built on first use, about 2 minutes)."""
    out = subprocess.run([str(BUILD)], capture_output=True, text=True, check=True, timeout=900)
    return Path(out.stdout.strip().splitlines()[-1])


def install_kuberay_crds(cluster: testcluster.ClusterHandle, bindir: Path) -> None:
    """KubeRay's RayJob and RayService CRDs (its operator watches them); the RayCluster CRD stays
    rayscale's."""
    for kind in ("rayjobs", "rayservices"):
        crd = bindir / "crds" / f"ray.io_{kind}.yaml"
        cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", str(crd))
    deadline = time.monotonic() + 60
    for kind in ("rayjobs", "rayservices"):
        while True:  # `kubectl wait` fails at once while a new CRD has no conditions yet
            try:
                cluster.kubectl_run(
                    "wait", "--for=condition=Established", "--timeout=60s", f"crd/{kind}.ray.io"
                )
                break
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # the poll's interval


# --------------------------------------------------------------------------- measuring


def control_plane_cpu(cluster: testcluster.ClusterHandle) -> float | None:
    """CPU seconds used so far by the local control plane (etcd, kube-apiserver, kube-scheduler,
    kube-controller-manager, kwok: the supervisor's process tree, whether the bench started it or
    `make cluster-up` did); None on another cluster."""
    if cluster.supervisor is not None:
        return tree_cpu_seconds(cluster.supervisor.pid)
    if cluster.local and cluster.state_dir is not None:
        return tree_cpu_seconds(int(str(cluster.state()["supervisor"])))
    return None


def sample_start(run: Operated) -> dict[str, Any]:
    return {
        "cpu": tree_cpu_seconds(run.running.pid),
        "control_plane_cpu": control_plane_cpu(run.bench.cluster),
        "load": load_average(),
        "clock": time.monotonic(),
    }


async def case_end(bench: Bench, run: Operated, start: Mapping[str, Any]) -> dict[str, Any]:
    """What the operator used, sampled at the case's last milestone: CPU seconds since `start`, the
    load average, the Events so far; then, once its Events stopped changing (some are posted in the
    background after the pods), the Events and CPU seconds again, and VmHWM."""
    pid = run.running.pid
    cpu = tree_cpu_seconds(pid) - start["cpu"]
    plane = control_plane_cpu(run.bench.cluster)
    load = load_average()
    ended = time.monotonic()
    events = await ray_cluster_events(bench.core, run.ns)
    settled, done = await settle_events(bench.core, run.ns, events)
    memory = tree_memory_kib(pid)
    plane_cpu = {} if plane is None else {"control_plane_cpu_seconds": plane - start["control_plane_cpu"]}
    return (
        run.log_facts()
        | plane_cpu
        | {
            "cpu_seconds": cpu,
            "load_start": list(start["load"]),
            "load_end": list(load),
            "events_at_end": events,
            "events": settled,
            "events_settled": done,
            "events_settle_seconds": time.monotonic() - ended,
            "cpu_settled_seconds": tree_cpu_seconds(pid) - start["cpu"],
            "rss_peak_mib": memory["VmHWM"] / 1024,
            "rss_end_mib": memory["VmRSS"] / 1024,
            "processes": memory["processes"],
        }
    )


async def settle_events(
    core: Any, ns: str, first: dict[str, Any], limit: float = 120, interval: float = 1.0
) -> tuple[dict[str, Any], bool]:
    """The RayClusters' Events once two more polls `interval` apart find them unchanged; (the last
    found, False) at `limit` seconds."""
    deadline = time.monotonic() + limit
    found, stable = first, 0
    while stable < 2:
        if time.monotonic() > deadline:
            return found, False
        await asyncio.sleep(interval)  # the poll's interval
        newer = await ray_cluster_events(core, ns)
        stable = stable + 1 if (newer["objects"], newer["count"]) == (found["objects"], found["count"]) else 0
        found = newer
    return found, True


async def ray_cluster_events(core: Any, ns: str) -> dict[str, Any]:
    """The Events about the namespace's RayClusters but the warm-up ones: objects, their total count
    (an Event's `count` grows when the same Event recurs), per reason."""
    resp = await core.list_namespaced_event(
        ns, field_selector="involvedObject.kind=RayCluster", resource_version="0", _preload_content=False
    )
    try:
        items = json.loads(await resp.read())["items"]
    finally:
        resp.release()
    items = [e for e in items if not e["involvedObject"].get("name", "").startswith("warmup")]
    reasons: dict[str, int] = {}
    for event in items:
        reason = str(event.get("reason", ""))
        reasons[reason] = reasons.get(reason, 0) + int(event.get("count") or 1)
    return {"objects": len(items), "count": sum(reasons.values()), "reasons": reasons}


async def create_all(
    objects: Any, ns: str, bodies: Sequence[dict[str, Any]], in_flight: int = CREATE_CONCURRENCY
) -> dict[str, float]:
    """Create the RayClusters, `in_flight` calls at a time: when (monotonic) each call returned."""
    done: dict[str, float] = {}

    async def create(body: dict[str, Any]) -> None:
        await objects.create_namespaced_custom_object(*RAYCLUSTER.at(ns), body)
        done[body["metadata"]["name"]] = time.monotonic()

    await at_most(in_flight, [functools.partial(create, b) for b in bodies])
    return done


async def at_most(limit: int, calls: Sequence[Callable[[], Awaitable[None]]]) -> None:
    """Run `calls`, `limit` at a time."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            await call()

    await asyncio.gather(*(one(c) for c in calls))


async def patch_replicas(objects: Any, ns: str, name: str, replicas: int, delete: Sequence[str] = ()) -> None:
    """One JSON patch of group 0: `replicas`, and (when given) `scaleStrategy.workersToDelete`."""
    ops: list[dict[str, Any]] = [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": replicas}
    ]
    if delete:
        ops.append(
            {
                "op": "add",
                "path": "/spec/workerGroupSpecs/0/scaleStrategy",
                "value": {"workersToDelete": list(delete)},
            }
        )
    await objects.patch_namespaced_custom_object(
        *RAYCLUSTER.at(ns), name, ops, _content_type="application/json-patch+json"
    )


def rounded(values: Iterable[float]) -> list[float]:
    return [round(v, 3) for v in values]


def record(
    case: str,
    run: Operated,
    rep: int,
    pods: int,
    figures: dict[str, Any],
    usage: dict[str, Any],
    began: float,
) -> dict[str, Any]:
    return {
        "case": case,
        "operator": run.name,
        "rep": rep,
        "pods": pods,
        "figures": figures,
        **usage,
        "wall_seconds": time.monotonic() - began,
    }


def headline(r: Mapping[str, Any]) -> str:
    f = r["figures"]
    shown = ", ".join(f"{k} {number(v)}" for k, v in f.items() if isinstance(v, int | float))
    return (
        f"{r['case']} {LABELS[r['operator']]} rep {r['rep'] + 1}: {shown}; CPU {r['cpu_seconds']:.1f}s,"
        f" peak RSS {r['rss_peak_mib']:.0f} MiB, events {r['events']['objects']}"
        f" (load {r['load_start'][0]:.2f} -> {r['load_end'][0]:.2f})"
    )


# --------------------------------------------------------------------------- the cases


async def scale_case(
    bench: Bench, name: str, rep: int, replicas: int, cases: Sequence[str]
) -> list[dict[str, Any]]:
    """a100 / a1000: one cluster 0 -> `replicas` workers; then d (with a fresh operator) if asked."""
    began = time.monotonic()
    records: list[dict[str, Any]] = []
    scale_case_name = "a1000" if replicas == DOWN else "a100"
    async with (
        operated(bench, name, "vs-scale") as run,
        watching(bench.core, run.ns, CaseWatch(bench.core, run.ns, {})) as (watch, task),
    ):
        assert isinstance(watch, CaseWatch)
        await warm_up(bench.objects, watch, task, run.ns)
        body = raycluster("scale", 0, max_replicas=replicas)
        await bench.objects.create_namespaced_custom_object(*RAYCLUSTER.at(run.ns), body)
        watch.milestone("head", lambda w: head_running(w, "scale"))
        await reach(watch, task, ["head"], time.monotonic() + 120, run.running)
        watch.milestone("workers created", lambda w: workers(w, "scale") >= replicas)
        watch.milestone("workers running", lambda w: workers(w, "scale", RUNNING) >= replicas)
        start = sample_start(run)
        await patch_replicas(bench.objects, run.ns, "scale", replicas)
        await reach(
            watch, task, ["workers created", "workers running"], start["clock"] + bench.timeout, run.running
        )
        usage = await case_end(bench, run, start)
        created = watch.reached["workers created"] - start["clock"]
        running = watch.reached["workers running"] - start["clock"]
        figures = {
            "created_s": created,
            "running_s": running,
            "created_per_s": replicas / created,
            "running_per_s": replicas / running,
        }
        if scale_case_name in cases:
            records.append(record(scale_case_name, run, rep, replicas, figures, usage, began))
            bench.say(headline(records[-1]))
        if "d" in cases:
            records.append(await scale_down(bench, run, watch, task, rep))
            bench.say(headline(records[-1]))
    return records


def head_running(w: Any, cluster: str) -> bool:
    assert isinstance(w, CaseWatch)
    return w.pods_of(cluster, "head", RUNNING) >= 1


def workers(w: Any, cluster: str, what: int = LIVE) -> int:
    assert isinstance(w, CaseWatch)
    return w.pods_of(cluster, "worker", what)


async def scale_down(
    bench: Bench, run: Operated, watch: CaseWatch, task: asyncio.Task[None], rep: int
) -> dict[str, Any]:
    """d: the cluster "scale" with DOWN Running workers; a fresh operator; replicas 0 and every worker
    named in workersToDelete, in one patch."""
    began = time.monotonic()
    run.restart()
    await warm_up(bench.objects, watch, task, run.ns, name="warmup-d")
    names = sorted(
        n
        for n, (labels, phase, deleting) in watch.pods.items()
        if labels.get(CLUSTER_LABEL) == "scale" and labels.get(NODE_TYPE_LABEL) == "worker"
        and phase == "Running" and not deleting
    )  # fmt: skip
    if len(names) != DOWN:
        raise RuntimeError(f"{run.ns}: {len(names)} Running workers before the scale-down, not {DOWN}")
    watch.milestone("workers deleting", lambda w: workers(w, "scale") == 0)
    watch.milestone("workers gone", lambda w: workers(w, "scale", PRESENT) == 0)
    start = sample_start(run)
    await patch_replicas(bench.objects, run.ns, "scale", 0, names)
    await reach(
        watch, task, ["workers deleting", "workers gone"], start["clock"] + bench.timeout, run.running
    )
    usage = await case_end(bench, run, start)
    deleting = watch.reached["workers deleting"] - start["clock"]
    gone = watch.reached["workers gone"] - start["clock"]
    figures = {"deleting_s": deleting, "gone_s": gone, "gone_per_s": DOWN / gone}
    return record("d", run, rep, DOWN, figures, usage, began)


async def fleet_case(bench: Bench, name: str, rep: int, case: str) -> list[dict[str, Any]]:
    """b50 / b1000: many clusters created at once."""
    began = time.monotonic()
    clusters, per = FLEETS[case]
    names = [f"rc-{i:04d}" for i in range(clusters)]
    pods = clusters * (1 + per)
    timeout = bench.timeout * (2 if case == LARGE else 1)
    async with (
        operated(bench, name, "vs-fleet") as run,
        watching(bench.core, run.ns, CaseWatch(bench.core, run.ns, dict.fromkeys(names, 1 + per))) as (
            watch,
            task,
        ),
    ):
        assert isinstance(watch, CaseWatch)
        await warm_up(bench.objects, watch, task, run.ns)
        start = sample_start(run)
        await create_all(bench.objects, run.ns, [raycluster(n, per) for n in names])
        crs = time.monotonic() - start["clock"]
        await reach(watch, task, ["created", "running"], start["clock"] + timeout, run.running)
        usage = await case_end(bench, run, start)
        t0 = start["clock"]
        cluster_created = [watch.all_created[n] - t0 for n in names]
        cluster_running = [watch.all_running[n] - t0 for n in names]
        created, running = watch.reached["created"] - t0, watch.reached["running"] - t0
        early = sum(
            1 for n in names if watch.first_worker.get(n, math.inf) < watch.head_running.get(n, math.inf)
        )
        figures = {
            "crs_s": crs,
            "created_s": created,
            "running_s": running,
            "created_per_s": pods / created,
            "running_per_s": pods / running,
            "cluster_running_median_s": per_cluster(cluster_running)["median"],
            "cluster_running_p99_s": per_cluster(cluster_running)["p99"],
            "workers_before_head_running": early,
        }
        usage["per_cluster"] = {"created_s": rounded(cluster_created), "running_s": rounded(cluster_running)}
        rec = record(case, run, rep, pods, figures, usage, began)
    bench.say(headline(rec))
    return [rec]


def small_names() -> list[str]:
    return [f"small-{i:02d}" for i in range(HOL_SMALL)]


async def hol_case(bench: Bench, name: str, rep: int) -> list[dict[str, Any]]:
    """c: 50 small clusters right after a 0 -> 500 patch of another; then the same 50 alone."""
    return [await hol_part(bench, name, rep, beside=True), await hol_part(bench, name, rep, beside=False)]


async def hol_part(bench: Bench, name: str, rep: int, *, beside: bool) -> dict[str, Any]:
    began = time.monotonic()
    smalls = small_names()
    sizes = dict.fromkeys(smalls, 1 + HOL_SMALL_WORKERS) | ({"big": 1 + HOL_BIG} if beside else {})
    async with (
        operated(bench, name, "vs-hol" if beside else "vs-alone") as run,
        watching(bench.core, run.ns, CaseWatch(bench.core, run.ns, sizes)) as (watch, task),
    ):
        assert isinstance(watch, CaseWatch)
        await warm_up(bench.objects, watch, task, run.ns)
        if beside:
            body = raycluster("big", 0, max_replicas=HOL_BIG)
            await bench.objects.create_namespaced_custom_object(*RAYCLUSTER.at(run.ns), body)
            watch.milestone("head", lambda w: head_running(w, "big"))
            await reach(watch, task, ["head"], time.monotonic() + 120, run.running)
        start = sample_start(run)
        if beside:
            await patch_replicas(bench.objects, run.ns, "big", HOL_BIG)
        created_at = await create_all(
            bench.objects, run.ns, [raycluster(n, HOL_SMALL_WORKERS) for n in smalls]
        )
        await reach(watch, task, ["created", "running"], start["clock"] + bench.timeout, run.running)
        usage = await case_end(bench, run, start)
        stages = {"running": watch.all_running, "created": watch.all_created, "bound": watch.all_bound}
        small = {stage: [at[n] - created_at[n] for n in smalls] for stage, at in stages.items()}
        figures: dict[str, Any] = {
            f"small_{stage}_{q}_s": per_cluster(times)[q]
            for stage, times in small.items()
            for q in ("median", "p99")
        }
        figures["running_s"] = watch.reached["running"] - start["clock"]
        if beside:
            figures["big_created_s"] = watch.all_created["big"] - start["clock"]
            figures["big_running_s"] = watch.all_running["big"] - start["clock"]
        usage["per_cluster"] = {f"small_{stage}_s": rounded(times) for stage, times in small.items()}
        pods = HOL_SMALL * (1 + HOL_SMALL_WORKERS) + (HOL_BIG if beside else 0)
        rec = record("c" if beside else "c-alone", run, rep, pods, figures, usage, began)
    bench.say(headline(rec))
    return rec


# --------------------------------------------------------------------------- the run


async def run(cluster: testcluster.ClusterHandle, args: argparse.Namespace) -> dict[str, Any]:
    began = time.monotonic()
    bindir = kuberay_bindir()
    runs: list[dict[str, Any]] = []
    async with kube_apis(cluster) as (core, objects):
        install_kuberay_crds(cluster, bindir)
        bench = Bench(cluster, core, objects, bindir, args.timeout, args.baseline)
        for index, group in enumerate(case_groups(args.cases)):
            reps = repetitions(group[0], args)
            nodes = extra_node_count(group)
            bench.say(
                f"{'+'.join(group)}: {reps} repetition(s) x {len(args.operators)} operator(s),"
                f" {nodes} extra nodes"
            )
            async with extra_nodes(core, nodes):
                await warm_api_server(bench)
                for rep in range(reps):
                    for name in turns(args.operators, rep, index):
                        runs += await run_case(bench, group, name, rep)
    return {
        "runs": runs,
        "cases": args.cases,
        "operators": args.operators,
        **({"baseline": baseline_facts(args.baseline)} if "rayscale-baseline" in args.operators else {}),
        "reps": args.reps,
        "reps_large": args.reps_large,
        "cores": os.cpu_count() or 1,
        "kuberay_version": kuberay_version(),
        "run_seconds": time.monotonic() - began,
    }


def baseline_facts(baseline: Path) -> dict[str, str]:
    """Which commit rayscale-baseline ran: its checkout and `git describe` there."""
    described = subprocess.run(
        ["git", "-C", str(baseline), "log", "-1", "--format=%h %s"], capture_output=True, text=True
    )
    return {"dir": str(baseline), "commit": described.stdout.strip()[:100]}


def bare_pod(name: str) -> dict[str, Any]:
    """A pod of a bench cluster's size (100m CPU / 128Mi) that belongs to no operator."""
    resources = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]},
    }


async def warm_api_server(bench: Bench, pods: int = WARM_PODS) -> None:
    """A burst of `pods` bare pods, created (`CREATE_CONCURRENCY` calls in flight), run by kwok and
    deleted in a namespace of their own, before a case group's first timed run.

    The API server gives each pod watch, when it starts, a buffer of about one second of the
    events its watch cache held lately, and at least 10. A watch started before any burst (the
    scheduler's, kwok's, the controller-manager's) has 10; in the next burst the API server closes
    every watch whose buffer is full ("Forcing pods watcher close due to unresponsiveness" in its
    log) and each watcher lists everything again. kwok, listing again, plays the Running stage
    again for the pods it had not yet seen Running, and those patches are refused (422) and
    retried until the pod is gone. Without this burst, whichever operator ran first after the
    control plane started (or after a quiet spell) paid for it: 1-2 s more to Running in b50, and
    in b1000 over 70 s. The watches closed in this burst start again with buffers sized for one."""
    began = time.monotonic()
    ns = await create_namespace(bench.core, "vs-warm")
    try:
        async with watching(bench.core, ns) as (watch, task):
            create = bench.core.create_namespaced_pod
            names = [f"warm-{i:04d}" for i in range(pods)]
            await at_most(CREATE_CONCURRENCY, [functools.partial(create, ns, bare_pod(n)) for n in names])
            watch.milestone("running", lambda w: w.count(lambda _: True, running=True) >= pods)
            await watch.wait(["running"], time.monotonic() + bench.timeout, task)
    finally:
        await delete_namespace(bench.core, bench.objects, ns)
    bench.say(
        f"API server warmed: {pods} pods created, Running and deleted in {time.monotonic() - began:.0f}s"
    )


async def run_case(bench: Bench, group: Sequence[str], name: str, rep: int) -> list[dict[str, Any]]:
    first = group[0]
    if first in SCALES:
        return await scale_case(bench, name, rep, SCALES[first], group)
    if first == "d":
        return await scale_case(bench, name, rep, DOWN, group)
    if first in FLEETS:
        return await fleet_case(bench, name, rep, first)
    return await hol_case(bench, name, rep)


# --------------------------------------------------------------------------- summary (pure)


def values(runs: Iterable[Mapping[str, Any]], case: str, operator: str, key: str) -> list[float]:
    """A figure (or a top-level number such as cpu_seconds) of every repetition of (case, operator)."""
    found: list[float] = []
    for r in runs:
        if r["case"] != case or r["operator"] != operator:
            continue
        value = r["figures"].get(key, r.get(key))
        if isinstance(value, int | float):
            found.append(float(value))
    return found


def stat(runs: Sequence[Mapping[str, Any]], case: str, operator: str, key: str) -> dict[str, float] | None:
    found = values(runs, case, operator, key)
    return spread(found) if found else None


def hol_ratios(runs: Sequence[Mapping[str, Any]], operator: str) -> list[float]:
    """Per repetition: the small clusters' p99 beside the scale-up over their p99 alone."""
    by_rep: dict[int, dict[str, float]] = {}
    for r in runs:
        if r["operator"] == operator and r["case"] in ("c", "c-alone"):
            by_rep.setdefault(r["rep"], {})[r["case"]] = r["figures"]["small_running_p99_s"]
    return [p["c"] / p["c-alone"] for p in by_rep.values() if "c" in p and p.get("c-alone")]


def per_pod_ms(runs: Sequence[Mapping[str, Any]], case: str, operator: str) -> dict[str, float] | None:
    found = [
        1000 * r["cpu_seconds"] / r["pods"] for r in runs if r["case"] == case and r["operator"] == operator
    ]
    return spread(found) if found else None


CASE_NAMES = {
    "a100": "1 cluster, workers 0 -> 100",
    "a1000": "1 cluster, workers 0 -> 1,000",
    "b50": "50 clusters x (1 + 10) at once",
    "b1000": "1,000 clusters x (1 + 9) at once",
    "c": "head of line: 0 -> 500 and 50 x (1 + 2)",
    "c-alone": "head of line: the 50 x (1 + 2) alone",
    "d": "scale-down 1,000 -> 0, workersToDelete",
}
THROUGHPUT = [("pods/s created", "created_per_s"), ("pods/s Running", "running_per_s")]

# (case, figure, its key, is a throughput): the figures table's rows, in order
ROWS: list[tuple[str, str, str, bool]] = [
    *(
        row
        for case in ("a100", "a1000")
        for row in [
            (case, "all workers created, s", "created_s", False),
            (case, "all workers Running, s", "running_s", False),
            *((case, label, key, True) for label, key in THROUGHPUT),
        ]
    ),
    *(
        row
        for case in ("b50", "b1000")
        for row in [
            (case, "all pods created, s", "created_s", False),
            (case, "all pods Running, s", "running_s", False),
            (case, "per cluster, its pods Running: median, s", "cluster_running_median_s", False),
            (case, "per cluster, its pods Running: p99, s", "cluster_running_p99_s", False),
            *((case, label, key, True) for label, key in THROUGHPUT),
        ]
    ),
    ("c", "the 500 workers Running, s", "big_running_s", False),
    ("c", "a small cluster, create -> Running: median, s", "small_running_median_s", False),
    ("c", "a small cluster, create -> Running: p99, s", "small_running_p99_s", False),
    ("c", "a small cluster, create -> its pods created: p99, s", "small_created_p99_s", False),
    ("c", "a small cluster, create -> its pods bound to nodes: p99, s", "small_bound_p99_s", False),
    ("c-alone", "a small cluster, create -> Running: median, s", "small_running_median_s", False),
    ("c-alone", "a small cluster, create -> its pods created: p99, s", "small_created_p99_s", False),
    ("c-alone", "a small cluster, create -> its pods bound to nodes: p99, s", "small_bound_p99_s", False),
    ("c-alone", "a small cluster, create -> Running: p99, s", "small_running_p99_s", False),
    ("d", "all workers marked for deletion, s", "deleting_s", False),
    ("d", "all workers gone, s", "gone_s", False),
    ("d", "pods/s gone", "gone_per_s", True),
]


def figures_table(results: Mapping[str, Any]) -> list[str]:
    runs, ops = results["runs"], results["operators"]
    kuberays = [o for o in ("kuberay", "kuberay-matched") if o in ops] if "rayscale" in ops else []
    head = ["case", "figure", *(LABELS[o] for o in ops), *(f"rayscale / {LABELS[k]}" for k in kuberays)]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    cases = {r["case"] for r in runs}
    for case, label, key, throughput in ROWS:
        if case not in cases:
            continue
        cells = [cell(stat(runs, case, o, key)) for o in ops]
        mine = stat(runs, case, "rayscale", key)
        cells += [ratio(mine, stat(runs, case, k, key)) if throughput else "" for k in kuberays]
        lines.append(f"| {CASE_NAMES[case]} | {label} | " + " | ".join(cells) + " |")
        if case == "c-alone" and key == "small_running_p99_s":
            found = [hol_ratios(runs, o) for o in ops]
            cells = [cell(spread(f), "x") if f else "—" for f in found] + [""] * len(kuberays)
            lines.append("| head of line | p99 beside the scale-up / p99 alone | " + " | ".join(cells) + " |")
    return lines


def resources_table(results: Mapping[str, Any]) -> list[str]:
    runs = results["runs"]
    plane = any("control_plane_cpu_seconds" in r for r in runs)  # runs before it was measured lack it
    lines = [
        "| case | operator | CPU s | CPU ms per pod | CPU s, Events posted too | peak RSS MiB | Events"
        + (" | control plane CPU s |" if plane else " |"),
        "|---|---|---:|---:|---:|---:|---:|" + ("---:|" if plane else ""),
    ]
    for case in CASE_NAMES:
        for o in results["operators"]:
            cpu = stat(runs, case, o, "cpu_seconds")
            if cpu is None:
                continue
            lines.append(
                f"| {CASE_NAMES[case]} | {LABELS[o]} | {cell(cpu)} | {cell(per_pod_ms(runs, case, o))}"
                f" | {cell(stat(runs, case, o, 'cpu_settled_seconds'))}"
                f" | {cell(stat(runs, case, o, 'rss_peak_mib'), fmt=whole)}"
                f" | {cell(events_stat(runs, case, o), fmt=whole)}"
                + (f" | {cell(stat(runs, case, o, 'control_plane_cpu_seconds'))} |" if plane else " |")
            )
    return lines


def events_stat(runs: Sequence[Mapping[str, Any]], case: str, operator: str) -> dict[str, float] | None:
    found = [float(r["events"]["objects"]) for r in runs if r["case"] == case and r["operator"] == operator]
    return spread(found) if found else None


def busy_runs(results: Mapping[str, Any]) -> list[str]:
    """The case runs whose 1-minute load average exceeded the cores at their start or end."""
    cores = results.get("cores") or os.cpu_count() or 1
    return [
        f"{r['case']} ({LABELS[r['operator']]}, run {r['rep'] + 1}:"
        f" {r['load_start'][0]:.1f} -> {r['load_end'][0]:.1f})"
        for r in results["runs"]
        if max(r["load_start"][0], r["load_end"][0]) > cores
    ]


def load_sentence(results: Mapping[str, Any]) -> str:
    runs, cores = results["runs"], results.get("cores") or 1
    loads = [x for r in runs for x in (r["load_start"][0], r["load_end"][0])]
    text = f"The 1-minute load average was {min(loads):.2f} to {max(loads):.2f} at the cases' starts and ends"
    busy = busy_runs(results)
    if not busy:
        return text + f", never above the {cores} cores."
    if len(busy) == len(runs):
        return (
            text + f": the machine was busy (above its {cores} cores) throughout, all {len(runs)} case runs."
        )
    shown = "; ".join(busy[:8]) + (f"; and {len(busy) - 8} more" if len(busy) > 8 else "")
    return (
        text
        + f"; the machine was busy (above its {cores} cores) in {len(busy)} of {len(runs)} case runs:"
        + f" {shown}."
    )


def reps_sentence(results: Mapping[str, Any]) -> str:
    runs, ops = results["runs"], results["operators"]
    counts = {c: {len(values(runs, c, o, "cpu_seconds")) for o in ops} - {0} for c in CASE_NAMES}
    small = sorted({n for c, found in counts.items() if c != LARGE for n in found})
    large = sorted(counts[LARGE])
    parts = []
    if small:
        parts.append(
            f"{' or '.join(map(str, small))} repetitions of each case" if small != [1] else "one run"
        )
    if large:
        parts.append(
            f"{' or '.join(map(str, large))} of the 1,000-cluster case (several minutes per operator)"
        )
    return (
        "Each figure is the median of " + (" and ".join(parts) or "no runs") + ", with the range (min-max)"
        " in brackets when the repetitions differ; a ratio is rayscale's median throughput over KubeRay's"
        " (above 1x: rayscale is faster)."
    )


def observations(results: Mapping[str, Any]) -> str:
    """What the tables say, in words, from the same results."""
    runs, ops = results["runs"], results["operators"]
    text: list[str] = []
    for k in ("kuberay", "kuberay-matched"):
        if "rayscale" not in ops or k not in ops:
            continue
        found = []
        for case, label, key, throughput in ROWS:
            mine, theirs = stat(runs, case, "rayscale", key), stat(runs, case, k, key)
            if throughput and mine and theirs and theirs["median"]:
                found.append((mine["median"] / theirs["median"], f"{CASE_NAMES[case]}, {label}"))
        if found:
            low, high = min(found), max(found)
            span = f"{low[0]:.1f}x ({low[1]})" + (f" to {high[0]:.1f}x ({high[1]})" if high != low else "")
            text.append(f"rayscale's throughput was {span} {LABELS[k]}'s.")
    hol = {o: hol_ratios(runs, o) for o in ops}
    if any(hol.values()):
        parts = [f"{statistics.median(v):.1f}x with {LABELS[o]}" for o, v in hol.items() if v]
        text.append(
            "Head of line: the small clusters' p99 from create to Running beside the 500-worker scale-up,"
            " over their p99 alone: " + ", ".join(parts) + "."
        )
    early = []
    for o in ops:
        n = sum(int(r["figures"].get("workers_before_head_running", 0)) for r in runs if r["operator"] == o)
        total = sum(FLEETS[r["case"]][0] for r in runs if r["operator"] == o and r["case"] in FLEETS)
        if total:
            early.append(f"{LABELS[o]} {n:,} of {total:,}")
    if early:
        text.append(
            "Clusters created at once whose first worker pod existed before their head was Running: "
            + ", ".join(early)
            + "."
        )
    events = []
    for o in ops:
        made = [r for r in runs if r["operator"] == o and r["case"] != "d"]
        pods = sum(r["pods"] for r in made)
        if pods:
            events.append(f"{LABELS[o]} {sum(r['events']['objects'] for r in made) / pods:.2f}")
    if events:
        text.append("Events on the RayClusters per pod created: " + ", ".join(events) + ".")
    dropped = {o: sum(int(r.get("dropped_events", 0)) for r in runs if r["operator"] == o) for o in ops}
    if any(dropped.values()):
        text.append(
            "KubeRay's log also reports Events it dropped as its queue was full: "
            + ", ".join(f"{n:,} with {LABELS[o]}" for o, n in dropped.items() if n)
            + "."
        )
    logs = []
    for o in ops:
        made = [r for r in runs if r["operator"] == o]
        pods = sum(r["pods"] for r in made)
        if pods and any("log_bytes" in r for r in made):
            logs.append(f"{LABELS[o]} {sum(r.get('log_bytes', 0) for r in made) / pods:,.0f} bytes")
    if logs:
        text.append(
            "Log written per pod created or deleted, at each one's default level: " + ", ".join(logs) + "."
        )
    return " ".join(text)


def render(results: Mapping[str, Any]) -> str:
    note = f" {results['note'].strip().rstrip('.')}." if results.get("note") else ""
    kuberay = results.get("kuberay_version", "v1.6.2")
    processes = max((r.get("processes", 1) for r in results["runs"]), default=1)
    children = (
        "neither operator had child processes"
        if processes <= 1
        else "children included: an operator had some"
    )
    about = (
        f"rayscale's controller against KubeRay's own operator ({kuberay}, Go, built from its module by"
        " `make kuberay-operator`), one at a time on the same local control plane (`hack/localk8s`,"
        f" Kubernetes {results['kubernetes']}, kwok fake nodes), in one run. *rayscale* is"
        " `rayscale run --namespace NS` (default settings: 16 clusters reconciled in parallel, client rate"
        " limit 100 requests/s, burst 200); *KubeRay default* is `kuberay-operator --watch-namespace NS`"
        " with its defaults (`--reconcile-concurrency 1`, `--qps 100`, `--burst 200`), leader election"
        " off; *KubeRay matched* adds `--reconcile-concurrency 16 --qps 100 --burst 200`, rayscale's"
        " settings. Each logs at its default level to a file. One RayCluster CRD serves every run:"
        " rayscale's (`crds/`), which KubeRay's operator reads as its own, as the migration tests run it;"
        " KubeRay's RayJob and RayService CRDs are added because its operator watches them."
    )
    if results.get("baseline"):
        about += (
            f" *rayscale baseline* is the same `rayscale run` from another commit"
            f" ({results['baseline']['commit']}), in the same run."
        )
    setup = (
        "The RayClusters are the same for all three: a head and one worker group, every Ray container"
        " 100m CPU / 128Mi (200m CPU to the kube-scheduler with the wait-gcs-ready init container both"
        " operators inject), no autoscaling (`enableInTreeAutoscaling` unset). Each case and repetition"
        " runs in a fresh namespace with a fresh operator process, started before the clock and known to be"
        " watching (a head-only warm-up RayCluster has its head Running); the operators take turns within"
        " a repetition, in an order that rotates from one repetition and one case to the next, so no operator"
        " is always first. The bench adds kwok nodes of 32 CPU / 110 pods for each case, one per 100 of its"
        " pods, then warms the API server with 600 bare pods created, run and deleted: the API server sizes"
        " a pod watch's buffer when the watch starts, from how many events its cache held lately, so the"
        " watches started before any burst (the kube-scheduler's, kwok's) have 10 events of room and are"
        " closed in the first burst, and whichever operator ran first paid for it (kwok lists every pod"
        " again and plays some twice). Times come from one watch on the namespace's pods, the first"
        " moment it shows the milestone; pods are Running when kwok says so (no containers run). The"
        " control plane does not throttle the operators' pods: the kube-scheduler and controller-manager"
        " run without their client rate limit (as kwokctl's `--disable-qps-limits`), and kwok plays pod"
        " stages on 16 workers instead of 4 (real kubelets start pods node by node in parallel; with 4,"
        " the pods bound during a 500-pod scale-up waited up to 7 s to be made Running)."
    )
    cases = (
        "Cases: one cluster whose head runs, its workers patched from 0 to 100 and to 1,000, timed from the"
        " patch; 50 clusters of a head and 10 workers and 1,000 of a head and 9 (10,000 pods) created at"
        " once (50 create calls in flight), timed from the first create call, per cluster until its own"
        " pods all run; head of line: 50 small clusters (a head and 2 workers) created right after another"
        " cluster's patch from 0 to 500 workers, each timed from its create call's return to its 3 pods"
        " Running (and, to show where the wait is, to its 3 pods all created, the operator's part, and all"
        " bound to a node, the kube-scheduler's; the rest is kwok's), and the same 50 alone in a fresh"
        " namespace; scale-down: the 1,000-worker cluster, under"
        " a fresh operator process, gets `replicas: 0` and every worker's name in"
        " `scaleStrategy.workersToDelete` in one patch (*deleting*: every worker marked for deletion;"
        " *gone*: every worker deleted from the API server, which kwok does as soon as a pod is marked)."
    )
    resources = (
        "CPU is the operator's user + system time from /proc/PID/stat between the clock's start and the"
        f" case's last milestone ({children}); CPU per pod divides it by the pods created (deleted, for"
        " the scale-down). Both operators post Events in the background, so some are still to come when"
        " the pods are done: *Events* counts the Event objects about the case's RayClusters once two polls"
        " a second apart found no change, and *CPU s, Events posted too* runs until then. Both fold"
        " repeats into an Event's count and post at most 25 per object at once, then one per 5 minutes"
        " (client-go's rules); KubeRay's client-go also drops Events without a word while 1,000 wait to"
        " be sent, so a busy KubeRay shows fewer."
        " Peak RSS is VmHWM then: the peak of the operator process's whole life (start-up, the warm-up"
        " cluster, the case), one fresh process per case and repetition (for the scale-down the restarted"
        " process, which also listed the 1,000 workers)."
        " *Control plane CPU s* (in runs that measured it) is the local control plane's (etcd,"
        " kube-apiserver, kube-scheduler, kube-controller-manager, kwok) over the same span: the work"
        " each operator's requests and watches cause there, on the same cores."
    )
    took = results.get("run_seconds", 0.0)
    took_text = f"{took / 60:.0f} minutes" if took >= 90 else f"{took:.0f} s"
    measured = (
        f"Measured on {results['machine']}, {results['date']}. {load_sentence(results)}{note}"
        f" The run took {took_text}. Reproduce with `make bench-vs-kuberay` (or `{COMMAND}`)."
    )
    recorded = provenance.sentence(results)
    lines = [
        *paragraphs(TITLE, about, setup, cases, resources, reps_sentence(results), recorded, measured),
        *figures_table(results),
        "",
        *resources_table(results),
        "",
    ]
    summary = observations(results)
    if summary:
        lines += paragraphs("", summary)[2:]
    return "\n".join(lines).rstrip("\n") + "\n"


def shown(results: Mapping[str, Any]) -> dict[str, Any]:
    """What main prints: per case and operator, the median of each figure."""
    out: dict[str, Any] = {}
    for r in results["runs"]:
        key = f"{r['case']} {r['operator']}"
        for name in [*r["figures"], "cpu_seconds", "rss_peak_mib"]:
            found = stat(results["runs"], r["case"], r["operator"], name)
            if found:
                out.setdefault(key, {})[name] = round(found["median"], 3)
    return out


def write_docs(docs: Path, results: Mapping[str, Any]) -> None:
    """This section of `docs` and, from the same results, the limits table of scaling.md beside it."""
    from bench import limits  # it renders from this module's figures

    BLOCK.write(docs, render(results))
    limits.write(results, docs.parent / "scaling.md")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return finish(
        args,
        lambda: measure(lambda cluster: run(cluster, args), args.note),
        lambda results: write_docs(args.docs, results),
        shown,
    )


if __name__ == "__main__":
    sys.exit(main())
