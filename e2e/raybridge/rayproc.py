"""Real Ray nodes as local processes, for tests and the pod -> Ray worker bridge.

Standard library only; needs the ``ray`` CLI (``pip install ray``) next to this interpreter or on
PATH. Each node is ``ray start ... --block`` in its own process group (``setsid``; the PID is the
group id) and is stopped by signalling that group: SIGTERM, then SIGKILL. Never ``ray stop``: it
kills every Ray process of the user, including another test's. (Ray's worker processes may sit in
process groups of their own; they exit by themselves when their raylet goes away.)

Addresses: every node registers with the loopback address ``NODE_IP`` = 127.0.0.2, and the GCS
address is ``127.0.0.2:<port>``. Not 127.0.0.1, because Ray 2.60 treats exactly ``127.0.0.1``,
``localhost`` and ``::1`` specially: without ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` it rewrites them
to the machine's outward address (for ``--address`` and ``--node-ip-address`` alike), and with it
``ray start`` refuses to start any worker node ("Multi-node Ray clusters are not supported on
Windows and OSX"). 127.0.0.2 is loopback on Linux and left alone. Ray then listens on all
interfaces (it binds only to 127.0.0.1 when that is the node address), so the ports are reachable
from outside the machine while the nodes run; their addresses never leave it.

Drivers connect with ``ray.init(address=node.address, _node_ip_address=NODE_IP)`` and the
environment of ``driver_env()``.

    head = start_head(num_cpus=1)
    wait_for_port(NODE_IP, head.port, timeout=60, node=head)
    worker = start_worker(head.address, instance_id="pod-a", node_type="group-a", resources={"a": 1})
    ...
    stop(worker); stop(head)

Whether a worker has joined is a question for the GCS (rayscale.ray.client, or ``ray status``);
`wait_until` polls any such check with a deadline. Start the nodes of a cluster one after another
(wait for each to register): that is also what a 2-core machine can take.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hack.localk8s import launcher
from tests.support.polling import Timeout, eventually_sync

__all__ = [
    "NODE_IP",
    "RayNode",
    "RayProcessError",
    "driver_env",
    "ray_cli",
    "running_head",
    "start_head",
    "start_worker",
    "stop",
    "wait_for_port",
    "wait_until",
]

T = TypeVar("T")

NODE_IP = "127.0.0.2"  # see the module docstring
# For every Ray process and driver.
BASE_ENV: Mapping[str, str] = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1",  # 0 would make `ray start` refuse worker nodes
    "RAY_enable_autoscaler_v2": "1",  # request_resources goes to the GCS, as on KubeRay with v2
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
    # Hermetic: without it a token left in ~/.ray/auth_token (any earlier local `ray.init` writes
    # one) turns token auth on for the nodes but not for rayscale's clients. Token tests pass
    # RAY_AUTH_MODE=token in their `env`, which wins.
    "RAY_AUTH_MODE": "disabled",
}


class RayProcessError(RuntimeError):
    """A Ray node did not start or stop as expected; the message ends with its log tail."""


@dataclass
class RayNode:
    """One ``ray start --block`` process group."""

    role: str  # "head" | "worker"
    process: subprocess.Popen[bytes]
    log_path: Path
    gcs_address: str  # host:port of the cluster's GCS
    instance_id: str = ""
    node_type: str = ""
    temp_dir: Path | None = None  # scratch (the head's --temp-dir, default log dirs), removed by stop()
    stopped: bool = field(default=False, init=False)

    @property
    def pid(self) -> int:
        """Also the process group id (started under setsid)."""
        return self.process.pid

    @property
    def port(self) -> int:
        return int(self.gcs_address.rpartition(":")[2])

    @property
    def address(self) -> str:
        return self.gcs_address

    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        return file_tail(self.log_path, lines)


def file_tail(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a log file ("" when it cannot be read)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


async def end_process(process: asyncio.subprocess.Process, grace: float) -> None:
    """Close `process`'s stdin (a Ray driver's cue to end), give it `grace` seconds to exit, then
    kill it; returns once it has exited."""
    if process.stdin is not None and not process.stdin.is_closing():
        process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


def ray_cli() -> str:
    """The ``ray`` executable of this interpreter's environment, else the one on PATH."""
    beside = Path(sys.executable).parent / "ray"
    if beside.is_file():
        return str(beside)
    found = shutil.which("ray")
    if found is None:
        raise RayProcessError("the `ray` command is not installed (pip install ray)")
    return found


