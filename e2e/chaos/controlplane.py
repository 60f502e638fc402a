"""The control-plane half of `make chaos`: faults of the operator, its leader election, the API
server, etcd and the network between them, while RayClusters scale up and down.

    .venv/bin/python -m e2e.chaos.controlplane                  # every fault, CHAOS_RUNS times (3)
    .venv/bin/python -m e2e.chaos.controlplane --fault leader-frozen --runs 1

A private local control plane (its API server audit-logs every write) and a fault proxy
(`e2e.chaos.faultproxy`) in front of it; two `rayscale run --leader-elect` replicas (one, for the
single-replica faults) talk through the proxy. Each run, in a namespace of its own: three
RayClusters are created and converge; an editor changes their replicas every second or so (and
labels them, a user edit that must survive); a fault is injected at a random moment and ends;
the editor makes its last change; the run waits for the clusters to converge (exactly the
workers asked, all Running) and times it from the fault's end. `invariants.PodLedger` checks
every pod event as it arrives; after the run the audit log shows whether any write came from a
replica that did not hold the Lease. Each run records an `Outcome` (e2e/.results/chaos/).

In the autoscaling faults (`Fault.autoscaling`) rayscale's autoscaler drives the scaling instead:
the clusters start at `replicas: 0` and each has a RayResourceRequest for `count` bundles of one
CPU (one worker each); the editor only raises the counts, since with no Ray (the GCS unreachable)
rayscale scales up for requests but never removes a running worker. The ledger's "asked" is the
count, so no worker may be deleted at all, and the clusters converge to exactly the counts, with
`replicas` equal to them. The controller is rayscale's own (`--mode all`) or KubeRay's operator
(`Fault.controller == "kuberay"`, with rayscale `--mode autoscaler` beside it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import aiohttp
from e2e.chaos.faultproxy import FaultProxy, Rule
from e2e.chaos.invariants import PodLedger, audit_events, leader_violations
from e2e.chaos.results import Outcome
from hack.localk8s import testcluster
from kubernetes_asyncio import client, config, watch
from tests.support.builders import example
from tests.support.operators import AUTOSCALING_EXTRA, KubeRayOperator, Operator
from tests.support.polling import Timeout, eventually
from tests.support.watching import end_watch

from rayscale.api.names import RAYCLUSTER, RAYRESOURCEREQUEST

SUITE = "control-plane"
ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
# No Ray here: nothing listens at the GCS address, so it is unreachable at once.
UNREACHABLE_GCS = {"rayscale.io/gcs-address": "127.0.0.1:1"}
OPT_IN = {"rayscale.io/autoscaler": "true"}
CLUSTERS = 3
MAX_REPLICAS = 6
CONVERGE_SECONDS = 180.0
SELECTOR = "ray.io/node-type=worker"
BECAME = re.compile(r"became leader: Lease \S+ held by (\S+)")


@dataclasses.dataclass
class Run:
    """One run's world: the control plane, the proxy, the replicas, the ledger."""

    cluster: testcluster.ClusterHandle
    proxy: FaultProxy
    api: client.ApiClient
    namespace: str
    rng: random.Random
    mode: str = "all"
    leader_elect: bool = True
    autoscaling: bool = False  # rayscale autoscales (every second), for the RayResourceRequests
    kuberay: KubeRayOperator | None = None  # KubeRay's operator as the controller, beside rayscale
    replicas: list[Operator] = dataclasses.field(default_factory=list)
    ledger: PodLedger = dataclasses.field(default_factory=PodLedger)
    labels: dict[str, str] = dataclasses.field(default_factory=dict)  # cluster -> user label value

    def start_replica(self) -> Operator:
        extra = ["--kubeconfig", str(self.proxy.kubeconfig)]
        if self.leader_elect:
            extra += ["--leader-elect", "--leader-election-namespace", self.namespace]
        if self.autoscaling:
            extra += AUTOSCALING_EXTRA
        op = Operator(self.cluster, self.namespace, mode=self.mode, extra=extra)
        op.start()
        self.replicas.append(op)
        return op

    def leader(self) -> Operator | None:
        """The live replica that became leader last (without leader election: the live one)."""
        best: tuple[str, Operator] | None = None
        for op in self.replicas:
            if op.proc is None or op.proc.poll() is not None:
                continue
            if not self.leader_elect:
                return op
            for line in op.log.read_text(errors="replace").splitlines():
                if BECAME.search(line) and (best is None or line[:23] > best[0]):
                    best = (line[:23], op)  # the log line's timestamp
        return best[1] if best else None

    def stop(self) -> None:
        for op in self.replicas:
            with contextlib.suppress(OSError, ProcessLookupError):
                if op.proc is not None and op.proc.poll() is None:
                    os.killpg(op.proc.pid, signal.SIGCONT)
            op.stop()
        if self.kuberay is not None:
            self.kuberay.stop()


