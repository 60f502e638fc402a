"""Quota refusals and scale gates: a refused group is a failed launch at once (refusals.py,
quota_check.record, the snapshot and the scheduler)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.builders import cluster, group, pod

from rayscale.api.raycluster import RayClusterSpec
from rayscale.autoscaler import quota_check
from rayscale.autoscaler.backoff import Backoff
from rayscale.autoscaler.memory import ClusterMemory
from rayscale.autoscaler.ray_report import launch_failures
from rayscale.autoscaler.refusals import (
    CONDITION,
    QuotaRefusal,
    Refused,
    gate_refusals,
    has_room,
    is_quota_refusal,
    kueue_refusals,
    parse_refusal,
    quota_condition,
    refused_groups,
)
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import RemovalCause, UnmetReason
from rayscale.autoscaler.snapshot import build_snapshot, is_unborn
from rayscale.ray import model as ray

NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)
MESSAGE = (
    'create pod: 403 pods "rc-spot-worker-*" is forbidden: exceeded quota: spot-quota, '
    "requested: pods=1,requests.cpu=1, used: pods=4,requests.cpu=4, limited: pods=4,requests.cpu=8"
)
GATE = "kueue.k8s.io/quota-exceeded"


def quota(hard: dict[str, str], used: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "spot-quota"}, "status": {"hard": hard, "used": used}}


def test_a_quota_refusal_is_told_from_other_refusals() -> None:
    assert is_quota_refusal(403, MESSAGE)
    assert not is_quota_refusal(403, 'pods "x" is forbidden: violates PodSecurity "restricted"')
    assert not is_quota_refusal(500, MESSAGE)


def test_the_refusal_names_its_quota_and_what_was_asked() -> None:
    refusal = parse_refusal("spot", MESSAGE, NOW)
    assert refusal.quota == "spot-quota"
    assert dict(refusal.requested) == {"pods": "1", "requests.cpu": "1"}
    odd = parse_refusal("spot", "exceeded quota, somehow", NOW)
    assert (odd.quota, dict(odd.requested)) == (None, {})


def test_room_is_hard_minus_used_for_every_resource_asked() -> None:
    refusal = parse_refusal("spot", MESSAGE, NOW)
    used = {"pods": "4", "requests.cpu": "4"}
    assert not has_room(refusal, quota({"pods": "4", "requests.cpu": "8"}, used))
    assert has_room(refusal, quota({"pods": "5", "requests.cpu": "8"}, used))
    assert not has_room(refusal, quota({"pods": "5", "requests.cpu": "4500m"}, used))
    assert not has_room(refusal, quota({"pods": "5"}, {"pods": "4"}))  # cpu no longer listed: cannot tell
    assert not has_room(refusal, quota({"pods": "x", "requests.cpu": "8"}, {}))
    assert not has_room(parse_refusal("spot", "exceeded quota", NOW), quota({"pods": "9"}, {}))


def spec(*groups: dict[str, Any]) -> RayClusterSpec:
    return RayClusterSpec.model_validate(cluster(*groups, autoscaling=True)["spec"])


def gated(name: str, *gates: str, **extra: Any) -> dict[str, Any]:
    return group(name, scaleStrategy={"scaleGate": [{"name": g} for g in gates]}, **extra)


def test_gates_and_quota_refusals_make_the_refused_groups() -> None:
    s = spec(gated("spot", GATE, "example.com/maintenance"), group("od"), gated("other"))
    assert gate_refusals(s) == {"spot": (GATE, "example.com/maintenance")}
    refusal = parse_refusal("od", MESSAGE, NOW)
    found = refused_groups(s, {"od": refusal, "gone": parse_refusal("gone", MESSAGE, NOW)})
    assert found == {
        "spot": Refused("spot", None, (GATE, "example.com/maintenance")),
        "od": Refused("od", refusal, ()),
    }
    assert found["spot"].reason == "ScaleGate"
    assert found["od"].reason == "ResourceQuota"
    assert "spot-quota" in found["od"].text()
    assert GATE in found["spot"].text()


def test_the_condition_is_set_while_refused_and_cleared_after() -> None:
    assert quota_condition([], NOW, None) is None  # never refused: no condition
    refused = [Refused("spot", parse_refusal("spot", MESSAGE, NOW))]
    on = quota_condition(refused, NOW, None)
    assert on is not None
    assert (on["type"], on["status"], on["reason"]) == (CONDITION, "True", "ResourceQuota")
    assert "group spot" in on["message"]
    assert "spot-quota" in on["message"]
    later = quota_condition(
        [*refused, Refused("b", None, (GATE,))], NOW + timedelta(minutes=1), {"conditions": [on]}
    )
    assert later is not None
    assert (later["reason"], later["lastTransitionTime"]) == (
        "ResourceQuotaAndScaleGate",
        on["lastTransitionTime"],
    )
    off = quota_condition([], NOW + timedelta(minutes=2), {"conditions": [later]})
    assert off is not None
    assert (off["status"], off["reason"]) == ("False", "QuotaAvailable")
    assert off["lastTransitionTime"] != on["lastTransitionTime"]


def test_record_keeps_quota_refusals_only_from_their_first_time() -> None:
    memory = ClusterMemory(Backoff())
    assert not quota_check.record(memory, "spot", 403, "forbidden: violates PodSecurity", NOW)
    assert quota_check.record(memory, "spot", 403, MESSAGE, NOW)
    assert quota_check.record(memory, "spot", 403, MESSAGE, NOW + timedelta(seconds=30))
    assert memory.quota_refusals["spot"].since == NOW


def demand(cpu: float, count: int) -> ray.ClusterState:
    request = ray.ResourceDemand(ray.ResourceRequest({"CPU": cpu}), count)
    return ray.ClusterState(version=1, session_name="s", nodes=(), pending_requests=(request,))


def test_a_refused_groups_unborn_replicas_fail_now_and_demand_moves_in_the_same_round() -> None:
    """Spot preferred (priority), on-demand the fallback: the autoscaler asked for 2 spot workers,
    the quota refused them; in the next round they fail and on-demand gets the work."""
    body = cluster(
        group("spot", replicas=2, priority=10), group("od", replicas=0), autoscaling=True, rayVersion="2.60.0"
    )
    before = build_snapshot(body, [], demand(1, 2), [], (), NOW, short_since={"spot": NOW})
    waiting = schedule(before)  # no refusal known: the spot pods are pending and hold the work
    assert (waiting.terminate, waiting.groups["od"].replicas) == ((), 0)
    snap = build_snapshot(body, [], demand(1, 2), [], (), NOW, short_since={"spot": NOW}, refused={"spot"})
    assert {(n.pending_seconds, n.refused) for n in snap.nodes if is_unborn(n.name)} == {(0.0, True)}
    decision = schedule(snap)
    assert [(r.group, r.reason) for r in decision.terminate] == [("spot", RemovalCause.LAUNCH_FAILED)] * 2
    assert (decision.groups["spot"].replicas, decision.groups["od"].replicas) == (0, 2)
    assert decision.unmet == ()


def test_demand_only_a_refused_group_can_hold_is_unmet_with_quota() -> None:
    body = cluster(group("spot", replicas=0), autoscaling=True)
    decision = schedule(build_snapshot(body, [], demand(1, 3), [], (), NOW, refused={"spot"}))
    assert decision.groups["spot"].replicas == 0
    assert [(u.count, u.reason) for u in decision.unmet] == [(3, UnmetReason.QUOTA)]


def test_a_refused_group_keeps_its_minimum_and_its_running_pods() -> None:
    body = cluster(group("spot", replicas=3, min_replicas=2), autoscaling=True)
    pods = [pod("w1", "spot")]
    snap = build_snapshot(body, pods, None, [], (), NOW, short_since={"spot": NOW}, refused={"spot"})
    unborn = sorted(n.refused for n in snap.nodes if is_unborn(n.name))
    assert unborn == [False, True]  # one more keeps minReplicas 2; the third fails
    decision = schedule(snap)
    assert [r.reason for r in decision.terminate] == [RemovalCause.LAUNCH_FAILED]
    assert decision.groups["spot"].replicas == 2


def test_refused_launches_are_reported_to_ray_as_refused() -> None:
    """Ray's "Recent failures" say why; a refused host was asked when its group went short."""
    body = cluster(group("spot", replicas=1), group("od", replicas=0), autoscaling=True)
    snap = build_snapshot(body, [], demand(1, 1), [], (), NOW, short_since={"spot": NOW}, refused={"spot"})
    (failure,) = launch_failures(snap, schedule(snap), NOW)
    assert (failure.group, failure.count) == ("spot", 1)
    assert failure.reason == "pod refused by a ResourceQuota or the group's scaleGate"


