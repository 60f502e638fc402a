"""`make demo`: rayscale autoscaling a RayCluster for a real Ray program, on a real API server.

Run from the repository root as ``python -m e2e.demo`` (what `make demo` does):

1. Use the local control plane in e2e/.cluster (started unless it runs), or the cluster that
   RAYSCALE_TARGET_KUBECONFIG names, checked as for the tests (hack/localk8s/target.py): never
   $KUBECONFIG's.
2. Install the CRDs and the Helm chart's ServiceAccount and RBAC (no operator replica: there is no
   image here).
3. Run `rayscale run` out of cluster with a token of the chart's ServiceAccount.
4. Start the Ray bridge (e2e/raybridge/): a real Ray head, and a real Ray worker for every worker
   pod that runs, since the local control plane's fake nodes run no containers.
5. Apply examples/demo/raycluster-autoscaling.yaml, pointed at the bridge's Ray head.
6. A Ray driver submits tasks, actors and a placement group. The worker groups grow, and
   `status.autoscaler` and Events say why (also why one actor never gets a GPU); then the driver
   ends, and rayscale drains the idle workers through Ray and removes their pods.

The control plane keeps running afterwards, with the RayCluster and its head pod (`make
cluster-down` stops it); rayscale, the Ray processes and the driver stop with the demo.

`run` is the demo without the cluster bring-up: tests/integration/test_demo.py runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from e2e.raybridge import rayproc
from e2e.raybridge.bridge import GCS_ANNOTATION, RayBridge, head_params
from e2e.raybridge.driver import RayDriver
from hack.localk8s import launcher, target, testcluster
from kubernetes_asyncio import client, config

from rayscale.api.names import RAYCLUSTER, RAYRESOURCEREQUEST
from rayscale.ray.client import GcsClient, GcsError
from rayscale.ray.model import ClusterState, NodeStatus

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "examples" / "demo" / "raycluster-autoscaling.yaml"
NS = "rayscale-demo"
RELEASE = "rayscale"
SYSTEM_NS = "rayscale-system"
NAME = "demo"  # the RayCluster in MANIFEST

# The Ray program (the driver's commands, e2e/raybridge/driver_main.py).
TASKS, TASK_SECONDS = 4, 10  # tasks of 1 CPU
PG_BUNDLES = [{"CPU": 1}, {"CPU": 1}]  # STRICT_SPREAD: on two different Ray nodes
ACTORS = ("model-a", "model-b")  # actors holding 1 GPU each; group gpu has at most one worker

# Deadlines (seconds): generous for `ray start` on a busy 2-core machine.
WORK_DEADLINE = 180.0  # the driver's work placed and the tasks done
IDLE_DEADLINE = 120.0  # every worker removed once the driver ended (idle timeout 15 s)


class DemoError(RuntimeError):
    """The demo did not get where it should; the message says where it was."""


def say(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def note(text: str) -> None:
    print(f"    {text}", flush=True)


class Kubectl:
    def __init__(self, binary: str, kubeconfig: str) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.env = {**os.environ, "KUBECONFIG": kubeconfig}

    def __call__(self, *args: str, check: bool = True, stdin: str | None = None, quiet: bool = False) -> str:
        out = subprocess.run([self.binary, *args], env=self.env, input=stdin, capture_output=True, text=True,
                             check=False, timeout=180)  # fmt: skip
        if check and out.returncode != 0:
            raise DemoError(f"kubectl {' '.join(args)} failed: {out.stderr.strip()}")
        if not quiet and out.stdout.strip():
            print(out.stdout.rstrip(), flush=True)
        return out.stdout


@dataclass
class Demo:
    """Where the demo runs. The defaults are `make demo`'s; the test gives its own names."""

    kubectl: Kubectl
    helm: str
    workdir: Path  # rayscale's log, Ray's logs, the driver's log
    namespace: str = NS
    system_namespace: str = SYSTEM_NS
    release: str = RELEASE  # the chart's release and full name: the ServiceAccount's name
    rendered: str = ""  # the chart's manifests, once installed
    status_port: int = 0  # rayscale's API (`rayscale status` reads it); chosen when the demo starts
    page_port: int = 0  # rayscale's status page

    @property
    def kubeconfig(self) -> str:
        return self.kubectl.kubeconfig