def component_pid(cluster: testcluster.ClusterHandle, name: str) -> int:
    state = cluster.state()
    for c in state["components"]:  # type: ignore[attr-defined]
        if c["name"] == name:
            return int(c["pid"])
    raise LookupError(name)


async def until(check: Callable[[], Awaitable[bool] | bool], timeout: float, what: str) -> float:  # noqa: ASYNC109
    """Poll `check` until true; the seconds it took. Timeout naming `what`."""
    start = time.monotonic()
    await eventually(check, timeout=timeout, interval=0.2, message=what)
    return time.monotonic() - start


# ---- faults: each injects, and returns once the fault has ended ----


async def operator_killed(run: Run) -> None:
    """SIGKILL of the acting replica; a new one starts at once (a Deployment's restart)."""
    op = run.leader()
    assert op is not None
    op.kill()
    run.start_replica()


async def leader_killed(run: Run) -> None:
    op = run.leader()
    assert op is not None
    op.kill()
    await until(lambda: run.leader() is not None, 60, "a standby takes over")
    run.start_replica()


async def leader_frozen(run: Run) -> None:
    op = run.leader()
    assert op is not None
    assert op.proc is not None
    os.killpg(op.proc.pid, signal.SIGSTOP)
    try:
        await until(lambda: run.leader() not in (None, op), 60, "a standby takes over")
        await asyncio.sleep(max(0.0, 20.0 - 15.0))  # the fault itself: frozen 20 s in all
    finally:
        os.killpg(op.proc.pid, signal.SIGCONT)
    run.start_replica()


