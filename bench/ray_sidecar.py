"""What Ray's own autoscaler costs as KubeRay runs it: a sidecar of one RayCluster's head.

    python -m bench.ray_sidecar [--duration 120] [--version v1|v2] [--schedule 0:2 30:4 60:1]
                                [--note TEXT] [--out FILE]

In a fresh namespace: `rayscale run --mode controller` (KubeRay's part only: rayscale leaves
autoscaling to Ray's sidecar and creates the pods it asks for) and one RayCluster with
`enableInTreeAutoscaling` (a head and group `cpu` of 1-CPU Ray workers, 0 to 10 replicas,
`idleTimeoutSeconds` 30). Once its head pod is Running, a real Ray head runs as local processes
(`e2e.raybridge.rayproc`, 0 CPUs) as that pod's container would: `RAY_CLOUD_INSTANCE_ID` the pod's
name, `RAY_NODE_TYPE_NAME` its group, its GCS address the cluster's `rayscale.io/gcs-address`.
Then Ray's sidecar (`ray kuberay-autoscaler --gcs-address HEAD`, Ray 2.60, this environment's
`ray`) runs as a local process with what KubeRay's container gets: the cluster's name and
namespace, the head pod's name and the API server (`KUBERNETES_SERVICE_HOST`/`_PORT_HTTPS`, the
kubeconfig's client certificate and CA as files). It reaches the API server through a TCP
pass-through here that counts its connections: Ray's client (`requests.get`/`patch`, no session)
opens one per request. It logs to the head's session log dir, as in a pod.

The window starts when the sidecar's second round begins (it is in its loop) and lasts
`duration` seconds. At each (t, k) of `schedule` a Ray driver calls
`ray.autoscaler.sdk.request_resources(num_cpus=k)`; the latency is the time from the call to the
first moment a watch shows the group's `replicas` >= k (deadline: the next call, or the end; 0 when
already covered), with how far into the sidecar's 5 s round the call came (`into_round`: at t=0 the
round has just begun, so that request waits about a whole round). Over the window: the CPU
seconds of the sidecar's process tree (/proc), then its VmHWM (lifetime peak) and VmRSS. Ray's
autoscaler v1 (the default) or, with `version="v2"`, v2 (head, sidecar and driver run with
`RAY_enable_autoscaler_v2=1`, the cluster says `autoscalerOptions.version: v2`).

The worker pods are kwok's fake pods: no Ray worker ever joins the head, so the sidecar sees nodes
launched that never join. That is the cost of its loop on an idle cluster: the figures leave out
what joined workers add (their load reports, from Ray's GCS).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import functools
import importlib.metadata
import itertools
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import yaml
from e2e.raybridge import rayproc
from e2e.raybridge.driver import RayDriver
from hack.localk8s import launcher, testcluster

from bench.autoscaler_reaction import autoscaling_cluster, board
from bench.operator_scale import (
    ROOT,
    create_namespace,
    delete_namespace,
    kube_apis,
    measured_main,
    process,
    rayscale_command,
)
from bench.procstat import tree_cpu_seconds, tree_memory_kib
from rayscale.api.names import RAYCLUSTER

NAME = "sidecar"
MAX_REPLICAS = 10
V2_ENV = "RAY_enable_autoscaler_v2"
# KubeRay v1.6.2's autoscaler container (ray-operator/controllers/ray/common/pod.go,
# BuildAutoscalerContainer) and rayscale's (operator/rayscale/controller/sidecar.py): both 500m / 512Mi.
SIDECAR_QUOTA = {"cpu": "500m", "memory": "512Mi"}
KUBERAY_SIDECAR_RESOURCES = {"requests": SIDECAR_QUOTA, "limits": SIDECAR_QUOTA}


# --------------------------------------------------------------------------- the API server


class ApiProxy:
    """A TCP pass-through (TLS untouched) to the API server that times every connection."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.connections: list[float] = []  # monotonic, one per connection
        self.bytes = {"sent": 0, "received": 0}  # by the sidecar
        self.arrived = asyncio.Event()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.writers: set[asyncio.StreamWriter] = set()  # of the open connections, both sides

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        self.connections.append(time.monotonic())
        self.arrived.set()
        ends = {writer}
        self.writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            ends.add(up_writer)
            self.writers.add(up_writer)
            await asyncio.gather(
                self.pipe(reader, up_writer, "sent"),
                self.pipe(up_reader, writer, "received"),
                return_exceptions=True,  # one side failing closes the other: both end
            )
        except OSError:
            pass
        finally:
            for end in ends:
                end.close()
            self.writers -= ends
            self.tasks.discard(task)

    async def pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, way: str) -> None:
        try:
            while data := await src.read(65536):
                self.bytes[way] += len(data)
                dst.write(data)
                await dst.drain()
        finally:
            dst.close()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[int]:
        """Listening on 127.0.0.1; yields the port. On the way out every connection is closed."""
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        try:
            yield server.sockets[0].getsockname()[1]
        finally:
            server.close()
            for writer in list(self.writers):
                writer.close()  # its reader sees the end: the pipes and handlers return
            if self.tasks:
                await asyncio.wait(list(self.tasks), timeout=10)

    def rounds(self) -> list[float]:
        """When each of the sidecar's rounds began but the first: a connection >= 2 s after the one
        before (Ray's rounds are 5 s apart, their requests milliseconds)."""
        return [b for a, b in itertools.pairwise(self.connections) if b - a >= 2.0]

    async def second_round(self, deadline: float, exited: Callable[[], int | None]) -> float:
        """When the sidecar's second round began: it is in its loop."""
        while not self.rounds():
            if exited() is not None:
                raise RuntimeError(f"Ray's sidecar exited ({exited()}) before its second round")
            if time.monotonic() > deadline:
                raise TimeoutError(f"Ray's sidecar made {len(self.connections)} K8s requests, not two rounds")
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), timeout=1)
        return self.rounds()[0]


