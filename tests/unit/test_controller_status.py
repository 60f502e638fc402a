"""Status sums, state and conditions."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support.builders import cluster, container, group, pod

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.controller.status import (
    ReconcileError,
    compute_status,
    desired_resources,
    progress_only,
    replica_sums,
    status_changed,
    status_patch,
)
from rayscale.quantities import format_quantity

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _spec(*groups: dict[str, Any], **kw: Any) -> RayClusterSpec:
    return RayClusterSpec.model_validate(cluster(*groups, **kw)["spec"])


def test_what_follows_the_pods_coming_up_is_progress() -> None:
    """A cluster's statuses as its pods come up: no pods, the pods pending, the head Running and
    ready, every pod Running and ready. Between the first three only progress changes (the head's
    name and IP, HeadPodReady's reason while False); the head turning ready and the state turning
    ready are not progress."""
    body = cluster(group("small", replicas=2))
    meta, spec = ClusterMeta.from_body(body), RayClusterSpec.model_validate(body["spec"])
    running = pod("h", "headgroup", ready=False)
    running["status"]["podIP"] = "10.0.0.7"
    ready = pod("h", "headgroup")
    ready["status"]["podIP"] = "10.0.0.7"
    stages = [
        [],
        [pod("h", "headgroup", phase="Pending", ready=False), pod("a", phase="Pending", ready=False)],
        [running, pod("a", phase="Pending", ready=False)],
        [ready, pod("a", phase="Pending", ready=False)],
        [ready, pod("a"), pod("b")],
    ]
    statuses: list[dict[str, Any]] = []
    for pods in stages:
        statuses.append(compute_status(meta, spec, statuses[-1] if statuses else {}, pods, [], now=NOW))
    steps = list(itertools.pairwise(statuses))
    assert [status_changed(a, b) for a, b in steps] == [True, True, True, True]
    assert [progress_only(a, b) for a, b in steps] == [True, True, False, False]
    assert statuses[-1]["state"] == "ready"


def test_replica_sums() -> None:
    spec = _spec(
        group("a", replicas=3, min_replicas=1, max_replicas=5),
        group("tpu", replicas=9, min_replicas=0, max_replicas=2, hosts=4),
        group("off", replicas=3, min_replicas=1, max_replicas=5, suspend=True),
        group("nil", replicas=None, min_replicas=2, max_replicas=2147483647),
    )
    assert replica_sums(spec) == {
        "desiredWorkerReplicas": 3 + 2 * 4 + 2,
        "minWorkerReplicas": 1 + 0 + 2,
        "maxWorkerReplicas": 2147483647,
    }


def test_desired_resources_from_templates() -> None:
    gpu = group("gpu", replicas=2, hosts=1)
    gpu["template"]["spec"]["containers"] = [
        container("w", cpu="500m", memory="1Gi", **{"nvidia.com/gpu": "2"})
    ]
    tpu = group("tpu", replicas=1, hosts=4)
    tpu["template"]["spec"]["containers"] = [container("w", cpu="8", memory="8Gi", **{"google.com/tpu": "4"})]
    nil = group("nil", replicas=None, min_replicas=3)  # nil replicas count as 0 here
    spec = _spec(gpu, tpu, nil)
    assert desired_resources(spec) == {
        "desiredCPU": "35",  # 2 + 2*0.5 + 4*8
        "desiredMemory": "38Gi",  # 4 + 2*1 + 4*8
        "desiredGPU": "4",
        "desiredTPU": "16",
    }


@pytest.mark.parametrize(
    ("value", "binary", "text"),
    [("1.5", False, "1500m"), ("4000000000", False, "4G"), ("2", False, "2"), ("1610612736", True, "1536Mi"),
     ("0", True, "0"), ("0.25", False, "250m")],
)  # fmt: skip
def test_format_quantity(value: str, binary: bool, text: str) -> None:
    from decimal import Decimal

    assert format_quantity(Decimal(value), binary=binary) == text


def _status(body: dict[str, Any], pods: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    spec = RayClusterSpec.model_validate(body["spec"])
    return compute_status(
        ClusterMeta.from_body(body), spec, body.get("status") or {}, pods, [], now=NOW, **kw
    )


def _conds(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_ready_when_all_pods_running_and_ready() -> None:
    body = cluster(group(replicas=2))
    pods = [pod("h", "headgroup"), pod("a"), pod("b")]
    status = _status(body, pods)
    assert status["state"] == "ready"
    assert status["stateTransitionTimes"] == {"ready": "2026-01-01T00:00:00Z"}
    assert (status["readyWorkerReplicas"], status["availableWorkerReplicas"]) == (2, 2)
    assert _conds(status)["HeadPodReady"] == ("True", "HeadPodRunningAndReady")
    assert _conds(status)["RayClusterProvisioned"] == ("True", "AllPodRunningAndReadyFirstTime")
    assert status["head"]["podName"] == "h"
    assert status["observedGeneration"] == 1


def test_not_ready_with_missing_or_unready_pod_or_error() -> None:
    body = cluster(group(replicas=2))
    assert "state" not in _status(body, [pod("h", "headgroup"), pod("a")])
    status = _status(body, [pod("h", "headgroup"), pod("a"), pod("b", ready=False)])
    assert "state" not in status
    assert status["availableWorkerReplicas"] == 2
    assert status["readyWorkerReplicas"] == 1
    failed = _status(body, [pod("h", "headgroup")], error=ReconcileError("boom", "FailedCreateWorkerPod"))
    assert _conds(failed)["ReplicaFailure"] == ("True", "FailedCreateWorkerPod")
    assert _conds(failed)["RayClusterProvisioned"] == ("False", "RayClusterPodsProvisioning")


def test_head_not_found() -> None:
    status = _status(cluster(group(replicas=0)), [])
    assert _conds(status)["HeadPodReady"] == ("False", "HeadPodNotFound")


def test_suspend_conditions_sequence() -> None:
    body = cluster(group(replicas=1), suspend=True)
    pods = [pod("h", "headgroup"), pod("a")]
    first = _status(body, pods)
    assert _conds(first)["RayClusterSuspending"] == ("True", "RayClusterSuspending")
    body["status"] = first
    done = _status(body, [])
    assert _conds(done)["RayClusterSuspended"] == ("True", "RayClusterSuspended")
    assert _conds(done)["RayClusterSuspending"][0] == "False"
    assert _conds(done)["RayClusterProvisioned"][0] == "False"
    assert done["state"] == "suspended"
    body["status"] = done
    body["spec"]["suspend"] = False
    resumed = _status(body, [])
    assert _conds(resumed)["RayClusterSuspended"][0] == "False"


def test_suspend_conditions_are_written_false_from_the_start() -> None:
    status = _status(cluster(group(replicas=1)), [pod("h", "headgroup")])
    conds = _conds(status)
    assert conds["RayClusterSuspended"] == ("False", "RayClusterSuspended")
    assert conds["RayClusterSuspending"] == ("False", "RayClusterSuspending")
    provisioned = next(c for c in status["conditions"] if c["type"] == "RayClusterProvisioned")
    assert provisioned["message"] == "RayCluster Pods are being provisioned for first time"


def test_change_detection_and_patch() -> None:
    old = {"state": "ready", "reason": "x", "lastUpdateTime": "t"}
    new = {"state": "ready", "lastUpdateTime": "u"}
    assert status_changed(old, new)
    assert not status_changed({"state": "ready", "lastUpdateTime": "t"}, new)
    assert status_patch(old, new, now=NOW) == {
        "status": {"reason": None, "state": "ready", "lastUpdateTime": "2026-01-01T00:00:00Z"}
    }