@dataclass
class Outcome:
    """What the demo saw, for the test."""

    peak: dict[str, int] = field(default_factory=dict)  # most live worker pods of a group at once
    groups: dict[str, str] = field(default_factory=dict)  # every worker pod seen -> its group
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    unmet: list[dict[str, Any]] = field(default_factory=list)  # status.autoscaler.unmetDemand entries
    placed: dict[str, list[str]] = field(default_factory=dict)  # work -> the pods Ray ran it on
    left: dict[str, int] = field(default_factory=dict)  # live worker pods of each group at the end
    replicas: dict[str, int] = field(default_factory=dict)  # each group's replicas at the end
    ray_workers_left: int = -1  # live Ray worker nodes at the end
    seconds: dict[str, float] = field(default_factory=dict)  # how long each part took
    status: str = ""  # what `rayscale status` printed at the end


# ---------------------------------------------------------------------------- set-up


def install(demo: Demo) -> None:
    """The CRDs (server-side apply) and the chart's ServiceAccount and RBAC for `demo.namespace`."""
    kubectl = demo.kubectl
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"), quiet=True)
    crds = (f"crd/{name.crd_name}" for name in (RAYCLUSTER, RAYRESOURCEREQUEST))
    kubectl("wait", "--for=condition=Established", "--timeout=60s", *crds, quiet=True)
    for ns in (demo.system_namespace, demo.namespace):
        kubectl("create", "namespace", ns, check=False, quiet=True)
    demo.rendered = subprocess.run(
        [demo.helm, "template", demo.release, str(ROOT / "charts/rayscale"), "--namespace",
         demo.system_namespace, "--set", "replicas=0", "--set", f"watchNamespace={{{demo.namespace}}}",
         "--set", f"fullnameOverride={demo.release}"],
        check=True, stdout=subprocess.PIPE, text=True, timeout=180,
    ).stdout  # fmt: skip
    kubectl("apply", "-f", "-", stdin=demo.rendered, quiet=True)


def token_kubeconfig(demo: Demo, path: Path) -> str:
    """A kubeconfig for the API server with a token of the chart's ServiceAccount."""
    kubectl = demo.kubectl
    token = kubectl("create", "token", demo.release, "-n", demo.system_namespace, "--duration=2h", quiet=True)
    admin = json.loads(kubectl("config", "view", "--raw", "-o", "json", quiet=True))
    cluster = admin["clusters"][0]
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "clusters": [cluster],
        "users": [{"name": "rayscale", "user": {"token": token.strip()}}],
        "contexts": [{"name": "rayscale", "context": {"cluster": cluster["name"], "user": "rayscale"}}],
        "current-context": "rayscale",
    }))  # fmt: skip
    return str(path)


def start_operator(demo: Demo, kubeconfig: str, log: Path) -> subprocess.Popen[bytes]:
    """`rayscale run` for the demo's namespace; it follows the RayCluster's GCS annotation to the
    bridge's Ray head (--allow-gcs-address-override) and dies with this process."""
    # Its API and status page on the demo's ports (free ones: another rayscale may hold 8082/8083).
    demo.status_port, demo.page_port = launcher.free_port(preferred=8082), launcher.free_port(preferred=8083)
    listen = ["--status-port", str(demo.status_port), "--status-address", "127.0.0.1",
              "--status-page", "--status-page-port", str(demo.page_port)]  # fmt: skip
    with log.open("ab") as out:
        argv, preexec = launcher.dying_with_parent(
            [sys.executable, "-m", "rayscale", "run", "--namespace", demo.namespace, "--liveness", "",
             "--metrics-port", "0", *listen, "--autoscaler-interval", "2", "--allow-gcs-address-override"]
        )  # fmt: skip
        return subprocess.Popen(
            argv, env={**os.environ, "KUBECONFIG": kubeconfig}, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=preexec,
        )  # fmt: skip


def demo_cluster(gcs_address: str) -> dict[str, Any]:
    """MANIFEST, pointed at the bridge's Ray head."""
    body: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    body["metadata"].setdefault("annotations", {})[GCS_ANNOTATION] = gcs_address
    return body


# ---------------------------------------------------------------------------- the Ray program


