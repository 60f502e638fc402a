"""A Ray worker drained by someone else while it runs a task (a preemption notice: Ray's
``DrainNode`` with reason PREEMPTION, which a busy node cannot refuse), read from a real Ray 2.60
GCS into rayscale's snapshot: the autoscaler keeps it (held: no new work) while the task runs,
and removes it once the task has ended. Ray 2.60 does not always show such a drain: sometimes it
goes on reporting the node RUNNING (a busy running node: kept too, idle afterwards), sometimes it
stops the node at once (DEAD: removed and replaced). Each of the three is checked.

The RayCluster and its pod are built in memory (no Kubernetes here): what matters is what Ray
reports for such a node and what rayscale makes of it. Nothing sleeps: every wait polls the GCS.
"""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from pathlib import Path

import pytest
from e2e.raybridge import rayproc

from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import NodeState, RemovalCause, Snapshot, drained_while_working
from rayscale.autoscaler.snapshot import build_snapshot
from rayscale.ray.client import GcsClient
from rayscale.ray.model import ClusterState, DrainReason, NodeStatus
from tests.integration.test_ray_gcs import BUSY as GCS_BUSY
from tests.integration.test_ray_gcs import _alive_node, gcs, ray_head  # noqa: F401
from tests.support.builders import cluster, group, pod
from tests.support.polling import Timeout, eventually
from tests.support.raydriver import RAY_WAIT, driver

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray 2.60 (the dev extra)"),
    pytest.mark.timeout(900),
]

WORKER = "raycluster-p-worker-z3"
SLOW = 3 * RAY_WAIT
REPORTED = 60.0  # Ray reports an accepted drain within a second or two, when it does
BUSY = GCS_BUSY.replace("pin_a", "pin_p")  # the same pinned task, on this test's worker


def _snapshot(state: ClusterState) -> Snapshot:
    body = cluster(group(replicas=1), autoscaling=True)
    return build_snapshot(body, [pod(WORKER)], state, [], frozenset(), datetime.now(UTC))


def _removal(snap: Snapshot) -> RemovalCause | None:
    return {r.name: r.reason for r in schedule(snap).terminate}.get(WORKER)


async def test_a_busy_worker_drained_for_preemption_stays_until_its_task_ends(
    gcs: GcsClient,  # noqa: F811
    ray_head: rayproc.RayNode,  # noqa: F811
    tmp_path: Path,
) -> None:
    pin = {"pin_p": 1.0}
    worker = rayproc.start_worker(ray_head.address, instance_id=WORKER, resources=pin, log_dir=tmp_path)
    try:
        await _alive_node(gcs, WORKER, worker)
        marker = tmp_path / "release"
        tail = "print(ray.get(ref, timeout=600), flush=True)"
        async with driver(ray_head, BUSY, str(marker), tmp_path=tmp_path, tail=tail) as d:

            async def running() -> str | None:
                node = (await gcs.get_cluster_resource_state()).node_by_instance(WORKER)
                return node.node_id if node is not None and node.status is NodeStatus.RUNNING else None

            node_id = await eventually(running, timeout=RAY_WAIT, message=f"{WORKER} RUNNING the pinned task")

            async def answered() -> ClusterState | None:
                # A preemption notice cannot be refused: asked again until the GCS shows it.
                result = await gcs.drain_node(node_id, DrainReason.PREEMPTION, "rayscale test")
                assert result.accepted, result.rejection_reason
                state = await gcs.get_cluster_resource_state()
                node = state.node_by_instance(WORKER)
                shown = (NodeStatus.DRAINING, NodeStatus.DEAD)
                return state if node is not None and node.status in shown else None

            try:
                state = await eventually(answered, timeout=REPORTED, message=f"{WORKER} DRAINING")
            except Timeout:
                # Ray 2.60 sometimes accepts the drain of a busy node and goes on reporting it
                # RUNNING: rayscale then sees a busy running node.
                state = await gcs.get_cluster_resource_state()
            snap = _snapshot(state)
            (node,) = snap.nodes
            if node.state is NodeState.DEAD:  # Ray stopped the node at once: it goes, replaced
                assert _removal(snap) is RemovalCause.NODE_DEAD
                return
            if node.state is NodeState.DRAINING:
                assert drained_while_working(node), node  # no idle time and the task's use
            else:
                assert node.state is NodeState.RUNNING
                assert node.idle_seconds == 0
            assert _removal(snap) is None  # it stays while the task runs
            assert schedule(snap).groups["small"].replicas == 1

            marker.touch()
            assert await d.line() == "finished"  # the task ran to its end on the drained node

        async def once_idle() -> bool:
            state = await gcs.get_cluster_resource_state()
            node = state.node_by_instance(WORKER)
            cause = _removal(_snapshot(state))
            if cause in (RemovalCause.DRAINED, RemovalCause.NODE_DEAD):
                return True  # it goes, as drained (or its Ray node is gone)
            # a drain Ray never showed: an idle node, kept (no idle timeout here)
            return node is not None and node.status is NodeStatus.IDLE and cause is None

        await eventually(once_idle, timeout=SLOW, message=f"{WORKER} removed, or idle and kept, once idle")
    finally:
        rayproc.stop(worker)
