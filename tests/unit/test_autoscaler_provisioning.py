"""An unscheduled worker pod whose node is being provisioned (cluster-autoscaler's TriggeredScaleUp,
Karpenter's Nominated) is not a launch failure at the provisioning limit; one that nothing will
provision (NotTriggerScaleUp, or no provisioner Event at all) fails after a short grace."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support.builders import cluster, group, pod

from rayscale.autoscaler.provision_events import ProvisionEvents
from rayscale.autoscaler.provisioning import Provisioning, pod_provisioning
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import NodeState, RemovalCause
from rayscale.autoscaler.snapshot import UNPROVISIONED_GRACE_ANNOTATION, build_snapshot
from rayscale.kube import ops

NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)
S, R = Provisioning.SCALING_UP, Provisioning.REFUSED


def unschedulable(name: str, created: str, since: str | None = None, uid: str = "") -> dict[str, Any]:
    p = pod(name, phase="Pending", ready=False, created=created)
    p["metadata"]["uid"] = uid or f"uid-{name}"
    p["status"]["conditions"].append(
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "lastTransitionTime": since or created,
        }
    )
    return p


def event(pod_name: str, reason: str, at: str, uid: str = "", kind: str = "Pod") -> dict[str, Any]:
    involved = {"kind": kind, "name": pod_name, "namespace": "ns", "uid": uid or f"uid-{pod_name}"}
    return {"reason": reason, "involvedObject": involved, "lastTimestamp": at}


def removed(
    pods: list[dict[str, Any]], said: dict[str, Provisioning] | None, **annotations: str
) -> list[str]:
    body = cluster(group(replicas=len(pods), max_replicas=10), autoscaling=True)
    body["metadata"]["annotations"] = annotations
    snap = build_snapshot(body, pods, None, [], frozenset(), NOW, provisioning=said)
    return [r.name for r in schedule(snap).terminate if r.reason is RemovalCause.LAUNCH_FAILED]


def test_the_newest_provisioner_event_of_the_pod_itself_decides() -> None:
    pods = [unschedulable(n, "2026-01-01T00:50:00Z") for n in ("a", "b", "c", "d")]
    events = [
        event("a", "NotTriggerScaleUp", "2026-01-01T00:51:00Z"),
        event("a", "TriggeredScaleUp", "2026-01-01T00:52:00Z"),
        event("b", "TriggeredScaleUp", "2026-01-01T00:51:00Z"),
        event("b", "NotTriggerScaleUp", "2026-01-01T00:52:00Z"),
        event("c", "Nominated", "2026-01-01T00:51:00Z"),  # Karpenter
        event("d", "TriggeredScaleUp", "2026-01-01T00:51:00Z", uid="an-older-pod-of-that-name"),
        event("d", "Nominated", "2026-01-01T00:51:00Z", kind="Node"),
        event("e", "TriggeredScaleUp", "2026-01-01T00:51:00Z"),  # no such pod
        event("a", "FailedScheduling", "2026-01-01T00:59:00Z"),  # not a provisioner's word
    ]
    assert pod_provisioning(events, pods) == {"a": S, "b": R, "c": S}


def test_a_pod_whose_node_is_being_provisioned_outlives_the_provisioning_limit() -> None:
    old = unschedulable("w", "2026-01-01T00:30:00Z")  # 30 min > 900 s
    assert removed([old], {}) == ["w"]
    assert removed([old], {"w": S}) == []
    body = cluster(group(replicas=1), autoscaling=True)
    node = build_snapshot(body, [old], None, [], frozenset(), NOW, provisioning={"w": S}).nodes[0]
    assert (node.state, node.booting, node.pending_seconds) == (NodeState.PENDING, True, 1800)


def test_it_fails_at_the_boot_limit() -> None:
    assert removed([unschedulable("w", "2025-12-31T23:59:00Z")], {"w": S}) == ["w"]  # 61 min


def test_a_pod_nothing_will_provision_fails_after_the_grace() -> None:
    young = unschedulable("w", "2026-01-01T00:57:00Z")  # unschedulable 180 s, well before 900 s
    assert removed([young], {"w": R}) == ["w"]
    assert removed([young], {}) == ["w"]  # no provisioner said anything: none in the cluster
    assert removed([young], {"w": R}, **{UNPROVISIONED_GRACE_ANNOTATION: "300"}) == []
    assert removed([unschedulable("w", "2026-01-01T00:59:00Z")], {"w": R}) == []  # 60 s < 120 s


def test_the_grace_counts_from_when_the_pod_became_unschedulable() -> None:
    p = unschedulable("w", "2026-01-01T00:50:00Z", since="2026-01-01T00:59:30Z")
    assert removed([p], {"w": R}) == []


def test_without_the_events_the_old_clock_applies() -> None:
    young = unschedulable("w", "2026-01-01T00:57:00Z")
    assert removed([young], None) == []
    assert removed([unschedulable("w", "2026-01-01T00:30:00Z")], None) == ["w"]


def test_a_pod_not_yet_seen_by_the_scheduler_ages_from_its_creation() -> None:
    fresh = pod("w", phase="Pending", ready=False, created="2026-01-01T00:57:00Z")
    assert removed([fresh], {}) == []


class Lister:
    """ops.list_events, faked: the Events of each selector; every call kept."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, events: list[dict[str, Any]], fail: bool = False
    ) -> None:
        self.calls: list[tuple[str, str]] = []
        self.events = events
        self.fail = fail
        monkeypatch.setattr(ops, "list_events", self.list_events)

    async def list_events(self, api: Any, namespace: str, selector: str) -> list[dict[str, Any]]:
        self.calls.append((namespace, selector))
        if self.fail:
            raise ops.KubeError("forbidden", 403)
        reason = selector.rpartition("reason=")[2]
        return [e for e in self.events if e["reason"] == reason]


async def test_events_are_listed_only_while_a_worker_pod_is_unschedulable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lister = Lister(monkeypatch, [event("w", "TriggeredScaleUp", "2026-01-01T00:58:00Z")])
    reader = ProvisionEvents(object())  # type: ignore[arg-type]
    running = pod("r")
    assert await reader.read("ns", [running]) == {}
    assert lister.calls == []
    assert await reader.read("ns", [running, unschedulable("w", "2026-01-01T00:57:00Z")]) == {"w": S}
    assert sorted(lister.calls) == [
        ("ns", "involvedObject.kind=Pod,reason=Nominated"),
        ("ns", "involvedObject.kind=Pod,reason=NotTriggerScaleUp"),
        ("ns", "involvedObject.kind=Pod,reason=TriggeredScaleUp"),
    ]


async def test_events_that_cannot_be_read_leave_the_old_clocks(monkeypatch: pytest.MonkeyPatch) -> None:
    Lister(monkeypatch, [], fail=True)
    reader = ProvisionEvents(object())  # type: ignore[arg-type]
    assert await reader.read("ns", [unschedulable("w", "2026-01-01T00:57:00Z")]) is None
    assert await ProvisionEvents(None).read("ns", [unschedulable("w", "2026-01-01T00:57:00Z")]) is None