class Work:
    """The driver's work: tasks, a placement group and two GPU actors; where Ray ran them."""

    def __init__(self, ray: RayDriver) -> None:
        self.ray = ray
        self.tasks: list[str] | None = None  # Ray node ids, once every task is done
        self.pg: dict[str, str] | None = None  # bundle -> Ray node id, once placed
        self.actors: dict[str, str | None] = dict.fromkeys(ACTORS)  # -> Ray node id, once placed

    async def submit(self) -> None:
        await self.ray.call("burst", name="tasks", count=TASKS, seconds=TASK_SECONDS, num_cpus=1)
        await self.ray.call("pg", name="pg", bundles=PG_BUNDLES, strategy="STRICT_SPREAD")
        for name in self.actors:
            await self.ray.call("actor", name=name, num_cpus=0, num_gpus=1)

    async def poll(self) -> None:
        if self.tasks is None:
            self.tasks = await self.ray.call("burst_done", name="tasks")
        if self.pg is None:
            self.pg = await self.ray.call("pg_nodes", name="pg")
        for name, node in self.actors.items():
            if node is None:
                self.actors[name] = await self.ray.call("actor_node", name=name)

    def placed(self) -> list[str]:
        return [name for name, node in self.actors.items() if node]

    def waiting(self) -> list[str]:
        return [name for name, node in self.actors.items() if not node]

    def done(self) -> bool:
        """The tasks are done, the placement group and one actor are placed (the other actor
        never is: group gpu stops at one worker)."""
        return self.tasks is not None and self.pg is not None and bool(self.placed())

    def text(self) -> str:
        return (
            f"{TASKS} tasks {'done' if self.tasks is not None else 'not done'}, "
            f"placement group {'placed' if self.pg is not None else 'waiting'}, "
            f"GPU actors placed {len(self.placed())}/{len(self.actors)}"
        )


# ---------------------------------------------------------------------------- watching


def _live(pod: Mapping[str, Any]) -> bool:
    return not pod["metadata"].get("deletionTimestamp")