def _stall(name: str, seconds: float) -> Callable[[Run], Awaitable[None]]:
    async def stall(run: Run) -> None:
        pid = component_pid(run.cluster, name)
        os.kill(pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(seconds)  # the fault itself
        finally:
            os.kill(pid, signal.SIGCONT)

    return stall


async def apiserver_restarted(run: Run) -> None:
    assert run.cluster.supervisor is not None
    assert run.cluster.state_dir is not None
    marker = run.cluster.state_dir / "apiserver-restarted"
    before = marker.stat().st_mtime if marker.exists() else 0.0
    os.kill(run.cluster.supervisor.pid, signal.SIGUSR1)
    await until(lambda: marker.exists() and marker.stat().st_mtime > before, 120, "the API server restarts")


async def watches_cut(run: Run) -> None:
    for _ in range(5):
        run.proxy.cut_watches()
        await asyncio.sleep(2)  # the fault itself: cut again every 2 s for 10 s


def _errors(code: int) -> Callable[[Run], Awaitable[None]]:
    async def errors(run: Run) -> None:
        run.proxy.set_rules(
            [Rule(status=code, method=m, probability=0.3) for m in ("POST", "PATCH", "PUT", "DELETE")]
        )
        try:
            await asyncio.sleep(20)  # the fault itself
        finally:
            run.proxy.set_rules([])

    return errors


async def lost_responses(run: Run) -> None:
    """30 % of creates are made but their answers lost (a 500 after the write)."""
    run.proxy.set_rules(
        [Rule(status=500, method="POST", path=r"/pods$", probability=0.3, lose_response=True)]
    )
    try:
        await asyncio.sleep(20)  # the fault itself
    finally:
        run.proxy.set_rules([])


async def partitioned(run: Run) -> None:
    run.proxy.black_hole(15)
    await asyncio.sleep(15)


@dataclasses.dataclass(frozen=True)
class Fault:
    title: str
    inject: Callable[[Run], Awaitable[None]]
    mode: str = "all"
    leader_elect: bool = True
    # Who scales: False, the user edits `replicas`; True, rayscale's autoscaler, for the
    # RayResourceRequests whose counts the editor raises.
    autoscaling: bool = False
    controller: Literal["rayscale", "kuberay"] = "rayscale"  # who makes the pods (KubeRay's operator)


FAULTS: dict[str, Fault] = {
    "operator-killed": Fault("operator SIGKILL, restarted at once (mode all, one replica)", operator_killed,
                             leader_elect=False),
    "operator-killed-controller": Fault("operator SIGKILL, restarted at once (mode controller, one replica)",
                                        operator_killed, mode="controller", leader_elect=False),
    "operator-killed-autoscaling": Fault("operator SIGKILL, restarted at once, while it autoscales "
                                         "(mode all, one replica)", operator_killed, leader_elect=False,
                                         autoscaling=True),
    "operator-killed-autoscaler-mode": Fault("operator SIGKILL, restarted at once, while it autoscales "
                                             "(mode autoscaler, KubeRay's operator the controller)",
                                             operator_killed, mode="autoscaler", leader_elect=False,
                                             autoscaling=True, controller="kuberay"),
    "leader-killed": Fault("leader SIGKILL, standby takes over", leader_killed),
    "leader-frozen": Fault("leader frozen 20 s (SIGSTOP), then resumed", leader_frozen),
    "apiserver-stalled": Fault("kube-apiserver stalled 15 s (SIGSTOP)", _stall("kube-apiserver", 15)),
    "apiserver-restarted": Fault("kube-apiserver restarted", apiserver_restarted),
    "etcd-stalled": Fault("etcd stalled 15 s (SIGSTOP)", _stall("etcd", 15)),
    "watches-cut": Fault("watch streams cut every 2 s for 10 s", watches_cut),
    "conflicts": Fault("409 to 30 % of writes for 20 s", _errors(409)),
    "throttled": Fault("429 to 30 % of writes for 20 s", _errors(429)),
    "server-errors": Fault("500 to 30 % of writes for 20 s", _errors(500)),
    "lost-responses": Fault("30 % of pod creates made but answered 500, 20 s", lost_responses),
    "partition": Fault("API unreachable (black hole) 15 s", partitioned),
}  # fmt: skip


# ---- the run ----


def raycluster(name: str, replicas: int, fault: Fault | None = None) -> dict[str, Any]:
    """The example cluster; for an autoscaling fault at `replicas: 0`, autoscaled by rayscale:
    in-tree with rayscale as the controller, opted in (in-tree off) beside KubeRay's operator."""
    body = example("raycluster-basic.yaml")
    body["metadata"] = {"name": name}
    group = body["spec"]["workerGroupSpecs"][0]
    group.update(replicas=replicas, minReplicas=0, maxReplicas=MAX_REPLICAS)
    if fault is not None and fault.autoscaling:
        group["replicas"] = 0
        beside = fault.controller == "kuberay"
        body["metadata"]["annotations"] = UNREACHABLE_GCS | (OPT_IN if beside else {})
        body["spec"]["enableInTreeAutoscaling"] = not beside
    return body


def resource_request(cluster: str, count: int) -> dict[str, Any]:
    """`count` bundles of one CPU: `count` workers of the example cluster (its head has none)."""
    return {
        "apiVersion": RAYRESOURCEREQUEST.api_version,
        "kind": "RayResourceRequest",
        "metadata": {"name": cluster},
        "spec": {"clusterName": cluster, "bundles": [{"resources": {"CPU": 1}, "count": count}]},
    }


@contextlib.asynccontextmanager
async def following(run: Run) -> AsyncIterator[None]:
    """Feed every worker pod event of the run's namespace to the ledger, from now on."""
    core: Any = client.CoreV1Api(run.api)  # untyped: responses are read raw (_preload_content=False)
    events = watch.Watch()

    async def follow() -> None:
        while True:  # list, then watch from the list's version; on any failure, list again
            try:
                listed = await core.list_namespaced_pod(
                    run.namespace, label_selector=SELECTOR, _preload_content=False, _request_timeout=10
                )
                body = json.loads(await listed.read())
                run.ledger.resync(body["items"])
                async for e in events.stream(
                    core.list_namespaced_pod, run.namespace, label_selector=SELECTOR,
                    resource_version=body["metadata"]["resourceVersion"], _preload_content=False,
                ):  # fmt: skip
                    if e["type"] == "ERROR":  # e.g. 410 Gone: the version is too old
                        break
                    run.ledger.event(e["type"], e["raw_object"])
            except (TimeoutError, client.ApiException, aiohttp.ClientError, OSError, ValueError, KeyError):
                await asyncio.sleep(0.5)  # the API server is stalled or restarting: list and watch again

    task = asyncio.create_task(follow())
    try:
        yield
    finally:
        await end_watch(events, task)


async def edit(run: Run, objects: Any, name: str) -> None:
    """The user's edit: `replicas` set anew; or, when rayscale autoscales, the cluster's request
    raised (never lowered: with no Ray, rayscale never removes a running worker)."""
    if run.autoscaling:
        count = run.ledger.clusters[name].last
        if count >= MAX_REPLICAS:
            return
        count += 1  # one at a time, so that the counts seldom reach the max before the fault
        path, resource = "/spec/bundles/0/count", RAYRESOURCEREQUEST.path
    else:
        count = run.rng.randint(0, MAX_REPLICAS)
        path, resource = "/spec/workerGroupSpecs/0/replicas", RAYCLUSTER.path
    patch = [{"op": "replace", "path": path, "value": count}]
    # Recorded before it is sent: a write whose answer is lost (a stalled API server) may already
    # have taken effect, and the operator's pods for it may reach the ledger before the answer.
    run.ledger.asked(name, count)
    for _ in range(100):  # the API server may be stalled by the fault: the edit waits for it
        try:
            await objects.patch_namespaced_custom_object(
                resource[0], resource[1], run.namespace, resource[2], name, patch,
                _content_type="application/json-patch+json", _request_timeout=5,
            )  # fmt: skip
            return
        except (TimeoutError, client.ApiException, aiohttp.ClientError, OSError):
            await asyncio.sleep(0.5)
    raise RuntimeError(f"could not edit {name}")


async def label(run: Run, objects: Any, name: str) -> None:
    value = uuid.uuid4().hex[:8]
    patch = {"metadata": {"labels": {"chaos.rayscale.io/edit": value}}}
    for _ in range(100):
        try:
            await objects.patch_namespaced_custom_object(
                *RAYCLUSTER.at(run.namespace), name, patch,
                _content_type="application/merge-patch+json", _request_timeout=5,
            )  # fmt: skip
            run.labels[name] = value
            return
        except (TimeoutError, client.ApiException, aiohttp.ClientError, OSError):
            await asyncio.sleep(0.5)
    raise RuntimeError(f"could not label {name}")


async def one_run(
    cluster: testcluster.ClusterHandle, proxy: FaultProxy, api: client.ApiClient, key: str, seed: int
) -> Outcome:
    fault = FAULTS[key]
    namespace = f"chaos-{key}-{uuid.uuid4().hex[:5]}"
    core: Any = client.CoreV1Api(api)  # untyped: bodies are plain dicts
    objects = client.CustomObjectsApi(api)
    await core.create_namespace({"metadata": {"name": namespace}})
    run = Run(
        cluster, proxy, api, namespace, random.Random(seed), mode=fault.mode, leader_elect=fault.leader_elect,
        autoscaling=fault.autoscaling,
    )  # fmt: skip
    names = [f"c{i}" for i in range(CLUSTERS)]
    violations: list[str] = []
    converged: float | None = None
    at_fault = ""
    try:
        if fault.controller == "kuberay":  # straight to the API server, not through the proxy
            run.kuberay = KubeRayOperator(kuberay_bindir(), cluster, namespace, "")
            run.kuberay.start()
        run.start_replica()
        if fault.leader_elect:
            run.start_replica()
        await until(lambda: run.leader() is not None, 120, "a replica leads")
        async with following(run):
            for name in names:
                # Autoscaling: the request's count, raised later (so starting low).
                replicas = run.rng.randint(1, 2 if fault.autoscaling else MAX_REPLICAS)
                run.ledger.created_cluster(name, replicas)
                await objects.create_namespaced_custom_object(
                    *RAYCLUSTER.at(namespace), raycluster(name, replicas, fault)
                )
                if fault.autoscaling:
                    await objects.create_namespaced_custom_object(
                        *RAYRESOURCEREQUEST.at(namespace), resource_request(name, replicas)
                    )
            await until(run.ledger.converged, CONVERGE_SECONDS, "the clusters converge before the fault")

            stop = asyncio.Event()

            async def editor() -> None:
                while not stop.is_set():
                    await edit(run, objects, run.rng.choice(names))
                    if run.rng.random() < 0.2:
                        await label(run, objects, run.rng.choice(names))
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(stop.wait(), run.rng.uniform(0.5, 1.5))

            editing = asyncio.create_task(editor())
            await asyncio.sleep(run.rng.uniform(1.0, 6.0))  # a random moment of the scaling
            if fault.autoscaling:  # ... while a raised count is not met yet (unless all are at the max)
                await until(lambda: not run.ledger.converged() or all(
                    c.last >= MAX_REPLICAS for c in run.ledger.clusters.values()
                ), 60, "a raised count not met yet")  # fmt: skip
            at_fault = run.ledger.describe()  # how far the scaling was when the fault came
            await fault.inject(run)
            stop.set()
            await editing
            for name in names:  # the last edits, right as the fault ends
                await edit(run, objects, name)
            fault_end = time.monotonic()
            try:
                await until(run.ledger.converged, CONVERGE_SECONDS, "converge")
                converged = time.monotonic() - fault_end
            except Timeout:
                violations.append(
                    f"not converged {CONVERGE_SECONDS:.0f} s after the fault: {run.ledger.describe()}"
                )
            for name in names:
                body = await objects.get_namespaced_custom_object(*RAYCLUSTER.at(namespace), name)
                spec_replicas = body["spec"]["workerGroupSpecs"][0].get("replicas")
                asked = run.ledger.clusters[name].last
                if spec_replicas != asked:
                    lost = "autoscaled wrong" if fault.autoscaling else "user edit lost"
                    by = "its request asks" if fault.autoscaling else "the user set"
                    violations.append(f"{lost}: {name} replicas {spec_replicas}, {by} {asked}")
                value = (body["metadata"].get("labels") or {}).get("chaos.rayscale.io/edit")
                if name in run.labels and value != run.labels[name]:
                    violations.append(
                        f"user edit lost: {name} label {value!r}, the user set {run.labels[name]!r}"
                    )
    finally:
        run.stop()
    violations[:0] = run.ledger.violations
    if fault.leader_elect and cluster.state_dir is not None:
        audit = cluster.state_dir / "audit.log"
        await until(lambda: audit.exists(), 10, "the audit log")
        violations += leader_violations(audit_events(audit), namespace)
    crashed = [op.log for op in run.replicas if "Traceback" in op.log.read_text(errors="replace")
               and "Fenced" not in op.log.read_text(errors="replace")]  # fmt: skip
    detail = {
        "seed": seed,
        "pods_created": sum(len(c.created) for c in run.ledger.clusters.values()),
        "pods_deleted": sum(len(c.deleted) for c in run.ledger.clusters.values()),
        "replicas_started": len(run.replicas),
        "asked": {name: c.last for name, c in run.ledger.clusters.items()},
        "at_fault": at_fault,
        "labels_checked": len(run.labels),
        "proxy": proxy.counts(),
        "logs_with_tracebacks": [str(p) for p in crashed],
    }
    with contextlib.suppress(client.ApiException):
        await core.delete_namespace(namespace)
    for op in [*run.replicas, *([run.kuberay] if run.kuberay else [])]:
        if not violations and not crashed:
            op.log.unlink(missing_ok=True)
    return Outcome(SUITE, fault.title, tuple(violations), converged, detail)


@functools.cache
def kuberay_bindir() -> Path:
    """KubeRay's operator binary and CRDs (tools/kuberay-oracle/build-operator.sh: cached, or
    built, about 2 minutes the first time)."""
    script = ROOT / "tools" / "kuberay-oracle" / "build-operator.sh"
    out = subprocess.run([str(script)], capture_output=True, text=True, check=True, timeout=900)
    return Path(out.stdout.strip().splitlines()[-1])


async def main_async(keys: list[str], runs: int, seed: int, *, record: bool = True) -> list[Outcome]:
    cluster = testcluster.start_private(audit=True)
    outcomes: list[Outcome] = []
    try:
        cluster.kubectl_run("apply", "--server-side", "-f", str(CRDS))
        crds = [RAYCLUSTER.crd_name, RAYRESOURCEREQUEST.crd_name]
        if any(FAULTS[key].controller == "kuberay" for key in keys):
            for kind in ("rayjobs", "rayservices"):  # KubeRay's operator watches these too
                crd = kuberay_bindir() / "crds" / f"ray.io_{kind}.yaml"
                cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", str(crd))
                crds.append(f"{kind}.ray.io")
        for crd_name in crds:
            cluster.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd_name}")
        cfg = client.Configuration()
        await config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
        with FaultProxy.running(cluster.kubeconfig, seed=seed) as proxy:
            async with client.ApiClient(configuration=cfg) as api:
                for i in range(runs):
                    for key in keys:
                        outcome = await one_run(cluster, proxy, api, key, seed + i)
                        if record:
                            outcome.record()
                        outcomes.append(outcome)
                        state = "ok" if not outcome.violations else f"{len(outcome.violations)} VIOLATIONS"
                        took = (
                            f"{outcome.converged_seconds:.1f}s"
                            if outcome.converged_seconds is not None
                            else "-"
                        )
                        print(f"chaos: {key} run {i + 1}: {state}, converged after {took}", flush=True)
                        for v in outcome.violations:
                            print(f"  {v}", flush=True)
    finally:
        cluster.stop()
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="control-plane faults while RayClusters scale")
    parser.add_argument("--fault", action="append", choices=sorted(FAULTS), help="only these (repeatable)")
    parser.add_argument("--runs", type=int, default=int(os.environ.get("CHAOS_RUNS", "3")))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("CHAOS_SEED", "1")))
    args = parser.parse_args(argv)
    outcomes = asyncio.run(main_async(args.fault or list(FAULTS), args.runs, args.seed))
    return 1 if any(o.violations for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
