"""The Ray head of one Ray bridge, following the cluster's head pod as Kubernetes without GCS fault
tolerance would: the head started first (the RayCluster needs its address before it has pods) is
adopted by the first head pod that Runs; when that pod is deleted (or stops Running) the Ray head
is stopped; a new head pod gets a new Ray head on the same GCS port (a new Ray session); a head
that exits on its own while its pod Runs is started again `restart_delay` seconds later, as a
kubelet restarts a container. What to do when is `podspec.head_action`.

Each head the bridge starts for a head pod gets that pod's Ray auth settings (`podenv`: the
token read from its Secret, as a kubelet would), and a head pod whose settings differ from those
of the head started first gets a new head rather than adopting it. With `wait_for_pod` (the
RayCluster's address is known without a head: its ``port`` is given) no head starts before the
head pod Runs, as a kubelet would start it.

The head is started, stopped and restarted on a thread of its own (its processes die with the
thread that started them), in the order the head pod asked.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from e2e.raybridge import podenv, podspec, rayproc
from e2e.raybridge.context import BridgeContext

__all__ = ["START_TIMEOUT", "HeadKeeper"]

START_TIMEOUT = 120.0


class HeadKeeper:
    """The Ray head: `node`, its GCS `address` (the same for every head), `ready` once it accepts."""

    def __init__(
        self,
        ctx: BridgeContext,
        head_kwargs: Mapping[str, Any],
        *,
        env_of: Callable[[str], dict[str, str]],
        wait_for_pod: bool = False,
    ) -> None:
        """`head_kwargs`: `rayproc.start_head` keyword arguments (``num_cpus``, ``env``, ...);
        `env_of`: a pod's Ray auth settings by pod name (`podenv.EnvError` if unreadable)."""
        self.ctx = ctx
        self.kwargs = dict(head_kwargs)
        self.env_of = env_of
        self.wait_for_pod = wait_for_pod
        self._pod_env: dict[str, str] = {}  # the running head's settings from its pod
        self.node: rayproc.RayNode | None = None
        self.address = ""
        self.ready = threading.Event()  # the Ray head runs and its GCS port accepts
        self._lock = threading.Lock()
        self._live: str | None = None  # the Running head pod (podspec.live_head)
        self._bound: str | None = None  # the head pod the running Ray head stands for
        self._old_temp: list[Path] = []  # session dirs of stopped heads, removed by close()
        self._died: rayproc.RayNode | None = None  # a head that exited on its own, restarting
        self._ops = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="raybridge-head")

    def start(self, *, timeout: float) -> None:
        """Start the first head on the caller's thread and wait for its GCS port; with
        `wait_for_pod`, only fix the address."""
        if self.wait_for_pod:
            self.address = f"{rayproc.NODE_IP}:{int(self.kwargs['port'])}"
            return
        self.node = rayproc.start_head(log_dir=self.ctx.log_dir, die_with_parent=True, **self.kwargs)
        self.address = self.node.address
        rayproc.wait_for_port(rayproc.NODE_IP, self.node.port, timeout=timeout, node=self.node)
        self.ready.set()

    def follow(self, live: str | None) -> None:
        """The head pod that Runs now (`podspec.live_head`): the head follows it, on the head thread."""
        with self._lock:
            changed = live != self._live
            self._live = live
        if changed or live is not None:  # also: a head that exited while its pod Runs
            with contextlib.suppress(RuntimeError):  # closing
                self._ops.submit(self._converge)

    def check_exit(self) -> None:
        """A Ray head that exited on its own (e.g. "timed out during startup" on a loaded machine)
        while its pod Runs: a kubelet restarts the container, `restart_delay` seconds later."""
        head = self.node
        if (
            head is not None
            and not head.stopped
            and not head.running()
            and self._live is not None
            and head is not self._died
        ):
            self._died = head
            self.ctx.record("exited", "head", f"pid {head.pid}, code {head.process.returncode}")
            self.ctx.later(self.ctx.restart_delay, self._restart)

    def close(self) -> None:
        """Stop the head and remove every session dir it left. Idempotent."""
        with contextlib.suppress(RuntimeError):  # RuntimeError: closed before
            self._ops.submit(self._stop).result()
        self._ops.shutdown(wait=True)
        for path in self._old_temp:
            shutil.rmtree(path, ignore_errors=True)
        self._old_temp.clear()

    # ---- on the head thread ----

    def _restart(self) -> None:
        def restart() -> None:
            self._stop()  # what is left of it
            self._converge()

        with contextlib.suppress(RuntimeError):  # closing
            self._ops.submit(restart)

    def _action(self) -> tuple[podspec.HeadAction, str | None]:
        with self._lock:
            head = self.node
            running = head is not None and not head.stopped and head.running()
            live = self._live
            action = podspec.head_action(running=running, bound=self._bound, live=live)
        return action, live

    def _converge(self) -> None:
        """Make the Ray head follow the head pod: stop it, start a new one, or both."""
        if self.ctx.closing.is_set():
            return
        action, live = self._action()
        if action == "adopt" and live is not None and not self._same_env(live):
            action = "restart"  # the head pod asks for other auth settings than the first head has
        if action == "adopt":
            with self._lock:
                self._bound = live
        if action in ("stop", "restart"):
            self._stop()
        if action in ("start", "restart") and not self.ctx.closing.is_set():
            self._start(live)

    def _env(self, live: str) -> dict[str, str]:
        return self.env_of(live.split(" ", 1)[0])  # live: "name uid"

    def _same_env(self, live: str) -> bool:
        try:
            return self._env(live) == self._pod_env
        except podenv.EnvError:
            return False  # a new head, which waits until the settings can be read

    def _stop(self) -> None:
        head = self.node
        if head is None or head.stopped:
            return
        self.ready.clear()
        with self._lock:
            bound, self._bound = self._bound, None
        rayproc.stop(head, grace=self.ctx.stop_grace, remove_temp=False)  # old workers still use it
        if head.temp_dir is not None:
            self._old_temp.append(head.temp_dir)
        self.ctx.record("head-stopped", bound or "", f"pid {head.pid}")

    def _start(self, pod: str | None) -> None:
        """A new Ray head (a new session) on the same GCS port; a few tries while the port frees."""
        port = int(self.address.rpartition(":")[2])
        deadline = time.monotonic() + START_TIMEOUT
        while not self.ctx.closing.is_set():
            try:
                pod_env = self._env(pod) if pod is not None else {}
            except podenv.EnvError as exc:  # a kubelet retries too (CreateContainerConfigError)
                if time.monotonic() >= deadline:
                    self.ctx.record("error", pod or "", f"the Ray head's environment: {exc}")
                    return
                time.sleep(1.0)
                continue
            kwargs = {k: v for k, v in self.kwargs.items() if k not in ("port", "env")}
            env = {**(self.kwargs.get("env") or {}), **pod_env}
            head = rayproc.start_head(
                port=port, log_dir=self.ctx.log_dir, die_with_parent=True, env=env, **kwargs
            )
            self.node = head
            try:
                rayproc.wait_for_port(rayproc.NODE_IP, port, timeout=START_TIMEOUT, node=head)
            except rayproc.RayProcessError as exc:
                rayproc.stop(head, grace=self.ctx.stop_grace)
                if time.monotonic() >= deadline:
                    self.ctx.record("error", pod or "", f"the Ray head did not start again: {exc}")
                    return
                time.sleep(1.0)
                continue
            with self._lock:
                self._bound = pod
                self._pod_env = pod_env
            self.ready.set()
            self.ctx.record("head-started", pod or "", f"pid {head.pid}, port {port}")
            return
