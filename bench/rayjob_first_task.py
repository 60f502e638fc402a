"""From `kubectl apply` of a RayJob to its first Ray task running: rayscale beside KubeRay's operator.

    python -m bench.rayjob_first_task [--reps 5] [--operators rayscale,kuberay] [--hold 5]
                                      [--timeout 600] [--write-docs] [--note TEXT] [--out FILE]
                                      [--render-only]

One RayJob, the same for both (`fixture`): K8sJobMode, its cluster autoscaled
(``enableInTreeAutoscaling``), a head with ``num-cpus: "0"``, one group ``cpu`` of 1-CPU workers
(``minReplicas: 0``, ``replicas: 0``, ``maxReplicas: 2``), ``entrypointNumCpus: 1``. Its entrypoint
runs one Ray task (``num_cpus=0``) that writes the moment it runs (``time.time()``) to a file
whose path is in the entrypoint, then the job keeps running `--hold` seconds (so that both
operators, which read a running job every 3 s, see it RUNNING) and succeeds. The driver holds the
entrypoint's CPU, so the job needs one worker: the figures are about when that worker starts.

Ray is real on both sides, as local processes: the Ray bridge (e2e/raybridge/jobbridge.py) starts a
Ray head with its dashboard for each RayCluster (when the RayCluster appears, on both sides), a Ray
worker for each Running worker pod, and runs the submitter Job's ``ray job submit`` here. Each
operator in turn (the order rotates with each repetition), in a fresh namespace with a fresh process
(known to be watching once a head-only warm-up RayCluster has its head Running; it is deleted before
the clock starts):

- rayscale: ``rayscale run`` (controller and autoscaler, default settings,
  ``--allow-gcs-address-override`` to follow the bridge's GCS). Its autoscaler takes the
  entrypoint's declared CPU as demand from its first round (operator/rayscale/rayjob/demand.py).
- KubeRay's operator (tools/kuberay-oracle/versions.env, `make kuberay-operator`; its defaults,
  leader election off) with Ray's autoscaler sidecar (v1, KubeRay's default) started as a local
  process when the head pod is Running (bench/rayjob_first_task_kuberay.py); the operator reaches
  the dashboards through an HTTP proxy. Ray sees the job's demand once the job is submitted, which
  KubeRay does once the cluster is ready.

Milestones, seconds from the create call, each the first moment a watch (pods, the RayJob) or the
marker file shows it: head pod Running, first worker pod created, first worker pod Running, a
second worker pod created (none expected), ``jobStatus: RUNNING``, the first task running (the
time the task wrote), ``jobDeploymentStatus: Complete``. Per run also the 1-minute load average
at the start and the end, the dashboard calls KubeRay's operator made through the proxy, when the
sidecar started, and the bridge's errors. Nothing sleeps a fixed time: every wait polls with a
deadline. Results go to bench/results/rayjob_first_task.json (--out); --write-docs rewrites the
section "RayJobs: from apply to the first task, beside KubeRay's operator" of docs/benchmarks.md
(bench/rayjob_first_task_docs.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from e2e.raybridge.bridge import GCS_ANNOTATION
from e2e.raybridge.jobbridge import JobBridge
from e2e.raybridge.jobscenario import python, rayjob, submitter_template
from hack.localk8s import testcluster
from kubernetes_asyncio.client.exceptions import ApiException
from tests.support.polling import eventually

from bench import rayjob_first_task_docs as docs
from bench.operator_scale import POD_RESOURCES, ROOT, PodWatch, kube_apis, measured_main, warm_up, watching
from bench.procstat import load_average
from bench.rayjob_first_task_kuberay import V1, DashboardProxy, sidecar
from bench.rayjob_fleet import ProxiedBench, delete_jobs, install_rayservice_crd
from bench.rayjob_watch import JobWatch
from bench.vs_kuberay import Operated, choices, kuberay_bindir, kuberay_version, operated, positive, turns
from rayscale.api.names import RAYCLUSTER, RAYJOB

NAME = "first-task"
HEAD, WORKER = "head", "worker"
WARM_UP = "warmup"
POLL = 0.1  # seconds between looks at what no watch reports (the marker, the sidecar's start)


def entrypoint(marker: Path, hold: float) -> str:
    """One Ray task that writes when it ran to `marker` (atomically), then `hold` seconds more."""
    return python(
        "import os, time, ray\n"
        "ray.init()\n"
        "@ray.remote(num_cpus=0)\n"
        "def first(path):\n"
        "    import os, time\n"
        "    now = time.time()\n"
        "    with open(path + '.tmp', 'w') as f:\n"
        "        f.write(repr(now))\n"
        "    os.replace(path + '.tmp', path)\n"
        "    return now\n"
        f"print('first task ran at', ray.get(first.remote({str(marker)!r})), flush=True)\n"
        f"time.sleep({hold!r})\n"
    )


def fixture(name: str, marker: Path, hold: float) -> dict[str, Any]:
    """The RayJob both operators get (only the marker's path differs from run to run)."""

    def container(role: str) -> dict[str, Any]:
        return {"name": f"ray-{role}", "image": "rayproject/ray:2.60.0",
                "resources": {"requests": POD_RESOURCES, "limits": POD_RESOURCES}}  # fmt: skip

    cluster = {
        "rayVersion": "2.60.0",
        "enableInTreeAutoscaling": True,
        "headGroupSpec": {
            "rayStartParams": {"num-cpus": "0", "dashboard-host": "0.0.0.0"},
            "template": {"spec": {"containers": [container("head")]}},
        },
        "workerGroupSpecs": [
            {
                "groupName": "cpu",
                "replicas": 0,
                "minReplicas": 0,
                "maxReplicas": 2,
                "rayStartParams": {"num-cpus": "1"},
                "template": {"spec": {"containers": [container("worker")]}},
            }
        ],
    }
    return rayjob(
        name,
        entrypoint=entrypoint(marker, hold),
        entrypointNumCpus=1,
        submissionMode="K8sJobMode",
        shutdownAfterJobFinishes=False,
        rayClusterSpec=cluster,
        submitterPodTemplate=submitter_template(),
    )


def pod_milestones(pods: PodWatch) -> None:
    def of(kind: str) -> Any:
        return lambda labels: labels.get("ray.io/node-type") == kind

    pods.milestone("head_running", lambda w: w.count(of(HEAD), running=True) >= 1)
    pods.milestone("worker_created", lambda w: w.count(of(WORKER)) >= 1)
    pods.milestone("worker_running", lambda w: w.count(of(WORKER), running=True) >= 1)
    pods.milestone("second_worker_created", lambda w: w.count(of(WORKER)) >= 2)


def head_pod(pods: PodWatch) -> tuple[str, str] | None:
    """(the head pod's name, its cluster) once it is Running."""
    for name, (labels, phase, deleting) in pods.pods.items():
        if labels.get("ray.io/node-type") == HEAD and phase == "Running" and not deleting:
            return name, labels.get("ray.io/cluster", "")
    return None


def read_marker(marker: Path) -> float | None:
    with contextlib.suppress(OSError, ValueError):
        return float(marker.read_text())
    return None


async def gcs_of(objects: Any, ns: str, cluster: str) -> str | None:
    """The GCS address the bridge gave `cluster` (its annotation), once it has one."""
    with contextlib.suppress(ApiException):
        found = await objects.get_namespaced_custom_object(*RAYCLUSTER.at(ns), cluster)
        return ((found.get("metadata") or {}).get("annotations") or {}).get(GCS_ANNOTATION)
    return None


async def clear_warm_up(bench: ProxiedBench, ns: str) -> None:
    """The warm-up RayCluster deleted and gone with its pods: the bridge, started next, gives it no
    Ray, and no milestone counts its head."""
    await bench.objects.delete_namespaced_custom_object(*RAYCLUSTER.at(ns), WARM_UP)

    async def gone() -> bool:
        pods = await bench.core.list_namespaced_pod(ns, label_selector=f"ray.io/cluster={WARM_UP}")
        if pods.items:
            return False
        try:
            await bench.objects.get_namespaced_custom_object(*RAYCLUSTER.at(ns), WARM_UP)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    await eventually(gone, timeout=120, interval=POLL, message=f"{ns}: the warm-up RayCluster gone")


class Run:
    """One RayJob on one operator: its watches, its marker, KubeRay's sidecar, until Complete."""

    def __init__(self, bench: ProxiedBench, op: Operated, scratch: Path, hold: float) -> None:
        self.bench, self.op, self.scratch, self.hold = bench, op, scratch, hold
        self.marker = scratch / f"{op.ns}.mark"
        self.sidecar_at: float | None = None  # monotonic, its first start
        self.load0 = load_average()
        self.proc: subprocess.Popen[bytes] | None = None  # Ray's sidecar (KubeRay's side)
        self.exits: list[int] = []  # the sidecar's exit codes
        self.restart_at = 0.0  # monotonic: not started again before
        self.stack = contextlib.ExitStack()

    async def start_sidecar(self, pods: PodWatch) -> None:
        head = head_pod(pods)
        if head is None:
            return
        gcs = await gcs_of(self.bench.objects, self.op.ns, head[1])
        if gcs is None:
            return
        kubeconfig = Path(self.bench.cluster.kubeconfig)
        self.proc = self.stack.enter_context(
            sidecar(kubeconfig, self.scratch, head[1], self.op.ns, head[0], gcs)
        )
        if self.sidecar_at is None:
            self.sidecar_at = time.monotonic()

    async def follow_sidecar(self, pods: PodWatch) -> None:
        """Started once the head pod Runs; when it exits (it gives up when the head's node is not in
        the GCS yet), started again after the kubelet's back-off: 10 s, doubling up to 300 s."""
        now = time.monotonic()
        if self.proc is not None and self.proc.poll() is not None:
            self.exits.append(self.proc.returncode)
            self.proc = None
            self.restart_at = now + min(300.0, 10.0 * 2 ** (len(self.exits) - 1))
        if self.proc is None and now >= self.restart_at:
            await self.start_sidecar(pods)

    async def until_complete(
        self, pods: PodWatch, jobs: JobWatch, task: asyncio.Task[None], deadline: float
    ) -> float:
        """Wait (looking every POLL seconds, or at each pod change) until the RayJob is Complete and
        the marker is written; start the sidecar on KubeRay's side. The marker's time."""
        kuberay = self.op.name.startswith("kuberay")
        while True:
            if task.done():
                task.result()
                raise RuntimeError("the RayJob watch stopped")
            if self.op.running.poll() is not None:
                raise RuntimeError(f"{self.op.name} exited ({self.op.running.returncode})")
            if kuberay:
                await self.follow_sidecar(pods)
            state = jobs.deployment.get(NAME, "")
            if state == "Failed":
                raise RuntimeError(f"{self.op.ns}: the RayJob failed (jobStatus {jobs.job.get(NAME)!r})")
            marked = read_marker(self.marker)
            if NAME in jobs.complete and marked is not None:
                return marked
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.op.ns}: deployment {state!r}, job {jobs.job.get(NAME)!r}, marker {marked}"
                    f" by the deadline; pods {sorted(pods.reached)}"
                )
            pods.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pods.changed.wait(), timeout=POLL)

    async def measure(self, limit: float) -> dict[str, Any]:
        bench, ns = self.bench, self.op.ns
        jobs = JobWatch(bench.cluster.kubeconfig, ns)
        task = asyncio.create_task(jobs.run())
        try:
            async with watching(bench.core, ns) as (pods, pods_task):
                await asyncio.wait_for(jobs.synced.wait(), timeout=60)
                pod_milestones(pods)
                wall0, mono0 = time.time(), time.monotonic()
                await bench.objects.create_namespaced_custom_object(
                    *RAYJOB.at(ns), fixture(NAME, self.marker, self.hold)
                )
                marked = await self.until_complete(pods, jobs, task, mono0 + limit)
                if pods_task.done():
                    pods_task.result()
                since = {k: at - mono0 for k, at in pods.reached.items()}
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        seen = jobs.seen.get(NAME, {})
        since |= {
            "job_running": seen["RUNNING"] - wall0 if "RUNNING" in seen else None,
            "first_task": marked - wall0,
            "complete": jobs.complete[NAME] - wall0,
        }
        return {
            "milestones": {k: since.get(k) for k in docs.MILESTONES},  # None: never reached
            "sidecar_started_s": None if self.sidecar_at is None else self.sidecar_at - mono0,
            "sidecar_exits": self.exits,
            "job_status": jobs.job.get(NAME),
            "load_start": list(self.load0),
            "load_end": list(load_average()),
        }


