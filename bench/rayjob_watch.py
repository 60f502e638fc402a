"""The RayJob fleet benchmark's watch, in a process of its own.

    python -m bench.rayjob_watch KUBECONFIG NAMESPACE

Lists and watches the namespace's RayJobs and prints one JSON line for each thing first seen, with
the wall clock of that moment taken here: ``{"t": ..., "name": ..., "jobStatus": ...}``,
``{"t": ..., "name": ..., "jobId": ...}``, ``{"t": ..., "name": ..., "jobDeploymentStatus": ...}``,
``{"t": ..., "name": ..., "complete": true}``, and
``{"synced": true}`` once the first listing is read. bench/rayjob_fleet.py runs it beside the fake
Ray it serves: in the benchmark's own process, the moments a watch sees would wait for an event
loop that also answers hundreds of the operators' GCS reads a second, and the lag would count that
wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

from rayscale.api.names import RAYJOB

__all__ = ["JobWatch", "Seen", "main"]

ROOT = Path(__file__).resolve().parents[1]


class JobWatch:
    """Every RayJob of a namespace: when (wall clock) each first showed each ``status.jobStatus``,
    when it became Complete, and its ``status.jobId``; the newest ``jobStatus`` and
    ``jobDeploymentStatus`` first seen (`job`, `deployment`). Seen by bench/rayjob_watch.py in a
    process of its own (this one serves the fake Ray), which stamps each moment."""

    def __init__(self, kubeconfig: Path | None, namespace: str) -> None:
        self.kubeconfig, self.ns = kubeconfig, namespace
        self.seen: dict[str, dict[str, float]] = {}
        self.complete: dict[str, float] = {}
        self.job_ids: dict[str, str] = {}
        self.job: dict[str, str] = {}
        self.deployment: dict[str, str] = {}
        self.synced = asyncio.Event()
        self.changed = asyncio.Event()

    def apply(self, line: dict[str, Any]) -> None:
        """One line of the watcher's."""
        if line.get("synced"):
            self.synced.set()
            return
        name, at = line["name"], line["t"]
        if "jobId" in line:
            self.job_ids[name] = line["jobId"]
        if "jobStatus" in line:
            self.seen.setdefault(name, {}).setdefault(line["jobStatus"], at)
            self.job[name] = line["jobStatus"]
        if "jobDeploymentStatus" in line:
            self.deployment[name] = line["jobDeploymentStatus"]
        if line.get("complete"):
            self.complete.setdefault(name, at)
        self.changed.set()

    async def run(self) -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.rayjob_watch", str(self.kubeconfig), self.ns,
            stdout=asyncio.subprocess.PIPE, cwd=ROOT, limit=1 << 20,
        )  # fmt: skip
        assert proc.stdout is not None
        try:
            async for raw in proc.stdout:
                self.apply(json.loads(raw))
            raise RuntimeError(f"the RayJob watcher exited ({await proc.wait()})")
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    async def all_complete(self, count: int, deadline: float, proc: Any, task: asyncio.Task[None]) -> None:
        while len(self.complete) < count:
            if task.done():
                task.result()
                raise RuntimeError("the RayJob watch stopped")
            if proc.poll() is not None:
                raise RuntimeError(f"the operator exited ({proc.returncode})")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.complete)} of {count} RayJobs Complete by the deadline")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=5)


class Seen:
    """What was seen first of each RayJob: one line per new fact, to `out`."""

    def __init__(self, out: Any = sys.stdout) -> None:
        self.out = out
        self.facts: set[tuple[str, str, str]] = set()

    def _say(self, fact: tuple[str, str, str], line: dict[str, Any]) -> None:
        if fact not in self.facts:
            self.facts.add(fact)
            self.out.write(json.dumps(line) + "\n")

    def job(self, job: dict[str, Any], now: float) -> None:
        name, status = job["metadata"]["name"], job.get("status") or {}
        if status.get("jobId"):
            self._say((name, "jobId", ""), {"t": now, "name": name, "jobId": status["jobId"]})
        if status.get("jobStatus"):
            self._say(
                (name, "jobStatus", status["jobStatus"]),
                {"t": now, "name": name, "jobStatus": status["jobStatus"]},
            )
        if status.get("jobDeploymentStatus"):
            deployment = status["jobDeploymentStatus"]
            self._say(
                (name, "jobDeploymentStatus", deployment),
                {"t": now, "name": name, "jobDeploymentStatus": deployment},
            )
        if status.get("jobDeploymentStatus") == "Complete":
            self._say((name, "complete", ""), {"t": now, "name": name, "complete": True})
        self.out.flush()


async def watch(objects: Any, namespace: str, seen: Seen) -> None:
    rv: str | None = None
    while True:
        if rv is None:
            listing = await objects.list_namespaced_custom_object(*RAYJOB.at(namespace))
            now = time.time()
            for job in listing["items"]:
                seen.job(job, now)
            rv = listing["metadata"]["resourceVersion"]
            seen.out.write(json.dumps({"synced": True}) + "\n")
            seen.out.flush()
        resp = await objects.list_namespaced_custom_object(
            *RAYJOB.at(namespace), watch=True, resource_version=rv, allow_watch_bookmarks=True,
            timeout_seconds=60, _preload_content=False,
        )  # fmt: skip
        try:
            async for line in resp.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event["type"] == "ERROR":  # 410 Gone: list again
                    rv = None
                    break
                rv = event["object"]["metadata"]["resourceVersion"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    seen.job(event["object"], time.time())
        finally:
            resp.release()


async def run(kubeconfig: str, namespace: str) -> None:
    cfg = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    async with client.ApiClient(configuration=cfg) as api:
        await watch(client.CustomObjectsApi(api), namespace, Seen())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    asyncio.run(run(args[0], args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
