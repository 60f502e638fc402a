"""The RayCronJob's reconcile, planned (rayscale.rayjob.cron.plan_cron): KubeRay's rules (the tick
after lastScheduleTime or creation, missed ticks make one RayJob, lastScheduleTime is now, the
requeue to the next tick, suspend, the Events and their words), KubeRay's unit-test cases
(raycronjob_controller_unit_test.go), the RayJob it makes (labels, annotation, owner, spec), the
name from the tick (restart safety), spec.timeZone with daylight saving, and bad input."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tests.support.builders import example

from rayscale.rayjob.cron import (
    EV_INVALID_SPEC,
    EV_NAME_TAKEN,
    EV_SUSPENDED,
    NAME_LABEL,
    TIMESTAMP_ANNOTATION,
    plan_cron,
    rayjob_name,
)
from rayscale.rayjob.cron_schedule import parse_standard

T0 = datetime(2024, 1, 1, 0, 0, 0, tzinfo=UTC)
UID = "0f0f-cron"


def cronjob(schedule: str = "*/5 * * * *", *, last: datetime | None = None, **spec: Any) -> dict[str, Any]:
    cluster = example("raycluster-basic.yaml")
    body = {
        "schedule": schedule,
        "jobTemplate": {"entrypoint": "python test.py", "rayClusterSpec": copy.deepcopy(cluster["spec"])},
        **spec,
    }
    status = {"lastScheduleTime": last.strftime("%Y-%m-%dT%H:%M:%SZ")} if last else {}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCronJob",
        "metadata": {
            "name": "test-cronjob",
            "namespace": "default",
            "uid": UID,
            "generation": 1,
            "creationTimestamp": "2023-12-31T23:58:30Z",
        },
        "spec": body,
        "status": status,
    }


def test_first_schedule_kuberay() -> None:
    """KubeRay's TestRayCronJobReconcile_FirstSchedule: created 23:58:30, */5, now 00:00 -> the
    00:00 tick is due: a RayJob, lastScheduleTime now, requeue 5 min."""
    step = plan_cron(cronjob(), T0, {})
    assert step.create is not None
    assert step.create.at == T0
    assert step.status == {"lastScheduleTime": "2024-01-01T00:00:00Z"}
    assert step.requeue == 300.0
    assert step.events == []


def test_create_rayjob_kuberay() -> None:
    """KubeRay's TestRayCronJobReconcile_CreateRayJob: last 00:00, now 00:10: one RayJob (for the
    first missed tick, 00:05), lastScheduleTime 00:10, requeue to 00:15."""
    now = T0 + timedelta(minutes=10)
    step = plan_cron(cronjob(last=T0), now, {})
    assert step.create is not None
    manifest = step.create.manifest
    assert step.create.at == T0 + timedelta(minutes=5)
    meta = manifest["metadata"]
    assert manifest["apiVersion"] == "ray.io/v1"
    assert manifest["kind"] == "RayJob"
    assert meta["name"] == f"test-cronjob-{int((T0 + timedelta(minutes=5)).timestamp()) // 60}"
    assert meta["namespace"] == "default"
    assert meta["labels"] == {NAME_LABEL: "test-cronjob"}
    assert meta["annotations"] == {TIMESTAMP_ANNOTATION: "2024-01-01T00:05:00Z"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCronJob",
            "name": "test-cronjob",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert manifest["spec"] == cronjob()["spec"]["jobTemplate"]
    assert step.status == {"lastScheduleTime": "2024-01-01T00:10:00Z"}
    assert step.requeue == 300.0


def test_not_yet_due_requeues_at_the_tick() -> None:
    step = plan_cron(cronjob(last=T0), T0 + timedelta(minutes=3, seconds=20), {})
    assert step.create is None
    assert step.status is None
    assert step.requeue == 100.0


def test_a_tick_just_passed_with_a_fraction_of_a_second() -> None:
    now = T0 + timedelta(minutes=5, microseconds=400000)
    step = plan_cron(cronjob(last=T0), now, {})
    assert step.create is not None
    assert step.status == {"lastScheduleTime": "2024-01-01T00:05:00Z"}
    assert step.requeue == pytest.approx(299.6)


def test_the_next_reconcile_after_a_create_makes_nothing_until_the_next_tick() -> None:
    first = plan_cron(cronjob(last=T0), T0 + timedelta(minutes=5), {})
    assert first.status is not None
    after = cronjob(last=T0 + timedelta(minutes=5))
    again = plan_cron(after, T0 + timedelta(minutes=5, seconds=1), {})
    assert again.create is None
    assert again.requeue == 299.0


def test_restart_after_create_before_status_makes_no_second_rayjob() -> None:
    """The operator created the tick's RayJob and died before writing lastScheduleTime: after the
    restart the same tick is due, its RayJob is found (it is this RayCronJob's): no create, the
    status is written."""
    now = T0 + timedelta(minutes=5, seconds=2)
    first = plan_cron(cronjob(last=T0), now, {})
    assert first.create is not None
    made = first.create.manifest
    later = plan_cron(cronjob(last=T0), now + timedelta(seconds=30), {made["metadata"]["name"]: made})
    assert later.create is None
    assert later.status == {"lastScheduleTime": "2024-01-01T00:05:32Z"}
    assert later.error is None


def test_a_rayjob_of_the_ticks_name_that_is_not_ours_is_refused() -> None:
    now = T0 + timedelta(minutes=5)
    name = rayjob_name("test-cronjob", now)
    stranger = {"metadata": {"name": name, "ownerReferences": [{"kind": "RayCronJob", "uid": "other"}]}}
    step = plan_cron(cronjob(last=T0), now, {name: stranger})
    assert step.create is None
    assert step.status is None
    assert step.error is not None
    assert [e.reason for e in step.events] == [EV_NAME_TAKEN]


def test_suspend_kuberay() -> None:
    """KubeRay's TestRayCronJobReconcile_Suspend: a Normal Event, nothing created, no requeue."""
    step = plan_cron(cronjob(suspend=True), T0 + timedelta(hours=1), {})
    assert step.create is None
    assert step.requeue is None
    assert step.status is None
    assert [(e.type, e.reason, e.message) for e in step.events] == [
        ("Normal", EV_SUSPENDED, "RayCronJob suspended, no new RayJobs will be created")
    ]


def test_resumed_after_missed_ticks_makes_one_rayjob() -> None:
    """Suspended for an hour (ticks missed): one RayJob, for the first missed tick."""
    step = plan_cron(cronjob(last=T0, suspend=False), T0 + timedelta(hours=1, seconds=10), {})
    assert step.create is not None
    assert step.create.at == T0 + timedelta(minutes=5)
    assert step.requeue == 290.0


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        (
            "invalid cron string",
            "invalid cron schedule: expected exactly 5 fields, found 3: [invalid cron string]",
        ),
        ("* * * * 7", "invalid cron schedule: end of range (7) above maximum (6): 7"),
        ("0 0 31 4 *", "invalid cron schedule: '0 0 31 4 *' has no time within five years"),
        (
            "TZ=Mars/Olympus * * * * *",
            "invalid cron schedule: provided bad location Mars/Olympus: unknown time",
        ),
    ],
)
def test_invalid_schedule_kuberay(schedule: str, message: str) -> None:
    """KubeRay's TestRayCronJobReconcile_InvalidSchedule: a Warning Event, no requeue; here also
    SpecValid=False."""
    step = plan_cron(cronjob(schedule), T0, {})
    assert step.create is None
    assert step.requeue is None
    assert [(e.type, e.reason) for e in step.events] == [("Warning", EV_INVALID_SPEC)]
    assert step.events[0].message.startswith(f"default/test-cronjob: {message}")
    assert step.status is not None
    [condition] = step.status["conditions"]
    assert condition["type"] == "SpecValid"
    assert condition["status"] == "False"
    assert condition["reason"] == EV_INVALID_SPEC
    assert condition["message"].startswith(message)