def _group(pod: Mapping[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get("ray.io/group", "?"))


def _is_worker(pod: Mapping[str, Any]) -> bool:
    return (pod["metadata"].get("labels") or {}).get("ray.io/node-type") == "worker"


class Watch:
    """Reads the RayCluster, its pods, its Events and Ray's GCS; prints what changed."""

    def __init__(self, demo: Demo, api: client.ApiClient, outcome: Outcome) -> None:
        self.demo = demo
        self.core: Any = client.CoreV1Api(api)  # untyped: responses are read raw (_preload_content=False)
        self.objects = client.CustomObjectsApi(api)
        self.gcs: GcsClient | None = None  # Ray's view, once set
        self.outcome = outcome
        self.started = time.monotonic()
        self.cluster: dict[str, Any] = {}
        self.pods: list[dict[str, Any]] = []
        self.state: ClusterState | None = None
        self._line = ""
        self._events: dict[str, int] = {}  # Event name -> the count printed

    def stamp(self) -> str:
        return f"+{time.monotonic() - self.started:3.0f}s"

    async def read(self) -> None:
        ns = self.demo.namespace
        self.cluster = await self.objects.get_namespaced_custom_object(*RAYCLUSTER.at(ns), NAME)
        listed = await self.core.list_namespaced_pod(
            ns, label_selector=f"ray.io/cluster={NAME}", _preload_content=False
        )
        self.pods = list((await listed.json()).get("items") or [])
        if self.gcs is not None:
            try:
                self.state = await self.gcs.get_cluster_resource_state()
            except GcsError:
                self.state = None
                await self.gcs.close()  # the next call dials afresh
        for pod in self.pods:
            if _is_worker(pod):
                self.outcome.groups[pod["metadata"]["name"]] = _group(pod)
        for name in self.group_names():
            live = len(self.workers(name))
            self.outcome.peak[name] = max(self.outcome.peak.get(name, 0), live)
        for entry in (self.cluster.get("status") or {}).get("autoscaler", {}).get("unmetDemand") or []:
            if entry not in self.outcome.unmet:
                self.outcome.unmet.append(entry)

    def group_names(self) -> list[str]:
        return [str(g["groupName"]) for g in self.cluster["spec"]["workerGroupSpecs"]]

    def replicas(self) -> dict[str, int]:
        return {
            str(g["groupName"]): int(g.get("replicas") or 0) for g in self.cluster["spec"]["workerGroupSpecs"]
        }

    def workers(self, group: str | None = None) -> list[dict[str, Any]]:
        """Live (not being deleted) worker pods, of `group` if given."""
        return [p for p in self.pods if _is_worker(p) and _live(p) and (group is None or _group(p) == group)]

    def pod_of(self, node_id: str) -> str:
        for node in self.state.nodes if self.state else ():
            if node.node_id == node_id:
                return node.instance_id or "the head"
        return node_id[:8]

    def ray_workers(self) -> int:
        return sum(1 for n in (self.state.nodes if self.state else ()) if n.alive and n.instance_id)

    def group_text(self, group: str, replicas: int) -> str:
        """``cpu: 3 replicas, 3 pods, 2 Ray nodes (1 idle)``: what rayscale asked for, what the
        controller made of it, what Ray runs on those pods."""
        live = self.workers(group)
        going = [p for p in self.pods if _is_worker(p) and _group(p) == group and not _live(p)]
        pending = sum(1 for p in live if (p.get("status") or {}).get("phase") != "Running")
        nodes = [self.state.node_by_instance(p["metadata"]["name"]) for p in live] if self.state else []
        alive = [n for n in nodes if n is not None and n.alive]
        text = f"{group}: {_count(replicas, 'replica')}, {_count(len(live), 'pod')}"
        if pending:
            text += f" ({pending} not Running)"
        if going:
            text += f" (+{len(going)} being deleted)"
        if self.state is not None:
            text += f", {_count(len(alive), 'Ray node')}"
            states = [
                f"{sum(1 for n in alive if n.status is s)} {word}"
                for s, word in ((NodeStatus.IDLE, "idle"), (NodeStatus.DRAINING, "draining"))
                if any(n.status is s for n in alive)
            ]
            if states:
                text += f" ({', '.join(states)})"
        return text

    async def step(self, work: str = "", *, progress: bool = True) -> None:
        """Read everything once; print new Events, and the progress line if it changed."""
        await self.read()
        await self.print_events()
        if not progress:
            return
        replicas = self.replicas()
        line = " | ".join(self.group_text(g, replicas[g]) for g in self.group_names())
        if work:
            line += f" | {work}"
        if line != self._line:
            print(f"  {self.stamp()}  {line}", flush=True)
            self._line = line

    async def print_events(self) -> None:
        uid = self.cluster["metadata"]["uid"]
        listed = await self.core.list_namespaced_event(
            self.demo.namespace, field_selector=f"involvedObject.uid={uid}", _preload_content=False
        )
        items = sorted(
            (await listed.json()).get("items") or [],
            key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""),
        )
        for event in items:
            name, count = str(event["metadata"]["name"]), int(event.get("count") or 1)
            if self._events.get(name, 0) >= count:
                continue
            self._events[name] = count
            kind, reason, message = (
                str(event.get("type")),
                str(event.get("reason")),
                str(event.get("message")),
            )
            self.outcome.events.append((kind, reason, message))
            times = f" (x{count})" if count > 1 else ""
            warning = " [Warning]" if kind == "Warning" else ""
            print(f"  {self.stamp()}  Event {reason}{warning}{times}: {message}", flush=True)

    async def until(
        self,
        check: Callable[[], bool],
        *,
        timeout: float,  # noqa: ASYNC109
        what: str,
        work: Work | None = None,
        progress: bool = True,
    ) -> None:
        """Poll every second, printing changes, until `check()` is true; DemoError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            if work is not None:
                await work.poll()
            await self.step(work.text() if work is not None else "", progress=progress)
            if check():
                return
            if time.monotonic() > deadline:
                raise DemoError(f"not within {timeout:.0f}s: {what}; last seen: {self._line}")
            await asyncio.sleep(1)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# ---------------------------------------------------------------------------- the demo


async def run(demo: Demo) -> Outcome:
    """Everything after the control plane: CRDs and RBAC, rayscale, the Ray bridge, the RayCluster,
    the driver's work, the scale-up and the scale-down. Stops what it started, also on failure."""
    outcome = Outcome()
    ns = demo.namespace
    t0 = time.monotonic()
    say("Installing the CRDs (server-side apply) and the chart's ServiceAccount and RBAC")
    install(demo)
    # A RayCluster of an earlier demo, and its Events (they would be listed with the new ones).
    demo.kubectl("delete", "rayresourcerequest,raycluster", "--all", "-n", ns, "--wait=true", quiet=True)
    demo.kubectl("delete", "events", "--all", "-n", ns, quiet=True)
    log = demo.workdir / "rayscale.log"
    say(f"Running `rayscale run --namespace {ns}` with the chart's ServiceAccount token (log: {log})")
    operator = start_operator(demo, token_kubeconfig(demo, demo.workdir / "sa.kubeconfig"), log)
    bridge: RayBridge | None = None
    try:
        say("Starting a real Ray head: the Ray bridge runs a real Ray node (`ray start`) for each pod,")
        note("since the fake nodes of the local control plane run no containers")
        body = demo_cluster("")
        bridge = RayBridge(demo.kubeconfig, ns, NAME, head=head_params(body), log_dir=demo.workdir / "ray")
        bridge.start()  # in this thread: the Ray processes die with it
        body = demo_cluster(bridge.gcs_address)
        note(f"Ray head (GCS) at {bridge.gcs_address}; Ray's logs in {demo.workdir / 'ray'}")
        say(f"Applying {MANIFEST.relative_to(ROOT)}, annotated with the Ray head's address:")
        note("groups cpu (2 CPUs a node, max 3) and gpu (1 GPU, max 1), both at 0; idle timeout 15 s")
        demo.kubectl("apply", "-n", ns, "-f", "-", stdin=yaml.safe_dump(body))
        outcome.seconds["set-up"] = time.monotonic() - t0
        await watch_ray(demo, bridge, outcome)
        rayscale_status(demo, outcome)
        summary(demo)
    except BaseException:
        print(f"--- the end of rayscale's log ({log}) ---\n" + rayproc.file_tail(log, 40), flush=True)
        if bridge is not None:
            print("--- the Ray bridge ---\n" + "\n".join(map(str, bridge.history()[-20:])), flush=True)
        raise
    finally:
        launcher.end(operator, 30)
        if bridge is not None:
            bridge.close()
    outcome.seconds["total"] = time.monotonic() - t0
    return outcome