def workload(name: str, created: str, *conditions: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "status": {"conditions": list(conditions)},
    }


KUEUE_PENDING = {
    "type": "QuotaReserved",
    "status": "False",
    "reason": "Pending",
    "message": "couldn't assign flavors to pod set head: insufficient quota for cpu in flavor f, ...; "
    "couldn't assign flavors to pod set gpu: insufficient quota for nvidia.com/gpu in flavor f, "
    "previously considered podsets requests (0) + current podset request (3) > maximum capacity (2)",
}


def test_kueue_refusals_come_from_the_newest_slice_it_cannot_admit() -> None:
    admitted = workload("old", "2026-01-01T00:00:00Z", {"type": "QuotaReserved", "status": "True"})
    pending = workload("new", "2026-01-01T00:01:00Z", KUEUE_PENDING)
    found = kueue_refusals([admitted, pending])
    assert sorted(found) == ["gpu", "head"]
    assert found["gpu"].startswith(
        "couldn't assign flavors to pod set gpu: insufficient quota for nvidia.com/gpu"
    )
    assert kueue_refusals([pending, admitted]) == found  # by creation, not by order
    assert kueue_refusals([admitted]) == {}
    finished = workload("new", "2026-01-01T00:01:00Z", KUEUE_PENDING, {"type": "Finished", "status": "True"})
    assert kueue_refusals([admitted, finished]) == {}
    assert kueue_refusals([]) == {}