def credentials(kubeconfig: Path, into: Path) -> tuple[str, int, dict[str, str]]:
    """The API server's host and port and Ray's env for the kubeconfig's client certificate, key and
    CA (inline data or paths), written to files in `into`."""
    doc = yaml.safe_load(kubeconfig.read_text())
    context = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in doc["users"] if u["name"] == context["user"])
    env = {}
    for var, section, key in (
        ("RAY_KUBERAY_CLIENT_CERT_PATH", user, "client-certificate"),
        ("RAY_KUBERAY_CLIENT_KEY_PATH", user, "client-key"),
        ("RAY_KUBERAY_CA_CERT_PATH", cluster, "certificate-authority"),
    ):
        if f"{key}-data" in section:
            path = into / f"{key}.pem"
            path.write_bytes(base64.b64decode(section[f"{key}-data"]))
            env[var] = str(path)
        elif key in section:
            env[var] = str((kubeconfig.parent / section[key]).resolve())
        else:
            raise RuntimeError(f"{kubeconfig}: no {key}: Ray's sidecar needs a client certificate here")
    server = urlsplit(cluster["server"])
    return server.hostname or "127.0.0.1", server.port or 443, env


# --------------------------------------------------------------------------- the measurement


@contextlib.asynccontextmanager
async def controller_namespace(
    cluster: testcluster.ClusterHandle, core: Any, objects: Any
) -> AsyncIterator[str]:
    """A fresh namespace with `rayscale run --mode controller` on it; the namespace goes, then rayscale."""
    ns = await create_namespace(core, "bench-sidecar")
    env = {**cluster.env, "PYTHONPATH": str(ROOT / "operator")}
    try:
        with process([*rayscale_command(ns), "--mode", "controller"], env, "rayscale", ns):
            try:
                yield ns
            finally:
                await delete_namespace(core, objects, ns)
    finally:
        with contextlib.suppress(Exception):
            await core.delete_namespace(ns)