async def watch_ray(demo: Demo, bridge: RayBridge, outcome: Outcome) -> None:
    """The cluster ready, the driver's work and the scale-up, then the driver's exit and the
    scale-down, printed as they happen."""
    cfg = client.Configuration()
    await config.load_kube_config(config_file=demo.kubeconfig, client_configuration=cfg)
    async with contextlib.AsyncExitStack() as stack:
        watch = Watch(demo, await stack.enter_async_context(client.ApiClient(configuration=cfg)), outcome)
        await watch.until(
            lambda: (watch.cluster.get("status") or {}).get("state") == "ready",
            timeout=90,
            what=f"RayCluster {NAME} ready",
            progress=False,
        )
        meanwhile(demo, bridge.gcs_address)

        say("Starting a Ray driver (a Ray program connected to the head) and submitting its work:")
        note(f"{TASKS} tasks of 1 CPU, {TASK_SECONDS} s each; a placement group of 2 x {{CPU: 1}} on two")
        note(f"different nodes (STRICT_SPREAD); two actors ({', '.join(ACTORS)}) holding a GPU each.")
        note("rayscale reads this pending demand from Ray's GCS, bin-packs it onto the groups and")
        note("patches their replicas; the Ray bridge starts a Ray node for each new pod")
        t0 = time.monotonic()
        ray = await stack.enter_async_context(
            RayDriver.start(bridge.gcs_address, demo.workdir / "driver.log")
        )
        # Ray's view, through rayscale's own GCS client; opened after the driver's process started
        # (gRPC warns about a fork while its threads are busy).
        watch.gcs = await stack.enter_async_context(GcsClient(bridge.gcs_address, timeout=5))
        work = Work(ray)
        await work.submit()
        watch.started = time.monotonic()
        print(
            "  (time | per group: replicas rayscale asked for, pods, their Ray nodes | the work)", flush=True
        )
        await watch.until(work.done, timeout=WORK_DEADLINE, what="the driver's work done", work=work)
        outcome.seconds["scale-up and work"] = time.monotonic() - t0
        explain(watch, work, outcome)

        [waiting] = work.waiting()
        say(f"The driver is done and exits: Ray frees its placement group and actors ({waiting},")
        note("which never got a GPU, is dropped). Every worker is idle now: after idleTimeoutSeconds")
        note("(15 s) rayscale asks Ray to drain it (DrainNode), then deletes its pod (ScaledDown: IDLE,")
        note("or DRAINED when Ray accepted the drain in an earlier round)")
        t1 = time.monotonic()
        await ray.close()
        await watch.until(
            lambda: not watch.workers() and not any(watch.replicas().values()) and watch.ray_workers() == 0,
            timeout=IDLE_DEADLINE,
            what="every worker removed after its idle timeout",
        )
        outcome.seconds["scale-down"] = time.monotonic() - t1
        outcome.left = {g: len(watch.workers(g)) for g in watch.group_names()}
        outcome.replicas = watch.replicas()
        outcome.ray_workers_left = watch.ray_workers()