def test_invalid_is_posted_once_and_cleared_when_fixed() -> None:
    bad = cronjob("nope")
    first = plan_cron(bad, T0, {})
    assert first.status is not None
    bad["status"] = first.status
    again = plan_cron(bad, T0 + timedelta(seconds=5), {})
    assert again.events == []
    assert again.status is None  # nothing changed
    fixed = copy.deepcopy(bad)
    fixed["spec"]["schedule"] = "*/5 * * * *"
    healed = plan_cron(fixed, T0 + timedelta(seconds=10), {})
    assert healed.status is not None
    assert "conditions" not in healed.status


def test_invalid_template_and_time_zones() -> None:
    bad_template = cronjob()
    bad_template["spec"]["jobTemplate"] = {"entrypoint": "x"}
    step = plan_cron(bad_template, T0, {})
    assert step.events[0].message == (
        "default/test-cronjob: invalid RayJob template: The RayJob spec is invalid: "
        "one of RayClusterSpec or ClusterSelector must be set"
    )
    step = plan_cron(cronjob(timeZone="Mars/Olympus"), T0, {})
    assert (
        step.events[0].message
        == "default/test-cronjob: invalid spec.timeZone: unknown time zone Mars/Olympus"
    )
    step = plan_cron(cronjob("TZ=UTC * * * * *", timeZone="UTC"), T0, {})
    assert "CRON_TZ or TZ cannot be used with spec.timeZone" in step.events[0].message
    bad_name = cronjob()
    bad_name["metadata"]["name"] = "9lives"
    assert "not DNS-1035 labels" in plan_cron(bad_name, T0, {}).events[0].message


