"""The Ray workers of one Ray bridge: a local Ray worker for every worker pod that should have one
(`podspec.wanted_workers`), started once the Ray head runs, stopped (its process group, by PID)
when its pod goes, and started again `restart_delay` seconds after it exits on its own while its
pod still Runs (its raylet lost the GCS, which Ray gives up on after 60 s, or crashed), as a
kubelet restarts a container. A drained node's worker exits too, but its pod is deleted before the
delay ends.

Workers start one at a time, each once the previous one runs: raylets that start side by side on
one address time out registering with the GCS ("The current node timed out during startup"), and
one at a time is also what 2 cores take. Workers are small: a tiny object store, no dashboard.
Each worker gets its pod's Ray auth settings (`podenv`: the token read from its Secret, as a
kubelet would, which retries while it cannot read them).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Mapping

from e2e.raybridge import podenv, podspec, rayproc
from e2e.raybridge.context import BridgeContext
from e2e.raybridge.headkeeper import START_TIMEOUT, HeadKeeper
from tests.support.polling import Timeout, eventually_sync

__all__ = ["STARTED_LINE", "WorkerKeeper"]

STARTED_LINE = b"Ray runtime started."  # what `ray start` logs once its raylet has registered


class WorkerKeeper:
    """Pod name -> its Ray worker, for the pods `want` names."""

    def __init__(
        self,
        ctx: BridgeContext,
        head: HeadKeeper,
        *,
        object_store_bytes: int,
        env_of: Callable[[str], dict[str, str]],
    ) -> None:
        """`env_of`: a pod's Ray auth settings by pod name (`podenv.EnvError` if unreadable)."""
        self.ctx = ctx
        self.head = head
        self.env_of = env_of
        self.object_store_bytes = object_store_bytes
        self._lock = threading.Lock()
        self._workers: dict[str, rayproc.RayNode] = {}
        self._wanted: dict[str, podspec.WorkerSpec] = {}  # pods that should have a worker now
        self._queued: set[str] = set()  # pods whose worker is waiting to start or starting
        self._restarting: set[str] = set()  # pods whose worker exited and waits to start again
        self._stopper = concurrent.futures.ThreadPoolExecutor(
            max_workers=4, thread_name_prefix="raybridge-stop"
        )
        # The starter thread outlives its workers (PR_SET_PDEATHSIG is per thread): it is shut
        # down after them.
        self._starter = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="raybridge-start"
        )

    def running(self) -> dict[str, rayproc.RayNode]:
        """Pod name -> its running Ray worker process."""
        with self._lock:
            return {name: node for name, node in self._workers.items() if node.running()}

    def want(self, wanted: Mapping[str, podspec.WorkerSpec]) -> None:
        """The pods that should have a worker now: stop the others' workers, start the new ones."""
        with self._lock:
            self._wanted = dict(wanted)
            gone = [name for name in self._workers if name not in wanted]
            stopping = [self._workers.pop(name) for name in gone]
            new = [
                spec
                for name, spec in wanted.items()
                if name not in self._workers and name not in self._queued and name not in self._restarting
            ]
            self._queued.update(spec.pod for spec in new)
        for node in stopping:
            self._stopper.submit(self._stop, node)
        for spec in new:
            if spec.start_delay > 0:  # its init containers sleep first, as the kubelet would run them
                self.ctx.record("init", spec.pod, f"sleeps {spec.start_delay:g}s before ray start")
                self.ctx.later(spec.start_delay, self._submit_start, spec)
            else:
                self._submit_start(spec)

    def check_exits(self) -> None:
        """Workers that exited on their own (Ray drained the node, the raylet lost the GCS):
        recorded, cleaned up, and started again after `restart_delay` if their pod still Runs."""
        with self._lock:
            exited = [(n, w) for n, w in self._workers.items() if not w.running() and not w.stopped]
            for name, _ in exited:
                del self._workers[name]
            restart = {name for name, _ in exited if name in self._wanted}
            self._restarting |= restart
        for name, node in exited:
            self.ctx.record("exited", name, f"pid {node.pid}, code {node.process.returncode}")
            with contextlib.suppress(RuntimeError):  # closing
                self._stopper.submit(rayproc.stop, node, grace=self.ctx.stop_grace)  # what is left of it
            if name in restart:
                self.ctx.later(self.ctx.restart_delay, self._restart, name)

    def close(self) -> None:
        """Stop every worker (a start under way ends first). Call after `BridgeContext.close`."""
        self._starter.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            workers = list(self._workers.values())
            self._workers.clear()
        for node in workers:
            rayproc.stop(node, grace=self.ctx.stop_grace)
        self._stopper.shutdown(wait=True)

    def _restart(self, pod: str) -> None:
        """A kubelet's container restart: the exited worker starts again if its pod still Runs."""
        with self._lock:
            self._restarting.discard(pod)
            spec = self._wanted.get(pod)
            if spec is None or pod in self._workers or pod in self._queued or self.ctx.closing.is_set():
                return
            self._queued.add(pod)
        self.ctx.record("restart", pod, f"{self.ctx.restart_delay:g}s after it exited")
        self._submit_start(spec)

    def _submit_start(self, spec: podspec.WorkerSpec) -> None:
        try:
            self._starter.submit(self._start_in_turn, spec)
        except RuntimeError:  # closing: the starter takes no more work
            with self._lock:
                self._queued.discard(spec.pod)

    def _wait_for_head(self, pod: str) -> bool:
        """Block until the Ray head runs; False if the pod goes (or the bridge closes) first."""
        while not self.head.ready.wait(0.2):
            if not self._still_wanted(pod):
                return False
        return self._still_wanted(pod)

    def _still_wanted(self, pod: str) -> bool:
        with self._lock:
            return pod in self._wanted and not self.ctx.closing.is_set()

    def _start_in_turn(self, spec: podspec.WorkerSpec) -> None:
        """On the starter thread: start the worker, wait until it runs (or fails, or its pod goes)."""
        try:
            env = self._env(spec.pod) if self._wait_for_head(spec.pod) else None
            if env is not None:
                node = self._start(spec, env)
                if node is not None:
                    self._wait_started(node, spec.pod)
        finally:
            with self._lock:
                self._queued.discard(spec.pod)
                orphan = self._workers.pop(spec.pod, None) if spec.pod not in self._wanted else None
            if orphan is not None:  # its pod went while it started
                self._stopper.submit(self._stop, orphan)

    def _env(self, pod: str) -> dict[str, str] | None:
        """The pod's Ray auth settings, once they can be read; None if the pod goes first."""
        deadline = time.monotonic() + START_TIMEOUT
        while self._still_wanted(pod):
            try:
                return self.env_of(pod)
            except podenv.EnvError as exc:  # a kubelet retries too (CreateContainerConfigError)
                if time.monotonic() >= deadline:
                    self.ctx.record("error", pod, f"the Ray worker's environment: {exc}")
                    return None
            time.sleep(1.0)
        return None

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
            self.ctx.record(
                "error", pod, f"no {STARTED_LINE.decode()!r} in {node.log_path} after {START_TIMEOUT:g}s"
            )

    def _start(self, spec: podspec.WorkerSpec, env: Mapping[str, str]) -> rayproc.RayNode | None:
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
                env=env,
                log_dir=self.ctx.log_dir,
                extra_args=tuple(args),
                die_with_parent=True,
            )
        except (OSError, rayproc.RayProcessError) as exc:
            self.ctx.record("error", spec.pod, f"ray start failed: {exc}")
            return None
        with self._lock:
            self._workers[spec.pod] = node
        self.ctx.record("started", spec.pod, f"pid {node.pid}")
        return node

    def _stop(self, node: rayproc.RayNode) -> None:
        rayproc.stop(node, grace=self.ctx.stop_grace)
        self.ctx.record("stopped", node.instance_id, f"pid {node.pid}")