def explain(watch: Watch, work: Work, outcome: Outcome) -> None:
    """Where Ray ran the work, and why one actor still waits (status.autoscaler)."""
    [actor] = work.placed()
    outcome.placed = {
        "tasks": sorted({watch.pod_of(n) for n in work.tasks or []}),
        "placement group": sorted({watch.pod_of(n) for n in (work.pg or {}).values()}),
        "actor": [watch.pod_of(str(work.actors[actor]))],
    }
    say("The work ran on the pods rayscale added (Ray's own view: Ray node -> pod name):")
    note(f"the tasks: {', '.join(outcome.placed['tasks'])}")
    note(f"the placement group's bundles: {', '.join(outcome.placed['placement group'])}")
    note(f"actor {actor}: {outcome.placed['actor'][0]}")
    say(
        f"Why {', '.join(work.waiting())} still waits: rayscale's latest decision, in the RayCluster's status"
    )
    note(f"(kubectl -n {watch.demo.namespace} get raycluster {NAME} -o yaml: status.autoscaler)")
    auto = (watch.cluster.get("status") or {}).get("autoscaler") or {}
    shown: dict[str, Any] = {
        "groups": [{"name": g.get("name"), **g} for g in auto.get("groups") or []],
        "unmetDemand": auto.get("unmetDemand") or [],
        "gcs": {k: v for k, v in (auto.get("gcs") or {}).items() if k in ("address", "reachable")},
    }
    print(_indent(yaml.safe_dump(shown, sort_keys=False, width=100)), flush=True)


def meanwhile(demo: Demo, gcs_address: str) -> None:
    ns = demo.namespace
    bindir = Path(demo.kubectl.binary).parent
    say("Meanwhile, in another shell:")
    note(f"export KUBECONFIG={Path(demo.kubeconfig).resolve()} PATH={bindir}:$PATH")
    note(f"kubectl -n {ns} get pods -L ray.io/group -w")
    note(f"kubectl -n {ns} get raycluster {NAME} -o jsonpath='{{.status.autoscaler}}' | python3 -m json.tool")
    note(f"kubectl -n {ns} get events --field-selector involvedObject.name={NAME} -w")
    note(
        f"RAY_AUTH_MODE=disabled {Path(rayproc.ray_cli())} status --address {gcs_address}   # Ray's own view"
    )
    note(f"{status_command(demo)} --watch   # rayscale's view: replicas, demand, decisions")
    note(f"open {page_url(demo)}   # the same on rayscale's status page")


def status_command(demo: Demo) -> str:
    """`rayscale status` for the demo's cluster, at the demo's operator (no pod to proxy to)."""
    venv = Path(sys.executable).parent
    return f"{venv}/rayscale status {demo.namespace}/{NAME} --endpoint http://127.0.0.1:{demo.status_port}"


def page_url(demo: Demo) -> str:
    return f"http://127.0.0.1:{demo.page_port}/clusters/{demo.namespace}/{NAME}"


def rayscale_status(demo: Demo, outcome: Outcome) -> None:
    """What `rayscale status` says once the workers are gone: each replica's life and the decisions
    that launched and removed them (read before the demo's rayscale stops)."""
    say("rayscale's own account of what happened (`rayscale status`, newest decisions first):")
    command = [*status_command(demo).split(), "--decisions", "50"]  # all it keeps
    out = subprocess.run(command, env={**os.environ, "KUBECONFIG": demo.kubeconfig, "COLUMNS": "100"},
                         capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
    if out.returncode != 0:
        raise DemoError(f"rayscale status failed: {out.stderr.strip() or out.stdout.strip()}")
    outcome.status = out.stdout
    print(_indent(out.stdout), flush=True)


def summary(demo: Demo) -> None:
    ns = demo.namespace
    say("Done: back to the head alone. What the API server holds now:")
    demo.kubectl("get", "raycluster", NAME, "-n", ns)
    demo.kubectl("get", "pods", "-n", ns, "-L", "ray.io/group")


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.rstrip().splitlines())