def test_time_zone_across_daylight_saving() -> None:
    """02:30 daily in Europe/Berlin: on 2024-03-31 (02:00 -> 03:00) there is no 02:30; the tick
    after the 30th's is the 1st of April's, 00:30 UTC."""
    last = datetime(2024, 3, 30, 1, 30, 5, tzinfo=UTC)  # the 30th's 02:30 CET, a little after
    spec = cronjob("30 2 * * *", last=last, timeZone="Europe/Berlin")
    waiting = plan_cron(spec, datetime(2024, 3, 31, 12, 0, tzinfo=UTC), {})
    assert waiting.create is None
    assert (
        waiting.requeue
        == (datetime(2024, 4, 1, 0, 30, tzinfo=UTC) - datetime(2024, 3, 31, 12, tzinfo=UTC)).total_seconds()
    )
    due = plan_cron(spec, datetime(2024, 4, 1, 0, 30, 1, tzinfo=UTC), {})
    assert due.create is not None
    assert due.create.manifest["metadata"]["annotations"][TIMESTAMP_ANNOTATION] == "2024-04-01T00:30:00Z"
    # unset: UTC
    utc = plan_cron(cronjob("30 2 * * *", last=last), datetime(2024, 3, 31, 2, 30, 1, tzinfo=UTC), {})
    assert utc.create is not None


def test_every_schedule_names_in_seconds() -> None:
    last = T0 + timedelta(seconds=3)
    step = plan_cron(cronjob("@every 5s", last=last), T0 + timedelta(seconds=8), {})
    assert step.create is not None
    tick = T0 + timedelta(seconds=8)
    assert step.create.manifest["metadata"]["name"] == f"test-cronjob-{int(tick.timestamp())}"
    assert step.requeue == 5.0


def test_names_fit_and_long_names_do_not_collide() -> None:
    tick = T0
    assert rayjob_name("a", tick) == f"a-{int(T0.timestamp()) // 60}"
    long_a, long_b = "x" * 60 + "a", "x" * 60 + "b"
    name_a, name_b = rayjob_name(long_a, tick), rayjob_name(long_b, tick)
    assert len(name_a) <= 47
    assert len(name_b) <= 47
    assert name_a != name_b
    # one tick, one name; the next tick, another
    assert rayjob_name("job", tick) == rayjob_name("job", tick)
    assert rayjob_name("job", tick) != rayjob_name("job", tick + timedelta(minutes=1))


def test_planner_follows_the_schedule_for_a_day() -> None:
    """Run the plan as the controller would (requeue, status written) over a day of
    `0 */3 * * *`: one RayJob per tick, eight in all, each named and annotated for its tick."""
    job = cronjob("0 */3 * * *")
    job["metadata"]["creationTimestamp"] = "2023-12-31T22:10:00Z"
    now, made = T0 - timedelta(minutes=5), dict[str, Any]()
    while now < T0 + timedelta(days=1):
        step = plan_cron(job, now, made)
        if step.create is not None:
            made[step.create.manifest["metadata"]["name"]] = step.create.manifest
        if step.status is not None:
            job["status"] = step.status
        assert step.requeue is not None
        now += timedelta(seconds=step.requeue)
    ticks = sorted(m["metadata"]["annotations"][TIMESTAMP_ANNOTATION] for m in made.values())
    assert ticks == [f"2024-01-01T{h:02d}:00:00Z" for h in range(0, 24, 3)]
    assert parse_standard("0 */3 * * *") is not None