EVERY_INTERFACE = ""  # the host Ray nodes bind their ports on


def driver_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment with `BASE_ENV` and `extra`: for drivers and Ray nodes."""
    env = dict(os.environ)
    env.update(BASE_ENV)
    env.update(extra or {})
    return env


_NODE_PORTS = (
    "node-manager-port",
    "object-manager-port",
    "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port",
    "runtime-env-agent-port",
    "metrics-export-port",
)


def _node_args(
    num_cpus: float | None,
    num_gpus: float | None,
    resources: Mapping[str, float] | None,
    labels: Mapping[str, str] | None,
) -> list[str]:
    # Every port is chosen here, one after another: Ray's defaults are fixed numbers (52365,
    # 10001, 8265) or picked by each node on its own, and two nodes starting at once on one machine
    # then collide ("bind: Address already in use" in raylet.err).
    args = [f"--node-ip-address={NODE_IP}", "--disable-usage-stats"]
    args += [f"--{name}={launcher.free_port(EVERY_INTERFACE)}" for name in _NODE_PORTS]
    if num_cpus is not None:
        args.append(f"--num-cpus={num_cpus:g}")
    if num_gpus is not None:
        args.append(f"--num-gpus={num_gpus:g}")
    if resources:
        args.append(f"--resources={json.dumps(dict(resources))}")
    if labels:
        args.append(f"--labels={json.dumps(dict(labels))}")
    return args


def _spawn(
    args: list[str], env: Mapping[str, str], log_path: Path, *, die_with_parent: bool
) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    preexec: Callable[[], None] | None = None
    if die_with_parent:
        args, preexec = launcher.dying_with_parent(args)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            args,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # setsid: pid == process group id
            preexec_fn=preexec,
        )


def start_head(
    *,
    port: int | None = None,
    num_cpus: float | None = 1,
    num_gpus: float | None = None,
    resources: Mapping[str, float] | None = None,
    labels: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    log_dir: Path | None = None,
    extra_args: tuple[str, ...] = (),
    die_with_parent: bool = False,
) -> RayNode:
    """Start a head node (GCS, raylet) without dashboard or usage stats. Does not wait.

    Logs go to `log_dir` when given (kept), else to the scratch dir that `stop` removes.

    `env` is added to this process's environment (e.g. ``RAY_AUTH_MODE``/``RAY_AUTH_TOKEN``). A
    short private ``--temp-dir`` keeps Unix socket paths short; the workers use it too. No
    autoscaler monitor runs: rayscale is the autoscaler. With `die_with_parent`, the node gets
    SIGKILL when the thread that started it ends (see `hack.localk8s.launcher.dying_with_parent`).
    """
    port = port or launcher.free_port(EVERY_INTERFACE)
    temp_dir = Path(tempfile.mkdtemp(prefix="rayh-", dir="/tmp"))
    log_path = (log_dir or temp_dir) / f"head-{port}.log"
    args = [
        ray_cli(),
        "start",
        "--head",
        "--block",
        f"--port={port}",
        "--include-dashboard=false",
        "--no-monitor",
        f"--ray-client-server-port={launcher.free_port(EVERY_INTERFACE)}",
        # token auth starts a dashboard process anyway
        f"--dashboard-port={launcher.free_port(EVERY_INTERFACE)}",
        f"--temp-dir={temp_dir}",
        *_node_args(num_cpus, num_gpus, resources, labels),
        *extra_args,
    ]
    process = _spawn(args, driver_env(env), log_path, die_with_parent=die_with_parent)
    return RayNode("head", process, log_path, f"{NODE_IP}:{port}", temp_dir=temp_dir)


@contextlib.contextmanager
def running_head(*, timeout: float, **options: Any) -> Iterator[RayNode]:
    """A head started with `options` (as `start_head`), its GCS accepting connections within
    `timeout` seconds; stopped on the way out."""
    head = start_head(**options)
    try:
        wait_for_port(NODE_IP, head.port, timeout=timeout, node=head)
        yield head
    finally:
        stop(head)


def start_worker(
    gcs_address: str,
    *,
    instance_id: str = "",
    node_type: str = "",
    num_cpus: float | None = 1,
    num_gpus: float | None = None,
    resources: Mapping[str, float] | None = None,
    labels: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    log_dir: Path | None = None,
    extra_args: tuple[str, ...] = (),
    die_with_parent: bool = False,
) -> RayNode:
    """Start a worker node joining `gcs_address`. Does not wait for it to register.

    `instance_id` and `node_type` become ``RAY_CLOUD_INSTANCE_ID`` and ``RAY_NODE_TYPE_NAME``:
    the GCS reports them as the node's ``instance_id`` and ``ray_node_type_name``.
    """
    identity: dict[str, str] = dict(env or {})
    if instance_id:
        identity["RAY_CLOUD_INSTANCE_ID"] = instance_id
    if node_type:
        identity["RAY_NODE_TYPE_NAME"] = node_type
    scratch = None if log_dir else Path(tempfile.mkdtemp(prefix="rayw-", dir="/tmp"))
    log_path = (log_dir or scratch or Path()) / f"worker-{instance_id or 'node'}-{time.time_ns()}.log"
    args = [
        ray_cli(),
        "start",
        "--block",
        f"--address={gcs_address}",
        *_node_args(num_cpus, num_gpus, resources, labels),
        *extra_args,
    ]
    process = _spawn(args, driver_env(identity), log_path, die_with_parent=die_with_parent)
    return RayNode(
        "worker",
        process,
        log_path,
        gcs_address,
        instance_id=instance_id,
        node_type=node_type,
        temp_dir=scratch,
    )


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop(node: RayNode, *, grace: float = 10.0, remove_temp: bool = True) -> None:
    """SIGTERM the node's process group, SIGKILL what is left after `grace` seconds. Idempotent.

    Its scratch dir goes too, unless `remove_temp` is false (a head's session dir that workers of
    that session still use: remove it later).
    """
    if node.stopped:
        return
    node.stopped = True
    pgid = node.pid
    if _signal_group(pgid, signal.SIGTERM):
        deadline = time.monotonic() + grace
        while _group_alive(pgid) and time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.process.wait(timeout=0.1)  # reaps the leader once it exits
        _signal_group(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        node.process.wait(timeout=5)
    if node.temp_dir is not None and remove_temp:
        shutil.rmtree(node.temp_dir, ignore_errors=True)


def wait_until(
    check: Callable[[], T],
    *,
    timeout: float,
    interval: float = 0.2,
    what: str = "",
    node: RayNode | None = None,
) -> T:
    """Call `check` until it returns something truthy (`tests.support.polling.eventually_sync`);
    RayProcessError after `timeout` seconds.

    With `node`, fail at once (with its log tail) if that node's process exits meanwhile.
    """

    def alive_check() -> T:
        value = check()
        if not value and node is not None and not node.running():
            raise RayProcessError(
                f"ray {node.role} exited ({node.process.returncode}) while waiting for {what or check!r}:\n"
                f"{node.log_tail()}"
            )
        return value

    try:
        return eventually_sync(alive_check, timeout=timeout, interval=interval, message=what or repr(check))
    except Timeout as exc:
        tail = f":\n{node.log_tail()}" if node is not None else ""
        raise RayProcessError(f"{exc}{tail}") from None


def wait_for_port(host: str, port: int, *, timeout: float, node: RayNode | None = None) -> None:
    """Wait until something accepts TCP connections on host:port (e.g. a head's GCS)."""

    def accepting() -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            return sock.connect_ex((host, port)) == 0

    wait_until(accepting, timeout=timeout, what=f"{host}:{port} accepting connections", node=node)
