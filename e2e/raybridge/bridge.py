"""The Ray bridge: real Ray nodes on this machine for the pods of one RayCluster on kwok nodes.

kwok runs no containers, so a RayCluster on the local control plane has pods but no Ray. The
bridge stands in for the containers: it starts a real Ray head (``--num-cpus`` as the head group's
``rayStartParams`` say, 0 by default, as KubeRay's e2e clusters have it) and, for every worker pod
of the cluster that is Running and not being deleted, a local Ray worker with the logical
resources and labels of the pod's generated ``ray start`` command, ``RAY_CLOUD_INSTANCE_ID`` = the
pod name and ``RAY_NODE_TYPE_NAME`` = its group (see podspec.py). When the pod gets a
deletionTimestamp or disappears, exactly that worker is stopped (its process group, by PID), as a
kubelet would stop the container. Workers are small: a tiny object store, no dashboard.

rayscale finds the head through the RayCluster annotation ``rayscale.io/gcs-address`` =
`RayBridge.gcs_address`: start the bridge first, then create the cluster with it.

    with RayBridge(kubeconfig, "ns", "raycluster") as bridge:
        body["metadata"]["annotations"] = {GCS_ANNOTATION: bridge.gcs_address}
        ...  # create the RayCluster; bridge.workers() shows the Ray workers running

Pods are watched (list, then watch from its resourceVersion; any error or an expired
resourceVersion lists again) on a thread of the bridge's own, so the bridge works under sync and
async tests alike. Every Ray process dies with the test process, however that dies
(``PR_SET_PDEATHSIG``).

Also a command: ``python -m e2e.raybridge.bridge --namespace NS --cluster NAME [--annotate]``
runs the bridge until Ctrl-C (e.g. next to ``make demo``).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from e2e.raybridge import podspec, rayproc
from kubernetes_asyncio import client, config, watch

from rayscale.resources import parse_resources_param

__all__ = ["GCS_ANNOTATION", "OBJECT_STORE_BYTES", "BridgeEvent", "RayBridge", "head_params"]

log = logging.getLogger(__name__)

GCS_ANNOTATION = "rayscale.io/gcs-address"
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's minimum is 75 MiB; the object store is mapped lazily
RELIST_DELAY = 0.5
WATCH_SECONDS = 60  # server-side timeout of one watch request; then it is simply renewed
STARTED_LINE = b"Ray runtime started."  # what `ray start` logs once its raylet has registered
START_TIMEOUT = 120.0


@dataclass(frozen=True)
class BridgeEvent:
    """Something the bridge did, with `time.monotonic()` and wall-clock `wall` times."""

    kind: str  # "init" | "started" | "stopped" | "exited" | "error"
    pod: str
    at: float
    wall: float
    detail: str = ""


def head_params(raycluster: Mapping[str, Any]) -> dict[str, Any]:
    """`rayproc.start_head` keyword arguments from a RayCluster's head ``rayStartParams``.

    ``num-cpus`` defaults to 0 (no work on the head, as in KubeRay's e2e clusters).
    """
    params = ((raycluster.get("spec") or {}).get("headGroupSpec") or {}).get("rayStartParams") or {}
    out: dict[str, Any] = {"num_cpus": float(params.get("num-cpus", 0))}
    if "num-gpus" in params:
        out["num_gpus"] = float(params["num-gpus"])
    if "resources" in params:
        out["resources"] = parse_resources_param(str(params["resources"]))
    return out


class RayBridge:
    """A Ray head plus one Ray worker per live worker pod of RayCluster `cluster` in `namespace`."""

    def __init__(
        self,
        kubeconfig: str | Path,
        namespace: str,
        cluster: str,
        *,
        head: Mapping[str, Any] | None = None,
        log_dir: Path | None = None,
        object_store_bytes: int = OBJECT_STORE_BYTES,
        stop_grace: float = 10.0,
    ) -> None:
        self.kubeconfig = str(kubeconfig)
        self.namespace = namespace
        self.cluster = cluster
        self.head_kwargs = dict(head if head is not None else {"num_cpus": 0})
        self.log_dir = log_dir
        self.object_store_bytes = object_store_bytes
        self.stop_grace = stop_grace
        self.head: rayproc.RayNode | None = None
        self.events: list[BridgeEvent] = []
        self._lock = threading.Lock()
        self._workers: dict[str, rayproc.RayNode] = {}
        self._pods: dict[str, Mapping[str, Any]] = {}
        self._reported: set[str] = set()  # pods whose unreadable spec or exit was recorded
        self._synced = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopper = concurrent.futures.ThreadPoolExecutor(
            max_workers=4, thread_name_prefix="raybridge-stop"
        )
        # Workers start one at a time, each once the previous one runs: raylets that start side
        # by side on one address time out registering with the GCS ("The current node timed out
        # during startup"), and one at a time is also what 2 cores take. The starter thread
        # outlives its workers (PR_SET_PDEATHSIG is per thread): it is shut down after them.
        self._starter = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="raybridge-start"
        )
        self._wanted: set[str] = set()  # pods that should have a worker now
        self._queued: set[str] = set()  # pods whose worker is waiting to start or starting
        self._closing = threading.Event()
        self._delays: list[threading.Timer] = []  # starts waiting for the pod's init containers

    # ---- lifecycle ----

    @property
    def gcs_address(self) -> str:
        assert self.head is not None, "the bridge is not started"
        return self.head.address

    def start(self, *, timeout: float = 90.0) -> RayBridge:
        """Start the head (waits for its GCS port) and the pod watch (waits for the first list)."""
        self.head = rayproc.start_head(log_dir=self.log_dir, die_with_parent=True, **self.head_kwargs)
        try:
            rayproc.wait_for_port(rayproc.NODE_IP, self.head.port, timeout=timeout, node=self.head)
            self._thread = threading.Thread(target=self._run, name=f"raybridge-{self.cluster}", daemon=True)
            self._thread.start()
            if not self._synced.wait(timeout):
                raise rayproc.RayProcessError(f"the pods of {self.namespace}/{self.cluster} were not listed")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop the watch, every worker, then the head. Idempotent."""
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self._closing.set()
        with self._lock:
            delays, self._delays = self._delays, []
        for timer in delays:
            timer.cancel()
        self._starter.shutdown(wait=True, cancel_futures=True)  # a start under way ends first
        with self._lock:
            workers = list(self._workers.values())
            self._workers.clear()
        for node in workers:
            rayproc.stop(node, grace=self.stop_grace)
        self._stopper.shutdown(wait=True)
        if self.head is not None:
            rayproc.stop(self.head, grace=self.stop_grace)

    def __enter__(self) -> RayBridge:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---- what tests read ----

    def workers(self) -> dict[str, rayproc.RayNode]:
        """Pod name -> its running Ray worker process."""
        with self._lock:
            return {name: node for name, node in self._workers.items() if node.running()}

    def history(self, kind: str | None = None, pod: str | None = None) -> list[BridgeEvent]:
        with self._lock:
            return [
                e for e in self.events if (kind is None or e.kind == kind) and (pod is None or e.pod == pod)
            ]

    def errors(self) -> list[BridgeEvent]:
        return self.history("error")

    # ---- the watch thread ----

    def _record(self, kind: str, pod: str, detail: str = "") -> None:
        event = BridgeEvent(kind, pod, time.monotonic(), time.time(), detail)
        with self._lock:
            self.events.append(event)
        log.info("raybridge %s/%s: %s %s %s", self.namespace, self.cluster, kind, pod, detail)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._task = loop.create_task(self._watch_forever())
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(self._task)
        finally:
            loop.close()

    async def _watch_forever(self) -> None:
        cfg = client.Configuration()
        await config.load_kube_config(config_file=self.kubeconfig, client_configuration=cfg)
        selector = f"{podspec.CLUSTER_LABEL}={self.cluster}"
        async with client.ApiClient(configuration=cfg) as api:
            core = client.CoreV1Api(api)
            checker = asyncio.create_task(self._check_exits())
            try:
                while True:
                    try:
                        await self._list_and_watch(core, selector)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # API errors, 410 Gone, dropped connections: list again
                        log.debug("raybridge watch of %s restarts: %s", self.cluster, exc)
                    await asyncio.sleep(RELIST_DELAY)
            finally:
                checker.cancel()

    async def _list_and_watch(self, core: Any, selector: str) -> None:
        listed = await core.list_namespaced_pod(
            self.namespace, label_selector=selector, _preload_content=False
        )
        body = await listed.json()
        self._pods = {p["metadata"]["name"]: p for p in body.get("items") or []}
        self._reconcile()
        self._synced.set()
        version = body["metadata"]["resourceVersion"]
        events = watch.Watch()
        try:
            async for event in events.stream(
                core.list_namespaced_pod,
                self.namespace,
                label_selector=selector,
                resource_version=version,
                timeout_seconds=WATCH_SECONDS,
                allow_watch_bookmarks=True,
            ):
                kind, pod = event["type"], event["raw_object"]
                if kind == "ERROR":  # e.g. 410 Gone: the resourceVersion is too old
                    raise RuntimeError(f"watch error: {pod}")
                if kind == "BOOKMARK":
                    continue
                name = pod["metadata"]["name"]
                if kind == "DELETED":
                    self._pods.pop(name, None)
                else:
                    self._pods[name] = pod
                self._reconcile()
        finally:
            await events.close()

    async def _check_exits(self) -> None:
        """Record Ray workers that exited on their own (e.g. Ray drained the node) once."""
        while True:
            await asyncio.sleep(0.5)
            with self._lock:
                exited = [(n, w) for n, w in self._workers.items() if not w.running() and not w.stopped]
            for name, node in exited:
                if name not in self._reported:
                    self._reported.add(name)
                    self._record("exited", name, f"code {node.process.returncode}")

    def _reconcile(self) -> None:
        assert self.head is not None
        wanted, unreadable = podspec.wanted_workers(self._pods.values(), self.cluster)
        for name, error in unreadable.items():
            if name not in self._reported:
                self._reported.add(name)
                self._record("error", name, error)
        with self._lock:
            self._wanted = set(wanted)
            gone = [name for name in self._workers if name not in wanted]
            stopping = [self._workers.pop(name) for name in gone]
            new = [
                spec
                for name, spec in wanted.items()
                if name not in self._workers and name not in self._queued
            ]
            self._queued.update(spec.pod for spec in new)
        for node in stopping:
            self._stopper.submit(self._stop, node)
        for spec in new:
            if spec.start_delay > 0:  # its init containers sleep first, as the kubelet would run them
                self._record("init", spec.pod, f"sleeps {spec.start_delay:g}s before ray start")
                timer = threading.Timer(spec.start_delay, self._submit_start, (spec,))
                timer.daemon = True
                with self._lock:
                    self._delays = [t for t in self._delays if t.is_alive()] + [timer]
                timer.start()
            else:
                self._submit_start(spec)

    def _submit_start(self, spec: podspec.WorkerSpec) -> None:
        try:
            self._starter.submit(self._start_in_turn, spec)
        except RuntimeError:  # closing: the starter takes no more work
            with self._lock:
                self._queued.discard(spec.pod)

    def _still_wanted(self, pod: str) -> bool:
        with self._lock:
            return pod in self._wanted and not self._closing.is_set()

    def _start_in_turn(self, spec: podspec.WorkerSpec) -> None:
        """On the starter thread: start the worker, wait until it runs (or fails, or its pod goes)."""
        try:
            if self._still_wanted(spec.pod):
                node = self._start(spec)
                if node is not None:
                    self._wait_started(node, spec.pod)
        finally:
            with self._lock:
                self._queued.discard(spec.pod)
                orphan = self._workers.pop(spec.pod, None) if spec.pod not in self._wanted else None
            if orphan is not None:  # its pod went while it started
                self._stopper.submit(self._stop, orphan)

    def _wait_started(self, node: rayproc.RayNode, pod: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while node.running() and self._still_wanted(pod) and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if STARTED_LINE in node.log_path.read_bytes():
                    return
            time.sleep(0.1)
        if node.running() and self._still_wanted(pod):
            self._record(
                "error", pod, f"no {STARTED_LINE.decode()!r} in {node.log_path} after {START_TIMEOUT:g}s"
            )

    def _start(self, spec: podspec.WorkerSpec) -> rayproc.RayNode | None:
        assert self.head is not None
        args = [f"--object-store-memory={self.object_store_bytes}"]
        if spec.memory is not None:
            args.append(f"--memory={spec.memory}")
        try:
            node = rayproc.start_worker(
                self.head.address,
                instance_id=spec.pod,
                node_type=spec.group,
                num_cpus=spec.num_cpus if spec.num_cpus is not None else 1,
                num_gpus=spec.num_gpus,
                resources=spec.resources,
                labels=spec.labels,
                log_dir=self.log_dir,
                extra_args=tuple(args),
                die_with_parent=True,
            )
        except (OSError, rayproc.RayProcessError) as exc:
            self._record("error", spec.pod, f"ray start failed: {exc}")
            return None
        with self._lock:
            self._workers[spec.pod] = node
        self._record("started", spec.pod, f"pid {node.pid}")
        return node

    def _stop(self, node: rayproc.RayNode) -> None:
        rayproc.stop(node, grace=self.stop_grace)
        self._record("stopped", node.instance_id, f"pid {node.pid}")


# ---- command line ----


def _annotate(kubeconfig: str, namespace: str, cluster: str, address: str) -> None:
    import subprocess

    subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "-n", namespace, "annotate", "--overwrite",
         f"raycluster/{cluster}", f"{GCS_ANNOTATION}={address}"],
        check=True,
        timeout=60,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG", "e2e/.cluster/kubeconfig"))
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--cluster", required=True, help="the RayCluster's name")
    parser.add_argument("--head-num-cpus", type=float, default=0)
    parser.add_argument("--log-dir", type=Path)
    parser.add_argument("--annotate", action="store_true", help="point the RayCluster at the bridge's GCS")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    bridge = RayBridge(
        args.kubeconfig,
        args.namespace,
        args.cluster,
        head={"num_cpus": args.head_num_cpus},
        log_dir=args.log_dir,
    )
    with bridge:
        print(f"Ray head: {bridge.gcs_address}", flush=True)
        if args.annotate:
            _annotate(args.kubeconfig, args.namespace, args.cluster, bridge.gcs_address)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