async def measured_run(
    bench: ProxiedBench, proxy: DashboardProxy, name: str, rep: int, args: argparse.Namespace, scratch: Path
) -> dict[str, Any]:
    async with operated(bench, name, "rj-first") as op:
        async with watching(bench.core, op.ns) as (pods, pods_task):
            await warm_up(bench.objects, pods, pods_task, op.ns, WARM_UP)
            await clear_warm_up(bench, op.ns)
        head_env = V1 if name.startswith("kuberay") else {}  # rayscale: the bridge's default, as its e2e
        bridge = JobBridge(bench.cluster.kubeconfig, op.ns, log_dir=scratch / op.ns, head_env=head_env)
        await asyncio.to_thread(bridge.__enter__)
        proxy.bridge, proxy.forwarded, proxy.refused = bridge, 0, 0
        run = Run(bench, op, scratch, args.hold)
        try:
            result = await run.measure(args.timeout)
        except (TimeoutError, RuntimeError, ApiException) as exc:  # kept as a run that failed
            bench.say(f"  {name} rep {rep} failed: {exc}")
            result = {"milestones": dict.fromkeys(docs.MILESTONES), "error": str(exc)[:500],
                      "sidecar_exits": run.exits, "load_start": list(run.load0),
                      "load_end": list(load_average())}  # fmt: skip
        finally:
            await asyncio.to_thread(run.stack.close)  # the sidecar (SIGTERM, waited for)
            await delete_jobs(bench.objects, op.ns, limit=120)
            errors = [f"{e.kind} {e.pod}: {e.detail}" for e in bridge.errors()]
            await asyncio.to_thread(bridge.close)
            proxy.bridge = None
    if name.startswith("kuberay") and not proxy.forwarded and "error" not in result:
        result["error"] = "KubeRay's operator never reached a dashboard through the proxy"
    result |= {"operator": name, "rep": rep, "namespace": op.ns, "bridge_errors": errors,
               "proxied_calls": proxy.forwarded, "proxy_refused": proxy.refused}  # fmt: skip
    m = {k: "-" if v is None else f"{v:.1f}s" for k, v in result["milestones"].items()}
    bench.say(
        f"  {name} rep {rep}: worker created {m['worker_created']}, first task {m['first_task']},"
        f" Complete {m['complete']}; load {result['load_start'][0]:.1f} -> {result['load_end'][0]:.1f}"
    )
    return result


