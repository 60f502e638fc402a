"""Ray tasks a disruption test runs on the nodes it disrupts, through the e2e Ray driver, and what
became of them: each task blocks on a marker file until the test lets it end (`release`), writes
the Ray node it started on, and returns the node it ended on. A task that ended on the node it
started on lost nothing; one that ended elsewhere was run again (its first node was killed under
it); one that failed is lost. Also the waits every such test needs: the worker pods Running with
their Ray nodes, the RayCluster's Events of a reason."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.raybridge.bridge import RayBridge
from e2e.raybridge.driver import RayDriver

from rayscale.ray.client import GcsClient
from tests.support.kube import Kube
from tests.support.polling import eventually

__all__ = ["Tasks", "bridge_for", "cluster_events", "in_ray"]


def bridge_for(kubeconfig: Path, namespace: str, cluster: str, log_dir: Path) -> Iterator[RayBridge]:
    """A fixture's body: the Ray bridge for RayCluster `cluster` (a head of 0 CPUs), checked for
    errors at the end."""
    with RayBridge(kubeconfig, namespace, cluster, head={"num_cpus": 0}, log_dir=log_dir) as up:
        yield up
        problems = up.errors()
    assert not problems, f"the Ray bridge failed: {problems}"


async def in_ray(
    kube: Kube, bridge: RayBridge, cluster: str, count: int, *, exclude: Sequence[str] = ()
) -> list[Any]:
    """The cluster's live worker pods (less `exclude`) once exactly `count` are Running, each with
    a live Ray node in Ray's GCS (started by the bridge, registered with the head); else [] (for
    `eventually`)."""
    pods = [p for p in await kube.workers(cluster, live=True) if p.metadata.name not in exclude]
    running = bridge.workers()
    ok = len(pods) == count and all(p.status.phase == "Running" and p.metadata.name in running for p in pods)
    if not ok:
        return []
    async with GcsClient(bridge.gcs_address, timeout=10) as gcs:
        state = await gcs.get_cluster_resource_state()
    nodes = [state.node_by_instance(p.metadata.name) for p in pods]
    return pods if all(n is not None and n.alive for n in nodes) else []


async def cluster_events(kube: Kube, cluster: str, reason: str) -> list[Any]:
    """The Events of `reason` about the RayCluster `cluster`."""
    return [e for e in await kube.events(reason) if e.involved_object.name == cluster]


@dataclass
class Tasks:
    ray: RayDriver
    directory: Path
    started_on: dict[str, str] = field(default_factory=dict)  # task -> the Ray node it first ran on

    def marker(self, name: str) -> Path:
        return self.directory / f"task-{name}"

    async def start(self, name: str, *, timeout: float, **options: Any) -> str:  # noqa: ASYNC109
        """Submit task `name` (Ray's task `options`); its Ray node id once it runs."""
        await self.ray.call("task", name=name, marker=str(self.marker(name)), **options)
        started = Path(f"{self.marker(name)}.started")
        await eventually(started.exists, timeout=timeout, message=f"task {name} started")
        self.started_on[name] = (await asyncio.to_thread(started.read_text)).strip()
        return self.started_on[name]

    def release(self, *names: str) -> None:
        """Let these tasks end (all when none is named)."""
        for name in names or tuple(self.started_on):
            self.marker(name).touch()

    async def outcome(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = await self.ray.call("task_outcome", name=name)
        return found

    async def running(self, name: str) -> bool:
        return bool((await self.outcome(name))["state"] == "running")

    async def done(self, name: str) -> bool:
        return bool((await self.outcome(name))["state"] == "done")

    async def ended(self) -> dict[str, dict[str, Any]]:
        """Every task's outcome once none is running, else {} (for `eventually`)."""
        found = {name: await self.outcome(name) for name in self.started_on}
        return found if all(o["state"] != "running" for o in found.values()) else {}

    def tally(self, outcomes: dict[str, dict[str, Any]]) -> dict[str, int]:
        """How many tasks ended where they started, ran again elsewhere, or failed (lost)."""
        failed = sum(1 for o in outcomes.values() if o["state"] == "failed")
        again = sum(
            1 for n, o in outcomes.items() if o["state"] == "done" and o.get("value") != self.started_on[n]
        )
        return {
            "tasks": len(outcomes),
            "kept": len(outcomes) - failed - again,
            "run_again": again,
            "failed": failed,
        }
