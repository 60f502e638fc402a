"""status.autoscaler from a snapshot and a decision, its merge patch, and the UnmetDemand notice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from rayscale.api.raycluster import RayClusterSpec
from rayscale.autoscaler.compat import GcsSupport, compat_condition
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import (
    Constraint,
    Demand,
    Gang,
    Group,
    Head,
    Node,
    NodeState,
    Snapshot,
    Strategy,
    Target,
)
from rayscale.autoscaler.status import (
    REFRESH_SECONDS,
    GcsHealth,
    autoscaler_patch,
    autoscaler_status,
    clear_autoscaler_patch,
    unmet_by_reason,
    unmet_notice,
    waiting_bundles,
)

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
DOWN = GcsHealth("rc-head-svc.ns.svc:6379", reachable=False, last_error="UNAVAILABLE: down")
UP = GcsHealth("rc-head-svc.ns.svc:6379", reachable=True, last_contact=NOW)
CPU = Group("cpu", {"CPU": 4}, max_replicas=10)
GPU = Group("gpu", {"CPU": 4, "GPU": 1}, max_replicas=2)


def status(snapshot: Snapshot, gcs: GcsHealth = UP, **kwargs: Any) -> dict[str, Any]:
    return autoscaler_status(snapshot, schedule(snapshot), gcs, kwargs.pop("until", {}), NOW, **kwargs)


def test_groups_count_current_desired_pending_and_idle_replicas() -> None:
    snapshot = Snapshot(
        groups=(CPU, GPU),
        nodes=(
            Node("c1", "cpu", idle_seconds=5.0),  # running, idle (below the timeout: stays)
            Node("c2", "cpu"),  # running, busy
            Node("c3", "cpu", NodeState.PENDING),
            Node("c4", "cpu", NodeState.TERMINATING),  # not counted
        ),
        constraints=(Constraint({"GPU": 1}, 2),),
    )
    got = status(snapshot)
    assert got["groups"] == [
        {"name": "cpu", "current": 3, "desired": 3, "pending": 1, "idle": 1},
        {"name": "gpu", "current": 0, "desired": 2, "pending": 0, "idle": 0},
    ]
    assert got["unmetDemand"] == []
    assert got["lastDecisionTime"] == "2026-05-01T12:00:00Z"
    assert got["gcs"] == {
        "reachable": True,
        "address": "rc-head-svc.ns.svc:6379",
        "lastContactTime": "2026-05-01T12:00:00Z",
    }


def test_multi_host_replicas_are_pending_or_idle_as_a_whole() -> None:
    tpu = Group("tpu", {"TPU": 4}, num_of_hosts=2)
    snapshot = Snapshot(
        groups=(tpu,),
        nodes=(
            Node("a0", "tpu", replica="a", idle_seconds=3.0),
            Node("a1", "tpu", replica="a", idle_seconds=3.0),
            Node("b0", "tpu", replica="b", idle_seconds=3.0),
            Node("b1", "tpu", NodeState.PENDING, replica="b"),
        ),
    )
    (group,) = status(snapshot)["groups"]
    assert (group["current"], group["pending"], group["idle"]) == (2, 1, 1)


def test_unmet_demand_says_what_how_many_and_why() -> None:
    snapshot = Snapshot(
        groups=(CPU, GPU),
        constraints=(Constraint({"GPU": 1}, 3),),
        demands=(Demand({"TPU": 1}, 2),),
        gangs=(Gang(Strategy.STRICT_SPREAD, ({"GPU": 1}, {"GPU": 1}, {"GPU": 1})),),
    )
    unmet = status(snapshot)["unmetDemand"]
    by_kind = {u["kind"]: u for u in unmet}
    assert by_kind["constraint"] == {
        "kind": "constraint",
        "resources": {"GPU": 1},
        "count": 3,
        "reason": "MAX_REPLICAS",
        "message": "3 x {GPU: 1} (bundle(s) of request_resources or RayResourceRequests): "
        "the groups that could hold it are at maxReplicas",
    }
    assert by_kind["demand"]["reason"] == "NO_MATCHING_GROUP"
    assert by_kind["demand"]["message"].startswith(
        "2 x {TPU: 1} (pending task(s) or actor(s)): no worker group"
    )
    gang = by_kind["gang"]
    assert (gang["bundles"], gang["strategy"], gang["count"]) == ([{"GPU": 1}] * 3, "STRICT_SPREAD", 1)
    assert "resources" not in gang
    assert gang["message"].startswith("1 x STRICT_SPREAD [{GPU: 1}, {GPU: 1}, {GPU: 1}] (placement group(s))")
    decision = schedule(snapshot)
    assert unmet_by_reason(decision) == {"MAX_REPLICAS": 6, "NO_MATCHING_GROUP": 2}  # 3 + 3 bundles
    assert waiting_bundles(decision) == 8


def test_waiting_bundles_counts_placements_not_on_running_workers() -> None:
    snapshot = Snapshot(
        groups=(GPU,),
        nodes=(Node("g1", "gpu"), Node("g2", "gpu", NodeState.PENDING)),
        constraints=(Constraint({"GPU": 1}, 2),),
    )
    assert waiting_bundles(schedule(snapshot)) == 1  # one on the running worker, one waits for g2


def test_bundles_the_head_holds_do_not_wait() -> None:
    snapshot = Snapshot(
        groups=(GPU,),
        head=Head({"CPU": 4, "GPU": 1}),
        nodes=(Node("g1", "gpu", NodeState.PENDING),),
        constraints=(Constraint({"GPU": 1}, 2),),
    )
    decision = schedule(snapshot)
    assert [t.on for p in decision.placements for t in p.targets] == [Target.HEAD, Target.PENDING]
    assert waiting_bundles(decision) == 1  # the head holds one now; one waits for g1


def test_backoff_until_and_an_unreachable_gcs() -> None:
    until = NOW + timedelta(minutes=5)
    old = {"gcs": {"lastContactTime": "2026-05-01T11:00:00Z"}}
    got = status(Snapshot(groups=(CPU,)), DOWN, until={"cpu": until}, old=old)
    assert got["groups"][0]["backoffUntil"] == "2026-05-01T12:05:00Z"
    assert got["gcs"] == {
        "reachable": False,
        "address": "rc-head-svc.ns.svc:6379",
        "lastError": "UNAVAILABLE: down",
        "lastContactTime": "2026-05-01T11:00:00Z",  # kept from the status: the last contact known
    }


def test_patch_only_when_something_but_the_timestamps_changed_or_it_is_old() -> None:
    snapshot = Snapshot(groups=(CPU,))
    first = status(snapshot)
    assert autoscaler_patch(None, first, NOW) == {"status": {"autoscaler": first}}
    later = NOW + timedelta(seconds=REFRESH_SECONDS - 1)
    same = autoscaler_status(snapshot, schedule(snapshot), UP, {}, later, first)
    assert same["lastDecisionTime"] != first["lastDecisionTime"]
    assert autoscaler_patch(first, same, later) is None
    much_later = NOW + timedelta(seconds=REFRESH_SECONDS + 1)
    assert autoscaler_patch(first, same, much_later) is not None  # refreshed every REFRESH_SECONDS
    changed = status(Snapshot(groups=(CPU,), constraints=(Constraint({"CPU": 4}, 1),)))
    assert autoscaler_patch(first, changed, NOW) is not None


def test_patch_removes_keys_that_are_gone() -> None:
    snapshot = Snapshot(groups=(CPU,))
    down = status(snapshot, DOWN)
    up = status(snapshot, UP, old=down)
    patch = autoscaler_patch(down, up, NOW)
    assert patch is not None
    assert patch["status"]["autoscaler"]["gcs"]["lastError"] is None  # merge patch: null deletes
    assert patch["status"]["autoscaler"]["gcs"]["reachable"] is True
    assert set(patch["status"]) == {"autoscaler"}  # nothing else of the status is touched
    assert clear_autoscaler_patch(up) == {"status": {"autoscaler": None}}
    assert clear_autoscaler_patch(None) is None


def test_unmet_notice_is_not_repeated_while_the_unmet_demand_is_unchanged() -> None:
    snapshot = Snapshot(groups=(GPU,), constraints=(Constraint({"GPU": 1}, 3),))
    first = status(snapshot)
    key, message = unmet_notice(None, first)
    assert message is not None
    assert "3 x {GPU: 1}" in message
    assert "maxReplicas" in message
    again = status(snapshot)
    assert unmet_notice(key, again) == (key, None)
    more = status(Snapshot(groups=(GPU,), constraints=(Constraint({"GPU": 1}, 4),)))
    key2, message = unmet_notice(key, more)
    assert key2 != key
    assert message is not None
    assert "4 x {GPU: 1}" in message
    met = status(Snapshot(groups=(GPU,), constraints=(Constraint({"GPU": 1}, 1),)))
    key3, message = unmet_notice(key2, met)
    assert message is None
    assert unmet_notice(key3, first)[1] is not None  # unmet again after being met: a new Event


def test_the_ray_compatible_condition_is_carried_and_kept() -> None:
    snapshot = Snapshot(groups=(CPU,))
    head: dict[str, Any] = {"template": {}}
    cluster = RayClusterSpec.model_validate({"headGroupSpec": head, "autoscalerOptions": {"version": "v1"}})
    v1 = compat_condition(cluster, GcsSupport(), NOW)
    first = status(snapshot, conditions=[v1])
    assert first["conditions"] == [v1]
    assert status(snapshot)  # no condition given and none before: no key
    assert "conditions" not in status(snapshot)
    # a round without a new condition keeps the one written
    kept = status(snapshot, old=first)
    assert kept["conditions"] == [v1]
    assert autoscaler_patch(first, kept, NOW) is None
    # a change of the condition is worth a write
    fixed = compat_condition(
        RayClusterSpec.model_validate({"headGroupSpec": head}), GcsSupport(), NOW + timedelta(seconds=5), v1
    )
    patch = autoscaler_patch(first, status(snapshot, old=first, conditions=[fixed]), NOW)
    assert patch is not None
    assert patch["status"]["autoscaler"]["conditions"] == [fixed]
