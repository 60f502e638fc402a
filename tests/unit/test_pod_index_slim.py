"""The pod index keeps only the status fields rayscale reads, and they still answer the same."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from tests.support.builders import cluster, group, pod

from rayscale.autoscaler import snapshot as autoscaler_snapshot
from rayscale.autoscaler.ray_report import pending_details
from rayscale.autoscaler.scheduling.model import NodeState
from rayscale.common import labels as L
from rayscale.common import pods

KUBELET_STATUS: dict[str, Any] = {
    "phase": "Running",
    "podIP": "10.244.0.3",
    "podIPs": [{"ip": "10.244.0.3"}],
    "hostIP": "10.0.0.9",
    "qosClass": "Guaranteed",
    "startTime": "2026-01-01T00:00:00Z",
    "conditions": [
        {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {
            "type": "Ready",
            "status": "False",
            "reason": "ContainersNotReady",
            "message": "not ready",
            "lastTransitionTime": "2026-01-01T00:00:01Z",
        },
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
    ],
    "containerStatuses": [
        {
            "name": "ray",
            "image": "rayproject/ray:2.60.0",
            "imageID": "sha256:abc",
            "containerID": "containerd://abc",
            "ready": False,
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": "x", "finishedAt": "y"}},
        }
    ],
}


def test_keeps_what_is_read_and_drops_the_rest() -> None:
    slim = pods.slim_pod_status(KUBELET_STATUS)
    assert slim == {
        "phase": "Running",
        "podIP": "10.244.0.3",
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": "not ready"},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ],
        "containerStatuses": [
            {"name": "ray", "state": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "y"}}}
        ],
    }


def test_a_sidecar_submitter_finish_time_survives_the_slimming() -> None:
    """The RayJob controller reads a SidecarMode submitter's end from the indexed (slim) head pod:
    without finishedAt a sidecar RayJob whose job succeeded stayed Running for ever."""
    from rayscale.rayjob.submitter_state import sidecar_check

    head = pod("h", restart_policy="Never")
    head["status"] = {
        "phase": "Running",
        "containerStatuses": [
            {"name": "ray-head", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}},
            {
                "name": "ray-job-submitter",
                "state": {
                    "terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": "2026-01-01T00:01:00Z"}
                },
            },
        ],
    }
    head["status"] = pods.slim_pod_status(head["status"])
    check = sidecar_check([head], {})
    assert not isinstance(check, str)
    failed, finished = check
    assert not failed
    assert finished is not None
    assert finished.isoformat() == "2026-01-01T00:01:00+00:00"


def test_the_slim_pod_answers_like_the_full_one() -> None:
    full = pod("w", restart_policy="Never")
    full["status"] = copy.deepcopy(KUBELET_STATUS)
    slim = copy.deepcopy(full)
    slim["status"] = pods.slim_pod_status(full["status"])
    for check in (pods.is_running_and_ready, pods.is_running_ready_if_present, pods.is_unhealthy):
        assert check(slim) == check(full)
    assert pods.is_unhealthy(slim)  # a dead Ray container with restartPolicy Never
    ready = pods.condition(slim, "Ready")
    assert ready is not None
    assert (ready["reason"], ready["message"]) == ("ContainersNotReady", "not ready")  # the head's status


def test_the_indexed_copy_of_a_pod_keeps_what_both_halves_read() -> None:
    full = pod("w", restart_policy="Never", index=3, replica="small-abcde", deleting="2026-01-01T00:01:00Z")
    full["metadata"]["annotations"] = {
        L.HASH_ANNOTATION: "h",
        L.KUBERAY_VERSION_ANNOTATION: "v",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
    }
    full["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    full["spec"]["containers"] = [{"name": "ray", "image": "rayproject/ray"}, {"name": "autoscaler"}]
    full["spec"]["nodeName"] = "node-1"
    full["status"] = copy.deepcopy(KUBELET_STATUS)
    slim = pods.slim_pod(full)
    assert slim["metadata"]["annotations"] == {L.HASH_ANNOTATION: "h", L.KUBERAY_VERSION_ANNOTATION: "v"}
    assert "managedFields" not in slim["metadata"]
    assert slim["spec"] == {"restartPolicy": "Never", "containers": [{"name": "ray"}, {"name": "autoscaler"}]}
    assert slim["status"] == pods.slim_pod_status(KUBELET_STATUS)
    accessors = (
        pods.pod_name, pods.pod_labels, pods.pod_group, pods.is_head, pods.is_worker, pods.phase,
        pods.deletion_time, pods.is_terminating, pods.creation_time, pods.is_running_and_ready,
        pods.is_running_ready_if_present, pods.replica_index, pods.ray_container_name, pods.is_unhealthy,
    )  # fmt: skip
    for read in accessors:
        assert read(slim) == read(full), read.__name__


def test_the_autoscaler_ages_a_slim_scheduled_pod_from_when_it_was_scheduled() -> None:
    full = pod("w", "small", phase="Pending", ready=False, created="2025-12-31T23:00:00Z")
    full["status"] = {**copy.deepcopy(KUBELET_STATUS), "phase": "Pending"}
    slim = copy.deepcopy(full)
    slim["status"] = pods.slim_pod_status(full["status"])
    body = cluster(group("small", replicas=1), autoscaling=True)
    now = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    nodes = [
        autoscaler_snapshot.build_snapshot(body, [p], None, [], frozenset(), now).nodes[0]
        for p in (full, slim)
    ]
    assert nodes[0] == nodes[1]
    (node, _) = nodes
    assert (node.state, node.booting, node.pending_seconds) == (NodeState.PENDING, True, 600.0)
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3"}
    waiting = pods.slim_pod_status({"phase": "Pending", "conditions": [unschedulable]})
    assert pending_details(node, {"status": waiting}) == "pod pending: unschedulable"
