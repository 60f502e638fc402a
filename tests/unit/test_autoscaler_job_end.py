"""A RayJob's cluster marked rayscale.io/job-finished: both halves count every group's minReplicas
as 0; the autoscaler removes every worker, drains the ones that run Ray (as it drains idle ones),
launches nothing, and says why in status.autoscaler's JobFinished condition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.builders import cluster, group

from rayscale.autoscaler.drain import DrainUnit, drain_plan
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import Demand, Node, NodeState, RemovalCause, Snapshot
from rayscale.autoscaler.spec_reader import read_spec
from rayscale.autoscaler.status import finished_condition
from rayscale.cluster.job_end import JOB_FINISHED_ANNOTATION
from rayscale.cluster.replicas import expected_replicas
from rayscale.cluster.validation import Invalid
from rayscale.controller.snapshot import ClusterSnapshot
from rayscale.ray import model as ray

WHY = "RayJob ns/job finished (SUCCEEDED)"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _manifest(finished: bool) -> dict[str, Any]:
    body = cluster(
        group("gpu", replicas=2, min_replicas=0, max_replicas=4),
        group("cpu", replicas=2, min_replicas=1, max_replicas=4),
        autoscaling=True,
    )
    if finished:
        body["metadata"]["annotations"] = {JOB_FINISHED_ANNOTATION: WHY}
    return body


def _snapshot(finished: bool) -> Snapshot:
    scaling = read_spec(_manifest(finished))
    nodes = (
        Node("gpu-0", "gpu", NodeState.RUNNING, idle_seconds=1.0),  # idle, far from the idle timeout
        Node("gpu-1", "gpu", NodeState.PENDING),  # no Ray yet: goes without a drain
        Node("cpu-0", "cpu", NodeState.RUNNING, idle_seconds=1.0),
        Node("cpu-1", "cpu", NodeState.RUNNING, idle_seconds=2.0),
    )
    demand = (Demand({"CPU": 1.0}, count=1),)  # what is left of Ray's demand launches nothing
    return Snapshot(groups=scaling.groups, nodes=nodes, demands=demand, options=scaling.options)


def _state() -> ray.ClusterState:
    names = ("gpu-0", "cpu-0", "cpu-1")
    nodes = tuple(ray.RayNodeState(f"id-{n}", ray.NodeStatus.IDLE, instance_id=n) for n in names)
    return ray.ClusterState(version=1, session_name="s", nodes=nodes)


def test_the_mark_is_read_and_caps_every_group_at_zero() -> None:
    plain, marked = read_spec(_manifest(False)), read_spec(_manifest(True))
    assert plain.finished is None
    assert [(g.min_replicas, g.max_replicas) for g in plain.groups] == [(0, 4), (1, 4)]
    assert marked.finished == WHY
    assert [(g.min_replicas, g.max_replicas) for g in marked.groups] == [(0, 0), (0, 0)]
    # the typed spec too, so the replicas the controller keeps are counted as it counts them
    assert [g.min_replicas for g in marked.spec.workers] == [0, 0]
    assert [g.min_replicas for g in plain.spec.workers] == [0, 1]
    blank = _manifest(False)
    blank["metadata"]["annotations"] = {JOB_FINISHED_ANNOTATION: " "}
    assert read_spec(blank).finished == "its RayJob finished"


def test_every_worker_goes_at_once_drained_and_nothing_launches() -> None:
    snap = _snapshot(finished=True)
    decision = schedule(snap)
    assert {g: (d.replicas, d.launch) for g, d in decision.groups.items()} == {"gpu": (0, 0), "cpu": (0, 0)}
    gone = {r.name: r.reason for r in decision.terminate}
    assert gone == {
        "gpu-0": RemovalCause.MAX_REPLICAS,
        "gpu-1": RemovalCause.MAX_REPLICAS,
        "cpu-0": RemovalCause.MAX_REPLICAS,  # below the group's minReplicas: the job is over
        "cpu-1": RemovalCause.MAX_REPLICAS,
    }
    units = drain_plan(decision, snap, _state(), finished=True)  # gpu-1 runs no Ray: not asked
    assert sorted(units, key=lambda u: u.unit) == [
        DrainUnit("cpu-0", (("cpu-0", "id-cpu-0"),)),
        DrainUnit("cpu-1", (("cpu-1", "id-cpu-1"),)),
        DrainUnit("gpu-0", (("gpu-0", "id-gpu-0"),)),
    ]
    # a cap the user set is not a job's end: its removals are not drained
    assert drain_plan(decision, snap, _state()) == ()


def test_without_the_mark_idle_workers_wait_for_the_idle_timeout() -> None:
    decision = schedule(_snapshot(finished=False))
    assert decision.terminate == ()


def test_the_condition_says_why_and_keeps_its_time() -> None:
    first = finished_condition(WHY, NOW, None)
    assert first == {
        "type": "JobFinished",
        "status": "True",
        "reason": "RayJobFinished",
        "message": f"{WHY}: workers drained and removed",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    later = finished_condition(WHY, NOW + timedelta(minutes=5), {"conditions": [first]})
    assert later["lastTransitionTime"] == "2026-01-01T00:00:00Z"


def test_the_controller_counts_a_finished_clusters_minimum_as_zero() -> None:
    """After the autoscaler wrote replicas 0, the controller keeps no worker of a group whose
    minReplicas is 1 (and one without the mark)."""
    specs = []
    for finished in (False, True):
        body = _manifest(finished)
        for g in body["spec"]["workerGroupSpecs"]:
            g["replicas"] = 0
        spec = ClusterSnapshot(body, pods=(), services=()).spec()
        assert not isinstance(spec, Invalid)
        specs.append([expected_replicas(g) for g in spec.workers])
    assert specs == [[0, 1], [0, 0]]
