"""A RayJob submitter container run on this machine, as a kubelet would run it (for `JobBridge`):
its command with the dashboard address replaced by the real dashboard's, its environment (with the
Secret keys it names, e.g. the Ray auth token, read by `podenv`), and its exit written into the
pod's status."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from e2e.raybridge import podenv, rayproc
from hack.localk8s import launcher
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

__all__ = ["SubmitterRun", "command_and_env", "container_env", "head_ready", "now", "spawn", "write_exit"]

DASHBOARD_ENV = "RAY_DASHBOARD_ADDRESS"
SIDECAR_DASHBOARD = ("127.0.0.1:8265", "localhost:8265")  # the sidecar's command and health check


@dataclass(frozen=True)
class SubmitterRun:
    """One submitter run: the pod (and container), its exit code (None while it runs)."""

    pod: str
    container: str
    sidecar: bool
    code: int | None
    log_path: Path
    started: float
    ended: float | None


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return int(response.status) == 200
    except OSError:
        return False


def head_ready(dashboard: str, head: rayproc.RayNode | None) -> bool:
    """KubeRay's readiness probe of a head pod: the dashboard agent's ``/api/local_raylet_healthz``
    and the dashboard's ``/api/gcs_healthz`` (blocking: call it off the event loop). Before the
    agent answers, a job submission fails ("No available agent to submit job")."""
    if head is None or not head.running():
        return False
    args = [str(a) for a in head.process.args] if isinstance(head.process.args, list) else []
    ports = [a.partition("=")[2] for a in args if a.startswith("--dashboard-agent-listen-port=")]
    agent = f"http://{rayproc.NODE_IP}:{ports[-1]}/api/local_raylet_healthz" if ports else None
    return (agent is None or _ok(agent)) and _ok(f"{dashboard}/api/gcs_healthz")


def command_and_env(
    container: Mapping[str, Any], dashboard: str | None, *, sidecar: bool, env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The container's command line and its environment `env` (`podenv.resolve`), the dashboard
    address it was given replaced by `dashboard`; this interpreter's ``ray`` and ``python`` first on
    PATH."""
    given = dict(env)
    real = (dashboard or "").removeprefix("http://")
    old: Sequence[str] = (
        SIDECAR_DASHBOARD if sidecar else [given.get(DASHBOARD_ENV, "").removeprefix("http://")]
    )
    words = [str(w) for w in [*(container.get("command") or []), *(container.get("args") or [])]]
    for name in [o for o in old if o and real]:
        words = [w.replace(name, real) for w in words]
        given = {k: v.replace(name, real) for k, v in given.items()}
    bin_dir = str(Path(sys.executable).parent)
    return words, rayproc.driver_env({**given, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"})


async def container_env(
    api: client.ApiClient, namespace: str, container: Mapping[str, Any], *, wait: float
) -> tuple[dict[str, str], str | None]:
    """The container's environment, once its Secret keys can be read (a kubelet retries too); after
    `wait` seconds, its literal values and what went wrong."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return await podenv.resolve(api, namespace, container, keep=podenv.keep_all), None
        except podenv.EnvError as exc:
            if time.monotonic() >= deadline:
                why = f"the submitter's environment: {exc}; it runs without"
                return podenv.literal(container, podenv.keep_all), why
        await asyncio.sleep(1.0)


async def spawn(words: list[str], env: Mapping[str, str], log_path: Path) -> asyncio.subprocess.Process:
    """Start the command in a session of its own, output to `log_path`; it dies with this thread."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv, preexec = launcher.dying_with_parent(words)
    out = await asyncio.to_thread(open, log_path, "ab")
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec,
        )
    finally:
        out.close()


def _terminated(container: Mapping[str, Any], code: int, started: str) -> dict[str, Any]:
    return {
        "name": container.get("name"),
        "image": container.get("image") or "",
        "imageID": "",
        "ready": False,
        "restartCount": 0,
        "started": False,
        "state": {
            "terminated": {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": started,
                "finishedAt": now(),
            }
        },
    }


async def write_exit(
    api: client.ApiClient,
    namespace: str,
    pod: str,
    container: Mapping[str, Any],
    index: int,
    code: int,
    started: str,
    *,
    sidecar: bool,
) -> str | None:
    """The container's exit into the pod's status, as a kubelet reports it (a K8sJobMode pod ends:
    Succeeded or Failed; a sidecar's head pod keeps Running). Retried on conflicts; the error, if any."""
    core = client.CoreV1Api(api)
    for _ in range(10):
        try:
            current: dict[str, Any] = api.sanitize_for_serialization(
                await core.read_namespaced_pod_status(pod, namespace)
            )
            status = current.get("status") or {}
            statuses = [
                s for s in status.get("containerStatuses") or [] if s.get("name") != container.get("name")
            ]
            statuses.insert(min(index, len(statuses)), _terminated(container, code, started))
            status["containerStatuses"] = statuses
            if not sidecar:
                status["phase"] = "Succeeded" if code == 0 else "Failed"
                status["conditions"] = [
                    {**c, "status": "False"} if c.get("type") in ("Ready", "ContainersReady") else c
                    for c in status.get("conditions") or []
                ]
            current["status"] = status
            await core.replace_namespaced_pod_status(pod, namespace, current)  # type: ignore[arg-type]
            return None
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status != 409:
                return f"writing the submitter's exit: {exc.status} {exc.reason}"
    return "writing the submitter's exit: conflicts"
