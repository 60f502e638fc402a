"""What rayscale reports to a real Ray 2.60 head (ReportAutoscalingState), as Ray's own tools show it.

One head for the module, with autoscaler v2 and ``RAY_enable_infeasible_task_early_exit`` on, and
no worker: every round here is what the autoscaler loop does (GCS state -> snapshot -> decision ->
report), on a RayCluster body and pods given by the test (no Kubernetes). ``ray status`` runs as
a subprocess without ``RAY_enable_autoscaler_v2`` in its environment, so it takes the v2 view
because the GCS says it runs v2, as on a cluster's head pod. Nothing sleeps to synchronise: every
wait polls with a deadline.

``ray`` must not be imported here (its protobuf messages collide with rayscale's bindings).
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from e2e.raybridge import rayproc

from rayscale.api.names import RAYCLUSTER
from rayscale.autoscaler.ray_report import LaunchFailure, autoscaling_state, next_version
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.snapshot import build_snapshot
from rayscale.common import labels as L
from rayscale.common.types import Manifest
from rayscale.ray.client import GcsClient
from rayscale.ray.model import AutoscalingState, ClusterState, ResourceRequest
from tests.support.polling import eventually
from tests.support.raydriver import RAY_WAIT, driver

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None,
        reason="needs Ray: pip install 'ray==2.60.0' (the dev extra should carry it)",
    ),
    pytest.mark.timeout(900),
]

HEAD_ENV = {
    "RAY_enable_infeasible_task_early_exit": "true",
    "RAY_raylet_start_wait_time_s": "120",  # a busy machine can take longer than the default 30 s
}


# ---- a RayCluster body and pods, as the autoscaler reads them ----


def _group(name: str, replicas: int, **limits: str) -> Manifest:
    container = {"name": "ray-worker", "resources": {"limits": {"cpu": "4", "memory": "8Gi", **limits}}}
    return {
        "groupName": name,
        "replicas": replicas,
        "minReplicas": 0,
        "maxReplicas": 4,
        "rayStartParams": {},
        "template": {"spec": {"containers": [container]}},
    }


def _cluster(*groups: Manifest) -> Manifest:
    head = {"name": "ray-head", "resources": {"limits": {"cpu": "1", "memory": "2Gi"}}}
    return {
        **RAYCLUSTER.type_meta(),
        "metadata": {"name": "rc", "namespace": "ns"},
        "spec": {
            "enableInTreeAutoscaling": True,
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}},
            "workerGroupSpecs": list(groups),
        },
    }


def _unschedulable_pod(name: str, group: str) -> Manifest:
    created = (datetime.now(UTC) - timedelta(seconds=40)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "creationTimestamp": created,
            "labels": {L.RAY_CLUSTER: "rc", L.GROUP: group, L.NODE_TYPE: L.WORKER},
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


@dataclass
class Reporter:
    """One autoscaler's rounds against a GCS: what the loop does, minus Kubernetes."""

    gcs: GcsClient
    version: int | None = None
    reports: list[AutoscalingState] = field(default_factory=list)

    async def round(
        self, cluster: Manifest, pods: Sequence[Manifest] = (), failures: Sequence[LaunchFailure] = ()
    ) -> AutoscalingState:
        state = await self.gcs.get_cluster_resource_state()
        now = datetime.now(UTC)
        snapshot = build_snapshot(cluster, pods, state, [], frozenset(), now)
        decision = schedule(snapshot)
        self.version = next_version(self.version, state, now)
        report = autoscaling_state(snapshot, decision, state, failures, now, version=self.version, pods=pods)
        await self.gcs.report_autoscaling_state(report)
        self.reports.append(report)
        return report


# ---- Ray ----


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rayproc.RayNode]:
    logs = tmp_path_factory.mktemp("ray-logs")
    with rayproc.running_head(num_cpus=1, env=HEAD_ENV, log_dir=logs, timeout=RAY_WAIT) as head:
        yield head


@pytest.fixture(scope="module")
async def gcs(ray_head: rayproc.RayNode) -> AsyncIterator[GcsClient]:
    async with GcsClient(ray_head.address, timeout=10) as client:

        async def head_alive() -> bool:
            if not ray_head.running():  # not an AssertionError: `eventually` would keep waiting
                raise rayproc.RayProcessError(f"the Ray head exited:\n{ray_head.log_tail()}")
            state = await client.get_cluster_resource_state()
            return any(n.alive and "node:__internal_head__" in n.total_resources for n in state.nodes)

        await eventually(
            head_alive, timeout=RAY_WAIT * 2, interval=0.5, message="the head's raylet registered"
        )
        yield client


