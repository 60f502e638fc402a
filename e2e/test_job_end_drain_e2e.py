"""At a RayJob's end its workers go at once, drained, with a real Ray (the job bridge): an
autoscaled RayCluster with a worker kept by its group's minReplicas, ``shutdownAfterJobFinishes``
with a 10-minute TTL and a 10-minute idle timeout, so nothing but the job's end removes the
worker. Once the job succeeds, the worker pod goes while the head stays, Ray records the worker
node's death as rayscale's drain (``AUTOSCALER_DRAIN_IDLE`` with rayscale's message, through the
dashboard's state API), and ``status.autoscaler`` says why."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import pytest
from e2e.raybridge.jobscenario import COUNTER, COUNTER_ENV, SHORT, Jobs, rayjob, rayjob_cluster_spec

pytestmark = pytest.mark.timeout(600)
TTL = 600


async def live_pods(jobs: Jobs, cluster: str, node_type: str) -> list[str]:
    pods = await jobs.core.list_namespaced_pod(
        jobs.ns, label_selector=f"ray.io/cluster={cluster},ray.io/node-type={node_type}"
    )
    return sorted(p.metadata.name for p in pods.items if p.metadata.deletion_timestamp is None)


async def ray_nodes(dashboard: str) -> list[dict[str, Any]]:
    """Ray's nodes, the dead ones with their death reason (``ray list nodes --detail``)."""
    url = dashboard.rstrip("/") + "/api/v0/nodes?limit=100&detail=1"
    async with aiohttp.ClientSession() as session, session.get(url) as reply:
        body = await reply.json()
    found: list[dict[str, Any]] = body["data"]["result"]["result"]
    return found


async def test_workers_are_drained_and_removed_when_the_job_ends(jobs: Jobs) -> None:
    spec = rayjob_cluster_spec(workers=1)
    spec["enableInTreeAutoscaling"] = True
    spec["autoscalerOptions"] = {"idleTimeoutSeconds": TTL}  # idleness never removes it here
    body = rayjob(
        "drained",
        entrypoint=COUNTER,
        runtimeEnvYAML=COUNTER_ENV,
        shutdownAfterJobFinishes=True,
        ttlSecondsAfterFinished=TTL,
        rayClusterSpec=spec,
    )
    await jobs.create(body)
    running = await jobs.deployment("drained", "Running")
    cluster = str(running["rayClusterName"])
    (worker,) = await jobs.eventually(lambda: live_pods(jobs, cluster, "worker"), "the worker pod")

    status = await jobs.deployment("drained", "Complete")
    assert status["jobStatus"] == "SUCCEEDED"

    async def gone() -> bool:
        return await live_pods(jobs, cluster, "worker") == []

    complete = time.monotonic()
    await jobs.eventually(gone, "the worker removed at the job's end", timeout=SHORT)
    jobs.step("drained: the worker removed, from Complete seen", time.monotonic() - complete)
    assert await live_pods(jobs, cluster, "head") != []  # the head waits for the TTL
    rc = await jobs.cluster(cluster)
    assert rc is not None
    assert {g["groupName"]: g.get("replicas") for g in rc["spec"]["workerGroupSpecs"]} == {"small-group": 0}

    dashboard = jobs.bridge.dashboard(cluster)
    assert dashboard is not None

    async def drained() -> dict[str, Any] | None:
        for node in await ray_nodes(dashboard):
            if f"removing pod {worker}" in str(node.get("state_message") or ""):
                return node
        return None

    node = await jobs.eventually(drained, "Ray's record of the worker node's drain")
    assert node["state"] == "DEAD"
    assert str(node["state_message"]).startswith("Terminated due to idle (no Ray activity)")

    async def condition() -> dict[str, Any] | None:
        found = await jobs.cluster(cluster) or {}
        conditions = ((found.get("status") or {}).get("autoscaler") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "JobFinished"), None)

    reason = await jobs.eventually(condition, "status.autoscaler's JobFinished condition")
    assert reason["message"] == f"RayJob {jobs.ns}/drained finished (SUCCEEDED): workers drained and removed"
