"""What rayscale's controller writes over a RayCluster's lifetime, as KubeRay v1.6.2 writes it: the
worker counts follow the pods even while the watch lags behind the controller's own status write; a
suspended worker group's deletions are KubeRay's DeletedWorkerPod; zero and empty status fields are
left out (KubeRay's `omitempty`); a surplus pod goes in the API server's list order (by name)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support.builders import cluster, group, pod
from tests.support.fakes import KEY, EventLog, FakeClusterSource, FakeKubeOps, ManualClock

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.controller import runner
from rayscale.controller.apply import PlanApplier
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.plan import DeletePod, DeleteWhy, NodeKind, Step
from rayscale.controller.runner import ControllerConfig, RayClusterController
from rayscale.controller.status import compute_status, status_patch
from rayscale.controller.workers import plan_group

NOW = datetime(2026, 1, 1, tzinfo=UTC)


async def test_a_replaced_worker_is_counted_ready_while_the_watch_still_shows_the_older_status(
    kube_ops: FakeKubeOps, event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "PROGRESS_SPACING", 0.0)
    body = cluster(group("small", replicas=2))
    body["metadata"]["resourceVersion"] = "1"
    source = FakeClusterSource(body, pods=[pod("h", "headgroup"), pod("a"), pod("b")])
    scaler = RayClusterController(None, source, event_log, ControllerConfig())  # type: ignore[arg-type]
    assert await scaler.reconcile(KEY) is None
    assert kube_ops.statuses[-1]["readyWorkerReplicas"] == 2
    source.bodies[KEY]["status"] = kube_ops.statuses[-1]  # the watch shows that write ...
    source.bodies[KEY]["metadata"]["resourceVersion"] = "2"

    source._pods[2] = pod("c", ready=False)  # b replaced by c, not ready yet
    await scaler.reconcile(KEY)
    assert kube_ops.statuses[-1]["readyWorkerReplicas"] == 1
    # ... but not this one yet (the RayCluster's resourceVersion is still 2) when c becomes ready
    source._pods[2] = pod("c")
    await scaler.reconcile(KEY)
    assert [s.get("readyWorkerReplicas") for s in kube_ops.statuses] == [2, 1, 2]
    await scaler.reconcile(KEY)  # nothing new: not written twice
    assert len(kube_ops.statuses) == 3


async def test_a_suspended_groups_deletions_are_kuberays_deleted_worker_pod(
    kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    meta = ClusterMeta.from_body(cluster())
    plan = plan_group(meta, _spec(group(suspend=True)), group_spec(suspend=True), [pod("a")])
    assert [(d.name, d.why) for d in plan.deletes] == [("a", "suspendGroup")]
    expectations = ScaleExpectations(clock=ManualClock())
    applier = PlanApplier(None, expectations, event_log)  # type: ignore[arg-type]  # ops is faked
    assert await applier.run_steps(meta, [Step("small", deletes=plan.deletes)]) is None
    assert event_log.reasons() == ["DeletedWorkerPod"]
    assert expectations.pending(("ns", "rc", "small")) == 0  # KubeRay expects nothing here either
    # A whole cluster's suspension stays KubeRay's DeletedPod.
    await applier.run_steps(
        meta, [Step("*", deletes=[DeletePod("b", "small", NodeKind.WORKER, DeleteWhy.SUSPEND)])]
    )
    assert event_log.reasons()[-1] == "DeletedPod"


def test_zero_and_empty_status_fields_are_left_out() -> None:
    body = cluster(group(replicas=0))
    head = pod("h", "headgroup", phase="Pending", ready=False)
    head["status"].pop("podIP", None)
    status = compute_status(
        ClusterMeta.from_body(body),
        _spec(group(replicas=0)),
        {},
        [head],
        [],
        now=NOW,
    )
    for key in ("readyWorkerReplicas", "availableWorkerReplicas", "desiredWorkerReplicas", "reason"):
        assert key not in status, key
    assert status["desiredGPU"] == "0"  # a Quantity: always written
    assert status["head"] == {"podName": "h"}  # no podIP yet
    assert "maxWorkerReplicas" in status
    # A count that drops to zero is removed from the stored status, as KubeRay's full update does.
    before = {**status, "readyWorkerReplicas": 2}
    assert status_patch(before, status, now=NOW)["status"]["readyWorkerReplicas"] is None


def test_scale_down_without_names_deletes_the_first_pods_by_name() -> None:
    pods = [pod("rc-small-worker-q2x9z"), pod("rc-small-worker-b7k4m"), pod("rc-small-worker-m5c2d")]
    plan = plan_group(
        ClusterMeta.from_body(cluster()), _spec(group(replicas=1)), group_spec(replicas=1), pods
    )
    assert sorted(d.name for d in plan.deletes) == ["rc-small-worker-b7k4m", "rc-small-worker-m5c2d"]


def _spec(*groups: dict[str, Any]) -> RayClusterSpec:
    return RayClusterSpec.model_validate(cluster(*groups)["spec"])


def group_spec(**kw: Any) -> Any:
    return _spec(group(**kw)).workers[0]


def test_the_heads_name_and_ip_go_from_the_status_with_the_head() -> None:
    """A merge patch keeps what it does not name: the head's gone keys are set to null."""
    before = {"head": {"podName": "h", "podIP": "10.0.0.1", "serviceName": "rc-head-svc"}}
    after = {"head": {"serviceName": "rc-head-svc"}}
    patch = status_patch(before, after, now=NOW)["status"]
    assert patch["head"] == {"podName": None, "podIP": None, "serviceName": "rc-head-svc"}
