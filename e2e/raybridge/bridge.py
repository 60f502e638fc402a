"""The Ray bridge: real Ray nodes on this machine for the pods of one RayCluster on kwok nodes.

kwok runs no containers, so a RayCluster on the local control plane has pods but no Ray. The
bridge stands in for the containers: it starts a real Ray head (``--num-cpus`` as the head group's
``rayStartParams`` say, 0 by default, as KubeRay's e2e clusters have it) and, for every worker pod
of the cluster that is Running and not being deleted, a local Ray worker with the logical
resources and labels of the pod's generated ``ray start`` command, ``RAY_CLOUD_INSTANCE_ID`` = the
pod name and ``RAY_NODE_TYPE_NAME`` = its group (see podspec.py). When the pod gets a
deletionTimestamp or disappears, exactly that worker is stopped (its process group, by PID), as a
kubelet would stop the container. Workers are small: a tiny object store, no dashboard.

Like Kubernetes running Ray without GCS fault tolerance:

- The head pod decides whether the Ray head runs. When it is deleted (or stops Running) the Ray
  head is stopped; when a head pod Runs again a new Ray head starts on the same GCS port: a new
  Ray session, in which the old workers are unknown. Until the cluster has a head pod, the head
  started by `start` runs (the RayCluster needs its address first).
- A worker whose ``ray start`` exits on its own while its pod still Runs (its raylet lost the
  GCS, which Ray gives up on after 60 s, or crashed) is started again `restart_delay` seconds
  later, once the head runs, as a kubelet restarts a container. A drained node's worker exits
  too, but its pod is deleted before the delay ends.
- The head gets extra environment through ``head={"env": {...}}`` (e.g.
  ``RAY_enable_infeasible_task_early_exit``).

rayscale finds the head through the RayCluster annotation ``rayscale.io/gcs-address`` =
`RayBridge.gcs_address`: start the bridge first, then create the cluster with it. rayscale follows
the annotation only when it runs with ``--allow-gcs-address-override`` (otherwise it dials the
cluster's head Service, which has no Ray behind it here).

    with RayBridge(kubeconfig, "ns", "raycluster") as bridge:
        body["metadata"]["annotations"] = {GCS_ANNOTATION: bridge.gcs_address}
        ...  # create the RayCluster; bridge.workers() shows the Ray workers running

Pods are watched (list, then watch from its resourceVersion; any error or an expired
resourceVersion lists again) on a thread of the bridge's own, so the bridge works under sync and
async tests alike. Every Ray process dies with the test process, however that dies
(``PR_SET_PDEATHSIG``).

Also a command: ``python -m e2e.raybridge.bridge --namespace NS --cluster NAME [--annotate]``
runs the bridge until Ctrl-C or SIGTERM (e.g. after ``make demo``, next to ``rayscale run
--allow-gcs-address-override``). ``make demo`` (e2e/demo.py) uses the class.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import logging
import os
import shutil
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
from tests.support.polling import Timeout, eventually_sync

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

    # "init" | "started" | "stopped" | "exited" | "restart" | "head-stopped" | "head-started" | "error"
    kind: str
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
        restart_delay: float = 5.0,
    ) -> None:
        """`head`: `rayproc.start_head` keyword arguments (``num_cpus``, ``env``, ...)."""
        self.kubeconfig = str(kubeconfig)
        self.namespace = namespace
        self.cluster = cluster
        self.head_kwargs = dict(head if head is not None else {"num_cpus": 0})
        self.log_dir = log_dir
        self.object_store_bytes = object_store_bytes
        self.stop_grace = stop_grace
        self.restart_delay = restart_delay
        self.head: rayproc.RayNode | None = None
        self._address = ""  # the GCS address, the same for every head the bridge starts
        self.events: list[BridgeEvent] = []
        self._lock = threading.Lock()
        self._workers: dict[str, rayproc.RayNode] = {}
        self._pods: dict[str, Mapping[str, Any]] = {}
        self._reported: set[str] = set()  # pods whose unreadable spec was recorded
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
        self._wanted: dict[str, podspec.WorkerSpec] = {}  # pods that should have a worker now
        self._queued: set[str] = set()  # pods whose worker is waiting to start or starting
        self._restarting: set[str] = set()  # pods whose worker exited and waits to start again
        self._closing = threading.Event()
        self._delays: list[threading.Timer] = []  # starts waiting (init containers, restarts)
        # The head: started, stopped and restarted on a thread of its own (its processes die
        # with the thread that started them), in the order the head pod asked.
        self._head_ops = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="raybridge-head"
        )
        self._head_ready = threading.Event()  # the Ray head runs and its GCS port accepts
        self._head_live: str | None = None  # the Running head pod (podspec.live_head)
        self._head_bound: str | None = None  # the head pod the running Ray head stands for
        self._old_temp: list[Path] = []  # session dirs of stopped heads, removed by close()
        self._head_died: rayproc.RayNode | None = None  # a head that exited on its own, restarting

    # ---- lifecycle ----

    @property
    def gcs_address(self) -> str:
        assert self._address, "the bridge is not started"
        return self._address

    def start(self, *, timeout: float = 90.0) -> RayBridge:
        """Start the head (waits for its GCS port) and the pod watch (waits for the first list)."""
        self.head = rayproc.start_head(log_dir=self.log_dir, die_with_parent=True, **self.head_kwargs)
        self._address = self.head.address
        try:
            rayproc.wait_for_port(rayproc.NODE_IP, self.head.port, timeout=timeout, node=self.head)
            self._head_ready.set()
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
        with contextlib.suppress(RuntimeError):  # RuntimeError: closed before
            self._head_ops.submit(self._stop_head).result()
        self._head_ops.shutdown(wait=True)
        for path in self._old_temp:
            shutil.rmtree(path, ignore_errors=True)
        self._old_temp.clear()

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

    def head_running(self) -> bool:
        """The Ray head runs and its GCS port accepted connections."""
        return self._head_ready.is_set()

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
        """Ray workers that exited on their own (Ray drained the node, the raylet lost the GCS):
        recorded, cleaned up, and started again after `restart_delay` if their pod still Runs. A
        Ray head that exited on its own while its head pod Runs is started again as well."""
        while True:
            await asyncio.sleep(0.5)
            with self._lock:
                exited = [(n, w) for n, w in self._workers.items() if not w.running() and not w.stopped]
                for name, _ in exited:
                    del self._workers[name]
                restart = {name for name, _ in exited if name in self._wanted}
                self._restarting |= restart
            for name, node in exited:
                self._record("exited", name, f"pid {node.pid}, code {node.process.returncode}")
                with contextlib.suppress(RuntimeError):  # closing
                    self._stopper.submit(rayproc.stop, node, grace=self.stop_grace)  # what is left of it
                if name in restart:
                    self._later(self.restart_delay, self._restart, name)
            head = self.head
            if (
                head is not None
                and not head.stopped
                and not head.running()
                and self._head_live is not None
                and head is not self._head_died
            ):
                # the Ray head exited on its own (e.g. "timed out during startup" on a loaded
                # machine) while its pod Runs: a kubelet restarts the container
                self._head_died = head
                self._record("exited", "head", f"pid {head.pid}, code {head.process.returncode}")
                self._later(self.restart_delay, self._restart_head)

    def _restart_head(self) -> None:
        def restart() -> None:
            self._stop_head()  # what is left of it
            self._converge_head()

        with contextlib.suppress(RuntimeError):  # closing
            self._head_ops.submit(restart)

    def _later(self, seconds: float, function: Any, *args: Any) -> None:
        timer = threading.Timer(seconds, function, args)
        timer.daemon = True
        with self._lock:
            if self._closing.is_set():
                return
            self._delays = [t for t in self._delays if t.is_alive()] + [timer]
        timer.start()

    def _restart(self, pod: str) -> None:
        """A kubelet's container restart: the exited worker starts again if its pod still Runs."""
        with self._lock:
            self._restarting.discard(pod)
            spec = self._wanted.get(pod)
            if spec is None or pod in self._workers or pod in self._queued or self._closing.is_set():
                return
            self._queued.add(pod)
        self._record("restart", pod, f"{self.restart_delay:g}s after it exited")
        self._submit_start(spec)

    def _reconcile(self) -> None:
        wanted, unreadable = podspec.wanted_workers(self._pods.values(), self.cluster)
        for name, error in unreadable.items():
            if name not in self._reported:
                self._reported.add(name)
                self._record("error", name, error)
        live = podspec.live_head(self._pods.values(), self.cluster)
        with self._lock:
            head_changed = live != self._head_live
            self._head_live = live
            self._wanted = dict(wanted)
            gone = [name for name in self._workers if name not in wanted]
            stopping = [self._workers.pop(name) for name in gone]
            new = [
                spec
                for name, spec in wanted.items()
                if name not in self._workers and name not in self._queued and name not in self._restarting
            ]
            self._queued.update(spec.pod for spec in new)
        if head_changed or live is not None:  # also: a head that exited while its pod Runs
            with contextlib.suppress(RuntimeError):  # closing
                self._head_ops.submit(self._converge_head)
        for node in stopping:
            self._stopper.submit(self._stop, node)
        for spec in new:
            if spec.start_delay > 0:  # its init containers sleep first, as the kubelet would run them
                self._record("init", spec.pod, f"sleeps {spec.start_delay:g}s before ray start")
                self._later(spec.start_delay, self._submit_start, spec)
            else:
                self._submit_start(spec)

    # ---- the head (on the head thread) ----

    def _head_action(self) -> tuple[podspec.HeadAction, str | None]:
        with self._lock:
            head = self.head
            running = head is not None and not head.stopped and head.running()
            live = self._head_live
            action = podspec.head_action(running=running, bound=self._head_bound, live=live)
        return action, live

    def _converge_head(self) -> None:
        """Make the Ray head follow the head pod: stop it, start a new one, or both."""
        if self._closing.is_set():
            return
        action, live = self._head_action()
        if action == "adopt":
            with self._lock:
                self._head_bound = live
        if action in ("stop", "restart"):
            self._stop_head()
        if action in ("start", "restart") and not self._closing.is_set():
            self._start_head(live)

    def _stop_head(self) -> None:
        head = self.head
        if head is None or head.stopped:
            return
        self._head_ready.clear()
        with self._lock:
            bound, self._head_bound = self._head_bound, None
        rayproc.stop(head, grace=self.stop_grace, remove_temp=False)  # old workers still use it
        if head.temp_dir is not None:
            self._old_temp.append(head.temp_dir)
        self._record("head-stopped", bound or "", f"pid {head.pid}")

    def _start_head(self, pod: str | None) -> None:
        """A new Ray head (a new session) on the same GCS port; a few tries while the port frees."""
        port = int(self._address.rpartition(":")[2])
        deadline = time.monotonic() + START_TIMEOUT
        while not self._closing.is_set():
            head = rayproc.start_head(
                port=port,
                log_dir=self.log_dir,
                die_with_parent=True,
                **{k: v for k, v in self.head_kwargs.items() if k != "port"},
            )
            self.head = head
            try:
                rayproc.wait_for_port(rayproc.NODE_IP, port, timeout=START_TIMEOUT, node=head)
            except rayproc.RayProcessError as exc:
                rayproc.stop(head, grace=self.stop_grace)
                if time.monotonic() >= deadline:
                    self._record("error", pod or "", f"the Ray head did not start again: {exc}")
                    return
                time.sleep(1.0)
                continue
            with self._lock:
                self._head_bound = pod
            self._head_ready.set()
            self._record("head-started", pod or "", f"pid {head.pid}, port {port}")
            return

    def _submit_start(self, spec: podspec.WorkerSpec) -> None:
        try:
            self._starter.submit(self._start_in_turn, spec)
        except RuntimeError:  # closing: the starter takes no more work
            with self._lock:
                self._queued.discard(spec.pod)

    def _wait_for_head(self, pod: str) -> bool:
        """Block until the Ray head runs; False if the pod goes (or the bridge closes) first."""
        while not self._head_ready.wait(0.2):
            if not self._still_wanted(pod):
                return False
        return self._still_wanted(pod)

    def _still_wanted(self, pod: str) -> bool:
        with self._lock:
            return pod in self._wanted and not self._closing.is_set()

    def _start_in_turn(self, spec: podspec.WorkerSpec) -> None:
        """On the starter thread: start the worker, wait until it runs (or fails, or its pod goes)."""
        try:
            if self._wait_for_head(spec.pod):
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
        def started() -> bool:
            with contextlib.suppress(OSError):
                if STARTED_LINE in node.log_path.read_bytes():
                    return True
            return False

        with contextlib.suppress(Timeout):  # recorded below, unless the node stopped or went
            eventually_sync(
                lambda: started() or not node.running() or not self._still_wanted(pod),
                timeout=START_TIMEOUT,
                interval=0.1,
            )
        if node.running() and self._still_wanted(pod) and not started():
            self._record(
                "error", pod, f"no {STARTED_LINE.decode()!r} in {node.log_path} after {START_TIMEOUT:g}s"
            )

    def _start(self, spec: podspec.WorkerSpec) -> rayproc.RayNode | None:
        args = [f"--object-store-memory={self.object_store_bytes}"]
        if spec.memory is not None:
            args.append(f"--memory={spec.memory}")
        try:
            node = rayproc.start_worker(
                self.gcs_address,
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
    parser.add_argument("--annotate", action="store_true",
                        help="point the RayCluster at the bridge's GCS (rayscale must run with "
                        "--allow-gcs-address-override to follow it)")  # fmt: skip
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
