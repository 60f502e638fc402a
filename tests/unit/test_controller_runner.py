"""RayClusterController.reconcile (rayscale.controller.runner), the wiring of one reconcile with
rayscale.kube.ops faked and no API server: a valid RayCluster's plan applied and its status written;
an invalid spec gets SpecValid=False and a Warning Event and nothing else; a failed API call makes the
reconcile Failed (with the server's Retry-After); a deleted RayCluster's expectations are forgotten."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import cluster, group, pod
from tests.support.fakes import KEY, EventLog, FakeClusterSource, FakeKubeOps

from rayscale.common.retry import Failed
from rayscale.controller import runner
from rayscale.controller.runner import ControllerConfig, RayClusterController
from rayscale.kube import ops

SMALL = (*KEY, "small")  # the expectations' key of group "small"


def controller(source: FakeClusterSource, events: EventLog) -> RayClusterController:
    return RayClusterController(None, source, events, ControllerConfig())  # type: ignore[arg-type]


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    (found,) = [c for c in status["conditions"] if c["type"] == kind]
    return dict(found)


async def test_a_new_clusters_plan_is_applied_and_its_status_written(
    kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    source = FakeClusterSource(cluster(group("small", replicas=2)))
    scaler = controller(source, event_log)
    assert await scaler.reconcile(KEY) is None
    assert kube_ops.calls == [
        ("create_service", "rc-head-svc"),
        ("create_pod", "rc-head-"),
        ("create_pod", "rc-small-worker-"),
        ("create_pod", "rc-small-worker-"),
        ("patch_raycluster_status", "rc"),
    ]
    # one Event names both workers
    assert event_log.reasons() == ["CreatedService", "CreatedHeadPod", "CreatedWorkerPod"]
    (status,) = kube_ops.statuses
    assert (status["desiredWorkerReplicas"], status["observedGeneration"]) == (2, 1)
    assert condition(status, "HeadPodReady")["reason"] == "HeadPodNotFound"
    assert scaler.expectations.pending(SMALL) == 2
    assert scaler.expectations.pending((*KEY, "")) == 1  # the head

    # Again before the watch shows the new pods and Service: the expectations hold the pods back (the
    # Service is asked for again, and is there), and the status the watch shows is not written again.
    source.bodies[KEY]["status"] = status
    kube_ops.existing.add("rc-head-svc")
    assert await scaler.reconcile(KEY) is not None  # requeued: expectations wait
    assert kube_ops.calls[5:] == [("create_service", "rc-head-svc")]


async def test_an_invalid_spec_gets_spec_valid_false_and_a_warning_event_and_nothing_else(
    kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    source = FakeClusterSource(cluster(group("small", replicas=2, min_replicas=5, max_replicas=3)))
    assert await controller(source, event_log).reconcile(KEY) is None
    message = "spec.workerGroupSpecs[0].minReplicas: must be <= maxReplicas (5 > 3)"
    assert kube_ops.calls == [("patch_raycluster_status", "rc")]  # no Service, no pod
    (status,) = kube_ops.statuses
    spec_valid = condition(status, "SpecValid")
    assert (spec_valid["status"], spec_valid["reason"], spec_valid["message"]) == (
        "False",
        "InvalidRayClusterSpec",
        message,
    )
    assert [(e.kind, e.name, e.type, e.reason, e.message) for e in event_log.events] == [
        ("RayCluster", "rc", "Warning", "InvalidRayClusterSpec", message)
    ]


async def test_a_failed_status_write_fails_the_reconcile_with_its_retry_after(
    kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    refused = ops.KubeError("patch raycluster status rc: too many requests", 429, retry_after=3.0)
    kube_ops.refuse[("patch_raycluster_status", "rc")] = refused
    source = FakeClusterSource(cluster(group("small", replicas=1)))
    assert await controller(source, event_log).reconcile(KEY) == Failed(str(refused), 3.0)
    assert len(kube_ops.names("create_pod")) == 2  # the pods were created before the write failed


async def test_a_refused_create_is_in_the_status_and_fails_the_reconcile(
    kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    quota = ops.KubeError('pods "rc-small-worker-*" is forbidden: exceeded quota', 403, retry_after=None)
    kube_ops.refuse[("create_pod", "rc-small-worker-")] = quota
    source = FakeClusterSource(cluster(group("small", replicas=1)))
    scaler = controller(source, event_log)
    assert await scaler.reconcile(KEY) == Failed(str(quota), None)
    (status,) = kube_ops.statuses
    failure = condition(status, "ReplicaFailure")
    assert (failure["status"], failure["reason"], failure["message"]) == (
        "True",
        "FailedCreateWorkerPod",
        str(quota),
    )
    assert "FailedToCreateWorkerPod" in event_log.reasons("Warning")
    assert scaler.expectations.pending(SMALL) == 0  # nothing to wait for


async def test_a_deleted_cluster_forgets_its_expectations(kube_ops: FakeKubeOps, event_log: EventLog) -> None:
    source = FakeClusterSource(cluster(group("small", replicas=2)))
    scaler = controller(source, event_log)
    await scaler.reconcile(KEY)
    assert scaler.expectations.pending(SMALL) == 2
    del source.bodies[KEY]  # the watch saw it go
    calls = len(kube_ops.calls)
    assert await scaler.reconcile(KEY) is None
    assert scaler.expectations.pending(SMALL) == 0
    assert scaler.expectations.pending((*KEY, "")) == 0
    assert len(kube_ops.calls) == calls  # nothing written for a cluster that is gone


async def test_a_deletion_seen_mid_reconcile_stops_its_creates(
    kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    body = cluster(group("small", replicas=50))
    source = FakeClusterSource(body)
    create = ops.create_pod
    deleting = {**body, "metadata": {**body["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}

    async def create_then_deleted(api: Any, namespace: str, manifest: dict[str, Any]) -> str:
        name = await create(api, namespace, manifest)
        source.bodies[KEY] = deleting  # the watch shows the deletion after the first create
        return name

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ops, "create_pod", create_then_deleted)
        await controller(source, event_log).reconcile(KEY)
    # the head; then no worker: each create asks the source first
    assert kube_ops.names("create_pod") == ["rc-head-"]


async def test_a_large_clusters_reconciles_are_spaced_by_its_size(
    kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    """0.1 s apart at least; 0.25 ms more for each pod the cluster had at its last reconcile."""
    source = FakeClusterSource(cluster(group("small", replicas=2)))
    scaler = controller(source, event_log)
    assert scaler._spacing(KEY) == pytest.approx(0.1)  # never reconciled
    await scaler.reconcile(KEY)
    assert scaler._spacing(KEY) == pytest.approx(0.1)  # no pods yet
    source._pods = [{"metadata": {"name": f"p-{i}", "labels": {}}} for i in range(2000)]
    await scaler.reconcile(KEY)
    assert scaler._spacing(KEY) == pytest.approx(0.5)
    del source.bodies[KEY]  # deleted: its size is forgotten
    await scaler.reconcile(KEY)
    assert scaler._spacing(KEY) == pytest.approx(0.1)


async def test_worker_counts_alone_are_written_at_most_once_a_second_and_nothing_twice(
    kube_ops: FakeKubeOps, event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = cluster(group("small", replicas=3))
    body["metadata"]["resourceVersion"] = "1"
    source = FakeClusterSource(
        body, pods=[pod("h", "headgroup"), pod("a"), pod("b", ready=False), pod("c", ready=False)]
    )
    scaler = controller(source, event_log)

    def watch_delivers(version: str) -> None:
        source.bodies[KEY]["status"] = kube_ops.statuses[-1]
        source.bodies[KEY]["metadata"]["resourceVersion"] = version

    assert await scaler.reconcile(KEY) is None
    assert [s["readyWorkerReplicas"] for s in kube_ops.statuses] == [1]
    assert await scaler.reconcile(KEY) is None  # the watch has not shown the write yet: not again
    assert len(kube_ops.statuses) == 1
    watch_delivers("2")

    source._pods[2] = pod("b")  # one more worker ready, right after the last write: it waits
    deferred = await scaler.reconcile(KEY)
    assert isinstance(deferred, float)
    assert 0 < deferred <= 1.0
    assert len(kube_ops.statuses) == 1

    monkeypatch.setattr(runner, "PROGRESS_SPACING", 0.0)  # the second is over
    assert await scaler.reconcile(KEY) is None
    assert [s["readyWorkerReplicas"] for s in kube_ops.statuses] == [1, 2]
    watch_delivers("3")

    monkeypatch.setattr(runner, "PROGRESS_SPACING", 60.0)
    source._pods[3] = pod("c")  # all ready: the state changes, written at once
    assert await scaler.reconcile(KEY) is None
    assert [(s["readyWorkerReplicas"], s.get("state")) for s in kube_ops.statuses[1:]] == [
        (2, None),
        (3, "ready"),
    ]