async def measure_sidecar(
    cluster: testcluster.ClusterHandle,
    *,
    duration: float,
    schedule: list[tuple[float, int]],
    version: str = "v1",
) -> dict[str, Any]:
    """Ray's sidecar autoscaler on one RayCluster for `duration` seconds of `schedule` ((seconds into
    the window, CPUs to request)): its CPU, memory, K8s requests and demand-to-patch latencies."""
    if version not in ("v1", "v2"):
        raise ValueError(f"version {version!r}: v1 or v2")
    if sorted(schedule) != schedule or any(not 0 <= t < duration for t, _ in schedule):
        raise ValueError("schedule: times in order, each within [0, duration)")
    v2 = {V2_ENV: "1" if version == "v2" else "0"}
    async with contextlib.AsyncExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ray-sidecar-")))
        core, objects = await stack.enter_async_context(kube_apis(cluster))
        ns = await stack.enter_async_context(controller_namespace(cluster, core, objects))
        b = await stack.enter_async_context(board(core, objects, ns))
        port = launcher.free_port(rayproc.EVERY_INTERFACE)  # the Ray head's, started below
        body = autoscaling_cluster(NAME, MAX_REPLICAS, f"{rayproc.NODE_IP}:{port}")
        body["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": 30} | (
            {"version": "v2"} if v2[V2_ENV] == "1" else {}
        )
        await objects.create_namespaced_custom_object(*RAYCLUSTER.at(ns), body)
        b.milestone("head", lambda: b.head_running(NAME))
        await b.wait(["head"], time.monotonic() + 120)
        labels = {n: pod["metadata"]["labels"] for n, pod in b.kinds["pods"].items()}
        head_pod = next(n for n, lb in labels.items() if lb.get("ray.io/node-type") == "head")
        # As KubeRay's Ray containers: the node names its pod and group (v2 matches Ray nodes to pods
        # by it; without it v2 sees the head never join and patches nothing).
        group = labels[head_pod].get("ray.io/group", "headgroup")
        identity = {"RAY_CLOUD_INSTANCE_ID": head_pod, "RAY_NODE_TYPE_NAME": group}
        head = stack.enter_context(
            rayproc.running_head(port=port, timeout=60, num_cpus=0, env=v2 | identity, die_with_parent=True)
        )

        history: list[tuple[float, int]] = []  # (monotonic, replicas) at every change

        def follow() -> bool:
            if not history or history[-1][1] != b.replicas(NAME):
                history.append((time.monotonic(), b.replicas(NAME)))
            return False

        b.milestone("history", follow)

        host, port, env = credentials(cluster.kubeconfig, scratch)
        proxy = ApiProxy(host, port)
        proxy_port = await stack.enter_async_context(proxy.serving())
        ray = rayproc.ray_cli()
        env |= v2 | {
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",  # not https://...: Ray adds the scheme after the port
            "KUBERNETES_SERVICE_PORT_HTTPS": str(proxy_port),
            "KUBERAY_CRD_VER": "v1",
            "RAY_CLUSTER_NAME": NAME,
            "RAY_CLUSTER_NAMESPACE": ns,
            "RAY_HEAD_POD_NAME": head_pod,
            # it runs `ray health-check`
            "PATH": f"{Path(ray).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        command = [ray, "kuberay-autoscaler", "--cluster-name", NAME, "--cluster-namespace", ns,
                   "--gcs-address", head.address]  # fmt: skip
        launched = time.monotonic()
        sidecar = stack.enter_context(process(command, rayproc.driver_env(env), "ray-sidecar", ns))
        # RayDriver.start runs the driver with rayproc.BASE_ENV, which says v2: request_resources
        # must go where this version's autoscaler reads it (v1: the GCS's KV; v2: the GCS's state).
        with mock.patch.dict(rayproc.BASE_ENV, v2):
            driver = await stack.enter_async_context(RayDriver.start(head.address, scratch / "driver.log"))

        start = await proxy.second_round(time.monotonic() + 180, sidecar.poll)
        cpu_start = tree_cpu_seconds(sidecar.pid)
        requests_before = sum(1 for t in proxy.connections if t < start)
        latencies = []
        for i, (at, cpus) in enumerate(schedule):
            await asyncio.sleep(max(0.0, start + at - time.monotonic()))
            called = time.monotonic()
            covered = b.replicas(NAME) >= cpus
            b.milestone(f"request-{i}", functools.partial(lambda k: b.replicas(NAME) >= k, cpus))
            await driver.call("request_resources", num_cpus=cpus)
            until = start + (schedule[i + 1][0] if i + 1 < len(schedule) else duration)
            with contextlib.suppress(TimeoutError):
                await b.wait([f"request-{i}"], until)
            reached = b.reached.get(f"request-{i}")
            seconds = None if reached is None else max(0.0, reached - called)
            since = called - max(t for t in proxy.rounds() if t <= called)  # into the sidecar's round
            latencies.append(
                {
                    "at": at,
                    "num_cpus": cpus,
                    "seconds": seconds,
                    "already_covered": covered,
                    "into_round": since,
                }
            )
            print(f"request_resources(num_cpus={cpus}) at {at:g}s: replicas >= {cpus} after"
                  f" {'-' if seconds is None else f'{seconds:.2f}'} s", flush=True)  # fmt: skip
        await asyncio.sleep(max(0.0, start + duration - time.monotonic()))
        if sidecar.poll() is not None:
            raise RuntimeError(f"Ray's sidecar exited ({sidecar.returncode}) during the window")
        end = time.monotonic()
        cpu = tree_cpu_seconds(sidecar.pid) - cpu_start
        memory = tree_memory_kib(sidecar.pid)
        window = end - start
        in_window = sum(1 for t in proxy.connections if start <= t <= end)
        return {
            "ray_version": importlib.metadata.version("ray"),
            "autoscaler_version": version,
            "duration": duration,
            "schedule": [list(s) for s in schedule],
            "window_seconds": window,
            "startup_seconds": start - launched,
            "startup_cpu_seconds": cpu_start,
            "cpu_seconds": cpu,
            "cpu_seconds_per_minute": cpu / window * 60,
            "vm_hwm_mib": memory["VmHWM"] / 1024,
            "vm_rss_mib": memory["VmRSS"] / 1024,
            "processes": memory["processes"],
            "latencies": latencies,
            "replicas": [[round(t - start, 2), r] for t, r in history],
            "k8s_requests_startup": requests_before,
            "k8s_requests": in_window,
            "k8s_requests_per_minute": in_window / window * 60,
            "k8s_rounds": sum(1 for t in proxy.rounds() if start <= t <= end),
            "k8s_bytes": dict(proxy.bytes),
            "kuberay_sidecar_resources": KUBERAY_SIDECAR_RESOURCES,
        }
    raise AssertionError("unreachable")  # the exit stack does not swallow exceptions


# --------------------------------------------------------------------------- main


def _schedule(text: str) -> tuple[float, int]:
    at, _, cpus = text.partition(":")
    return float(at), int(cpus)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=120, help="the measured window, seconds")
    parser.add_argument("--version", choices=("v1", "v2"), default="v1", help="Ray's autoscaler version")
    parser.add_argument("--schedule", type=_schedule, nargs="+", default=[(0.0, 2), (30.0, 4), (60.0, 1)],
                        metavar="T:K", help="request_resources(num_cpus=K), T s into the window")  # fmt: skip
    return measured_main(
        parser,
        argv,
        ROOT / "bench/results/ray_sidecar.json",
        lambda cluster, a: measure_sidecar(
            cluster, duration=a.duration, schedule=a.schedule, version=a.version
        ),
        lambda results: sys.exit("bench.ray_sidecar has no section in docs/benchmarks.md (yet): see --out"),
    )


if __name__ == "__main__":
    sys.exit(main())