async def run(cluster: testcluster.ClusterHandle, args: argparse.Namespace) -> dict[str, Any]:
    began = time.monotonic()
    bindir = kuberay_bindir()
    runs: list[dict[str, Any]] = []
    scratch = Path(tempfile.mkdtemp(prefix="rayjob-first-task-"))
    proxy = DashboardProxy()
    async with kube_apis(cluster) as (core, objects), proxy.serving() as proxy_url:
        cluster.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", "crd/rayjobs.ray.io")
        await install_rayservice_crd(cluster, bindir)
        bench = ProxiedBench(cluster, core, objects, bindir, args.timeout)
        bench.proxy = proxy_url
        bench.say(f"apply to first task: {args.reps} repetition(s) x {args.operators}; logs in {scratch}")
        for rep in range(args.reps):
            for name in turns(args.operators, rep):
                runs.append(await measured_run(bench, proxy, name, rep, args, scratch))
    return {
        "runs": runs,
        "reps": args.reps,
        "operators": args.operators,
        "hold_s": args.hold,
        "kuberay_version": kuberay_version(),
        "ray_version": importlib.metadata.version("ray"),
        "run_seconds": time.monotonic() - began,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--reps", type=positive, default=5, help="repetitions per operator")
    parser.add_argument("--operators", type=choices(docs.OPERATORS), default=list(docs.OPERATORS))
    parser.add_argument("--hold", type=float, default=5.0, help="seconds the job runs after its task")
    parser.add_argument("--timeout", type=float, default=600, help="deadline per run, seconds")
    return measured_main(parser, argv, ROOT / docs.BLOCK.source, run, docs.write, docs.shown)


if __name__ == "__main__":
    sys.exit(main())