def gated_pod(name: str, group_name: str) -> dict[str, Any]:
    body = pod(name, group_name, phase="Pending", ready=False, created="2026-01-01T00:59:00Z")
    body["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]
    return body


def test_a_refused_groups_gated_pods_fail_now_beyond_its_minimum() -> None:
    """Kueue's elastic job: the scale-up's pods wait behind the elastic-job gate for a slice Kueue
    cannot admit; refused, they fail in this round (the minimum kept) and the work moves on."""
    body = cluster(group("gpu", replicas=3, min_replicas=1), group("cpu", replicas=0), autoscaling=True)
    pods = [gated_pod("g1", "gpu"), gated_pod("g2", "gpu"), gated_pod("g3", "gpu")]
    waiting = build_snapshot(body, pods, demand(1, 3), [], (), NOW)
    assert not any(n.refused for n in waiting.nodes)
    snap = build_snapshot(body, pods, demand(1, 3), [], (), NOW, refused={"gpu"})
    assert sorted((n.name, n.refused) for n in snap.nodes) == [("g1", False), ("g2", True), ("g3", True)]
    decision = schedule(snap)
    assert sorted(r.name for r in decision.terminate) == ["g2", "g3"]
    assert {r.reason for r in decision.terminate} == {RemovalCause.LAUNCH_FAILED}
    assert decision.groups["cpu"].replicas == 2


def test_kueue_refusals_say_so() -> None:
    refusal = QuotaRefusal("gpu", KUEUE_PENDING["message"], None, {}, NOW, source="Kueue")
    refused = Refused("gpu", refusal)
    assert refused.reason == "Kueue"
    assert refused.text().startswith("group gpu: Kueue did not admit the workload slice of its new pods")