# ---------------------------------------------------------------------------- where to look next


def next_steps(demo: Demo, *, local_dir: Path | None, named: target.Target | None = None) -> None:
    """What the person can do with what the demo leaves behind."""
    ns = demo.namespace
    bindir = Path(demo.kubectl.binary).parent
    venv = Path(sys.executable).parent
    print(f"\nThe control plane keeps running, with the RayCluster {ns}/{NAME} and its head pod; rayscale")
    print("and the Ray processes stopped with the demo. Try next:")
    kubeconfig = named.source if named else Path(demo.kubeconfig).resolve()
    print(f"  export KUBECONFIG={kubeconfig} PATH={bindir}:$PATH")
    if named and named.context:
        print(f"  kubectl config use-context {named.context}   # the context the demo used")
    print("  # the Ray bridge and rayscale again, each in a shell of its own (Ctrl-C stops them):")
    print(f"  {venv}/python -m e2e.raybridge.bridge --namespace {ns} --cluster {NAME} --annotate")
    print(f"  {venv}/rayscale run --namespace {ns} --allow-gcs-address-override --status-page")
    print(f"  kubectl -n {ns} apply -f examples/demo/rayresourcerequest.yaml   # asked from outside Ray")
    print(f"  kubectl -n {ns} get rayresourcerequest reserve -w       # Pending, then Satisfied")
    print(f"  {venv}/rayscale status {ns}/{NAME} --endpoint http://127.0.0.1:8082 --watch")
    print(f"  open http://127.0.0.1:8083/   # the status page: every RayCluster, then {NAME}'s replicas")
    print(f"  {venv}/rayscale simulate --from-cluster {ns}/{NAME} --endpoint http://127.0.0.1:8082 "
          "--set groups.gpu.maxReplicas=2   # what if? the latest decision again, offline")  # fmt: skip
    print(f"  {venv}/rayscale simulate examples/scenarios/mixed-cpu-gpu.yaml   # ask the scheduler offline")
    if local_dir is not None:
        default = local_dir.resolve() == (ROOT / "e2e" / ".cluster").resolve()
        where = "" if default else f" CLUSTER_DIR={local_dir}"
        print(f"Stop the local control plane with `make cluster-down{where}`.")


# ---------------------------------------------------------------------------- make demo


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", default=str(ROOT / "e2e" / ".cluster"), help="local control plane state dir")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        rayproc.ray_cli()
    except rayproc.RayProcessError:
        print(
            "make demo needs Ray: `make install` puts it into .venv (the dev extra pins it)", file=sys.stderr
        )
        return 1

    say("Building (first run only) or reusing the control-plane binaries and Helm")
    bindir = Path(launcher.build())
    helm = subprocess.run([str(ROOT / "e2e/tools/helm.sh")], check=True, stdout=subprocess.PIPE,
                          text=True).stdout.strip().splitlines()[-1]  # fmt: skip
    if os.environ.get(target.TARGET_KUBECONFIG):  # never $KUBECONFIG's cluster
        say(f"Checking the cluster {target.TARGET_KUBECONFIG}={os.environ[target.TARGET_KUBECONFIG]} names")
    else:
        say("Bringing up the local control plane (etcd, kube-apiserver, scheduler, controller-manager, kwok)")
        note(f"in {args.dir} (reused when it runs); it keeps running after the demo")
    try:
        cluster = testcluster.for_demo(bindir, Path(args.dir), by="make demo (e2e/demo.py)")
    except (target.TargetError, launcher.LaunchError) as exc:
        print(f"\nmake demo failed: {exc}", file=sys.stderr)
        return 1
    named = cluster.named if cluster.origin == "target" else None
    try:
        with tempfile.TemporaryDirectory(prefix="rayscale-demo-") as tmp:
            demo = Demo(Kubectl(str(bindir / "kubectl"), str(cluster.kubeconfig)), helm, Path(tmp))
            asyncio.run(run(demo))
            next_steps(demo, local_dir=cluster.state_dir, named=named)
    except DemoError as exc:
        print(f"\nmake demo failed: {exc}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()  # only removes the copy of a named cluster's kubeconfig
    print(f"(the demo took {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
