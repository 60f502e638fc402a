"""The texts of the autoscaler's Events and messages (texts.py), made without a loop or a server."""

from __future__ import annotations

from rayscale.autoscaler.texts import (
    EventText,
    backing_off,
    drain_message,
    gcs_reachable,
    gcs_unreachable,
    not_taken_message,
    ray_node_died,
    refused,
    resized,
    unscalable_message,
)


def test_resized_says_up_down_or_nothing() -> None:
    assert resized("gpu", 0, 3) == EventText("Normal", "ScaledUp", "group gpu: 0 -> 3 replicas")
    assert resized("cpu", 4, 1, ["IDLE", "DRAINED", "IDLE"]) == EventText(
        "Normal", "ScaledDown", "group cpu: 4 -> 1 replicas (DRAINED, IDLE)"
    )
    assert resized("cpu", 2, 1) == EventText("Normal", "ScaledDown", "group cpu: 2 -> 1 replicas")
    assert resized("cpu", 2, 2, ["IDLE"]) is None


def test_removals_and_backoff() -> None:
    assert ray_node_died("cpu", "rc-cpu-x") == EventText(
        "Normal", "RayNodeDied", "group cpu: the Ray node of pod rc-cpu-x died; the pod is removed"
    )
    assert backing_off("gpu", 299.6) == EventText(
        "Warning", "BackingOff", "group gpu: pods not provisioned in time; no launches for 300s"
    )
    assert drain_message("rc-cpu-x") == "rayscale: idle, removing pod rc-cpu-x"
    assert (
        drain_message("rc-cpu-x", "RayJob ns/j finished (SUCCEEDED)")
        == "rayscale: RayJob ns/j finished (SUCCEEDED), removing pod rc-cpu-x"
    )


def test_gcs_reachability() -> None:
    assert gcs_unreachable(None, "timeout") == EventText(
        "Warning", "GcsUnreachable", "Ray's GCS at ? cannot be reached (timeout); running workers are kept"
    )
    assert gcs_unreachable("rc-head-svc.ns.svc:6379", "refused").message.startswith(
        "Ray's GCS at rc-head-svc.ns.svc:6379 cannot"
    )
    assert gcs_reachable("h:6379") == EventText("Normal", "GcsReachable", "Ray's GCS at h:6379 answers again")


def test_not_taken_says_why() -> None:
    assert not_taken_message("ns", "rc", exists=False, beside_kuberay=False) == (
        "RayCluster rc does not exist in namespace ns"
    )
    assert not_taken_message("ns", "rc", exists=True, beside_kuberay=False) == (
        "RayCluster rc does not have enableInTreeAutoscaling: true in namespace ns"
    )
    beside = not_taken_message("ns", "rc", exists=True, beside_kuberay=True)
    assert beside.startswith("RayCluster rc is not autoscaled by rayscale (it needs rayscale.io/")
    assert beside.endswith(": true, in-tree autoscaling off) in namespace ns")
    assert refused("no head") == EventText("Warning", "AutoscalingRefused", "no head")


def test_unscalable_message_is_bounded() -> None:
    assert unscalable_message("rc", "spec.x: bad") == "RayCluster rc cannot be autoscaled: spec.x: bad"
    assert len(unscalable_message("rc", "x" * 5000)) == 1000