async def ray_status(head: rayproc.RayNode) -> str:
    """``ray status -v`` as a user on the head would run it (v2 read from the GCS, not the env)."""
    env = rayproc.driver_env()
    env.pop("RAY_enable_autoscaler_v2", None)
    process = await asyncio.create_subprocess_exec(
        rayproc.ray_cli(),
        "status",
        "-v",
        f"--address={head.address}",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), RAY_WAIT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError("`ray status` did not finish") from None
    text = out.decode(errors="replace")
    assert process.returncode == 0, f"`ray status` failed ({process.returncode}):\n{text}"
    return text


def section(status: str, title: str) -> str:
    """The lines of `status` under `title` up to the next unindented line."""
    lines = status.splitlines()
    start = lines.index(title) + 1
    out = []
    for line in lines[start:]:
        if not line.startswith(" "):
            break
        out.append(line)
    return "\n".join(out)


async def _status_where(head: rayproc.RayNode, check: Any, message: str) -> str:
    async def probe() -> str | None:
        text = await ray_status(head)
        return text if check(text) else None

    result = await eventually(probe, timeout=RAY_WAIT, interval=1.0, message=message)
    assert result is not None
    return result


# ---- tests ----


async def test_ray_status_shows_pending_launches_pods_and_failures(
    gcs: GcsClient, ray_head: rayproc.RayNode
) -> None:
    pod = "rc-gpu-group-worker-x7k2p"
    cluster = _cluster(_group("gpu-group", replicas=2, **{"nvidia.com/gpu": "1"}))
    now = datetime.now(UTC)
    failure = LaunchFailure(
        "gpu-group", 1, "pod not scheduled within 900s", now - timedelta(seconds=950), now
    )
    reporter = Reporter(gcs)
    report = await reporter.round(cluster, [_unschedulable_pod(pod, "gpu-group")], [failure])
    assert [r.ray_node_type_name for r in report.pending_instance_requests] == ["gpu-group"]

    def shown(text: str) -> bool:
        return "gpu-group, 1 launching" in section(text, "Pending:")

    status = await _status_where(ray_head, shown, "ray status lists the launch under Pending")
    pending = section(status, "Pending:")
    assert f" {pod}: gpu-group, pod pending: unschedulable" in pending.splitlines(), status
    failures = section(status, "Recent failures:")
    assert re.search(
        r"^ gpu-group: LaunchFailed \(latest_attempt: \d\d:\d\d:\d\d\) - pod not scheduled", failures, re.M
    ), status

    # An older report is dropped: the GCS keeps the newest version.
    stale = AutoscalingState(
        last_seen_cluster_resource_state_version=0, autoscaler_state_version=(reporter.version or 0) - 1
    )
    await gcs.report_autoscaling_state(stale)
    assert "gpu-group, 1 launching" in section(await ray_status(ray_head), "Pending:")

    # A restarted rayscale remembers nothing, and is heard all the same.
    restarted = Reporter(gcs)
    await restarted.round(_cluster(_group("gpu-group", replicas=0, **{"nvidia.com/gpu": "1"})))
    assert restarted.version is not None
    assert reporter.version is not None
    assert restarted.version > reporter.version
    status = await _status_where(
        ray_head,
        lambda t: section(t, "Pending:").strip() == "(no pending nodes)",
        "the restarted report shown",
    )
    assert section(status, "Recent failures:").strip() == "(no failures)"


GPU_TASK = """
@ray.remote(num_gpus=1)
def needs_gpu():
    return 1
"""
GPU_OUTCOME = """
try:
    ray.get(needs_gpu.remote())
    print("ran", flush=True)
except Exception as exc:
    print(f"failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}", flush=True)
"""


async def test_an_infeasible_task_fails_fast_once_reported(
    gcs: GcsClient, ray_head: rayproc.RayNode, tmp_path: Path
) -> None:
    cluster = _cluster(_group("cpu-group", replicas=0))  # no group has a GPU
    wanted = ResourceRequest({"CPU": 1.0, "GPU": 1.0})
    async with driver(ray_head, GPU_TASK, tmp_path=tmp_path, tail=GPU_OUTCOME) as gpu:

        async def queued() -> ClusterState | None:
            state = await gcs.get_cluster_resource_state()
            return state if any(d.request == wanted for d in state.pending_requests) else None

        found = await eventually(queued, timeout=RAY_WAIT, message="the GPU task pending in the GCS")
        assert found is not None
        assert gpu.process.returncode is None  # nothing failed it yet: it waits for rayscale
        report = await Reporter(gcs).round(cluster)
        assert [r.resources for r in report.infeasible_resource_requests] == [wanted.resources]
        outcome = await gpu.line(RAY_WAIT)
    assert outcome.startswith("failed: TaskUnschedulableError: "), outcome
