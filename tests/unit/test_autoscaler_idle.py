"""Idle RayClusters end (rayscale.autoscaler.idle): the annotations read, the work Ray's GCS shows,
the clock (keep, wait, act) and the IdleTermination condition that carries it across restarts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rayscale.autoscaler import idle
from rayscale.autoscaler.idle import (
    ACTION_ANNOTATION,
    SECONDS_ANNOTATION,
    Act,
    Action,
    Keep,
    Reason,
    Settings,
    Wait,
    Work,
    condition,
    decide,
    find_condition,
    idle_since,
    invalid_event,
    read_settings,
    work_of,
)
from rayscale.autoscaler.idle_apply import opted_in, status_patch
from rayscale.common.timefmt import rfc3339
from rayscale.ray.model import (
    ActorInfo,
    ClusterState,
    GangRequest,
    JobInfo,
    ResourceDemand,
    ResourceRequest,
    SubmissionInfo,
)

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
TEN = Settings(10)
EMPTY = ClusterState(version=1, session_name="s", nodes=())
ONE_CPU = ResourceDemand(ResourceRequest({"CPU": 1.0}), count=2)


def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def job(*, dead: bool, submission: str | None = None, end: datetime | None = None) -> JobInfo:
    return JobInfo("01000000", dead, submission, None, "python x.py", end_time_ms=_ms(end) if end else 0)


# ---- the annotations ----


def test_not_opted_in() -> None:
    assert read_settings({}) is None
    assert read_settings({"rayscale.io/autoscaler": "true"}) is None


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({SECONDS_ANNOTATION: "600"}, Settings(600, Action.SUSPEND)),  # suspend by default
        ({SECONDS_ANNOTATION: " 3 ", ACTION_ANNOTATION: "delete"}, Settings(3, Action.DELETE)),
        ({SECONDS_ANNOTATION: "60", ACTION_ANNOTATION: "Suspend"}, Settings(60, Action.SUSPEND)),
    ],
)
def test_settings(annotations: dict[str, str], expected: Settings) -> None:
    assert read_settings(annotations) == expected


@pytest.mark.parametrize(
    ("annotations", "says"),
    [
        ({SECONDS_ANNOTATION: "ten"}, 'idle-termination-seconds="ten" is not a whole number'),
        ({SECONDS_ANNOTATION: "-5"}, 'idle-termination-seconds="-5" is not a whole number'),
        ({SECONDS_ANNOTATION: "1.5"}, "is not a whole number"),
        ({SECONDS_ANNOTATION: "10m"}, "is not a whole number"),
        ({SECONDS_ANNOTATION: ""}, "is not a whole number"),
        ({SECONDS_ANNOTATION: "\u00b2"}, "is not a whole number"),  # a digit to str.isdigit, not to int
        ({SECONDS_ANNOTATION: "\u0661\u0662"}, "is not a whole number"),  # Arabic-Indic 12: ASCII only
        ({SECONDS_ANNOTATION: "0"}, "must be between 1 and 2147483647"),
        ({SECONDS_ANNOTATION: "9999999999"}, "must be between 1 and"),
        (
            {SECONDS_ANNOTATION: "60", ACTION_ANNOTATION: "stop"},
            'idle-termination-action="stop" is not one of',
        ),
        ({ACTION_ANNOTATION: "delete"}, "needs rayscale.io/idle-termination-seconds"),
    ],
)
def test_bad_annotations_say_what_is_wrong(annotations: dict[str, str], says: str) -> None:
    problem = read_settings(annotations)
    assert isinstance(problem, str)
    assert says in problem
    assert problem.endswith("idle termination is off")


# ---- the work ----


def test_no_work() -> None:
    dead = [job(dead=True), job(dead=True, submission="raysubmit_a")]
    done = {"raysubmit_a": SubmissionInfo("SUCCEEDED", "python x.py")}
    work = work_of(EMPTY, dead, done, [], 0)
    assert not work.busy
    assert work.describe() == "no work"


def test_ended_submissions_are_counted() -> None:
    submissions = {
        "raysubmit_a": SubmissionInfo("SUCCEEDED", "python a.py"),
        "raysubmit_b": SubmissionInfo("STOPPED", "python b.py"),
        "raysubmit_c": SubmissionInfo("RUNNING", "python c.py"),
    }
    assert work_of(EMPTY, [], submissions, [], 0).ended == 2
    assert work_of(EMPTY, [job(dead=True)], {}, [], 0).ended == 0  # a ray.init driver is no submission


def test_an_attached_driver_is_work() -> None:
    work = work_of(EMPTY, [job(dead=False), job(dead=True)], {}, [], 0)
    assert (work.busy, work.drivers, work.jobs) == (True, 1, 0)
    assert work.describe() == "1 live driver(s) (ray.init)"


def test_submissions_count_once_by_id() -> None:
    jobs = [job(dead=False, submission="raysubmit_a")]
    submissions = {
        "raysubmit_a": SubmissionInfo("RUNNING", "python a.py"),
        "raysubmit_b": SubmissionInfo("PENDING", "python b.py"),  # no driver yet
        "raysubmit_c": SubmissionInfo("FAILED", "python c.py"),
    }
    work = work_of(EMPTY, jobs, submissions, [], 0)
    assert (work.drivers, work.jobs) == (0, 2)


def test_demand_requests_and_detached_actors_are_work() -> None:
    state = ClusterState(
        version=1,
        session_name="s",
        nodes=(),
        pending_requests=(ONE_CPU,),
        pending_gangs=(GangRequest(bundles=(ONE_CPU.request,), strategy="PACK"),),
        constraints=((ONE_CPU,),),
    )
    actors = [
        ActorInfo("a1", "ALIVE", None, "01000000", "serve", "ServeController", detached=True),
        ActorInfo("a2", "ALIVE", None, "01000000", "", "Worker", detached=False),  # its driver's
        ActorInfo("a3", "DEAD", None, "01000000", "old", "Old", detached=True),
    ]
    work = work_of(state, [], {}, actors, 3)
    assert (work.tasks, work.gangs, work.constraints, work.requests, work.actors) == (2, 1, 1, 3, 1)
    assert work.describe() == (
        "1 live detached actor(s), 2 pending task(s) or actor(s), 1 pending placement group(s),"
        " 1 request_resources constraint(s), 3 RayResourceRequest(s)"
    )


def test_the_latest_end_of_a_driver_or_submission() -> None:
    jobs = [job(dead=True, end=T0), job(dead=True, end=T0 + timedelta(seconds=5))]
    submissions = {"raysubmit_a": SubmissionInfo("STOPPED", "x", end_time_ms=_ms(T0 + timedelta(seconds=7)))}
    assert work_of(EMPTY, jobs, submissions, [], 0).last_end_ms == _ms(T0 + timedelta(seconds=7))


# ---- the clock ----


def test_the_clock_starts_when_first_seen_idle_and_acts_after_its_seconds() -> None:
    first = decide(TEN, Work(), None, T0, suspended=False)
    assert first == Wait(T0, T0 + timedelta(seconds=10), Action.SUSPEND)
    assert decide(TEN, Work(), T0, T0 + timedelta(seconds=9), suspended=False) == first
    acted = decide(TEN, Work(), T0, T0 + timedelta(seconds=10), suspended=False)
    assert isinstance(acted, Act)
    assert (acted.action, acted.since) == (Action.SUSPEND, T0)
    assert "idle for 10s (since 2026-01-01T12:00:00Z" in acted.message
    assert "suspended as rayscale.io/idle-termination-seconds asks" in acted.message
    deleted = decide(Settings(10, Action.DELETE), Work(), T0, T0 + timedelta(seconds=11), suspended=False)
    assert isinstance(deleted, Act)
    assert deleted.action is Action.DELETE


def test_an_attached_driver_is_never_touched_however_long() -> None:
    busy = Work(drivers=1)
    for later in (0, 10, 3600, 86400 * 30):
        outcome = decide(TEN, busy, T0, T0 + timedelta(seconds=later), suspended=False)
        assert isinstance(outcome, Keep)
        assert outcome.reason is Reason.BUSY
        assert outcome.message == "the cluster has work: 1 live driver(s) (ray.init)"


def test_unknown_or_suspended_keeps_and_stops_the_clock() -> None:
    unknown = decide(TEN, None, T0, T0 + timedelta(hours=1), suspended=False)
    assert isinstance(unknown, Keep)
    assert unknown.reason is Reason.UNKNOWN
    paused = decide(TEN, Work(), T0, T0 + timedelta(hours=1), suspended=True)
    assert isinstance(paused, Keep)
    assert paused.reason is Reason.PAUSED


def test_a_driver_that_came_and_went_between_rounds_restarts_the_clock() -> None:
    ended = T0 + timedelta(seconds=8)
    outcome = decide(TEN, Work(last_end_ms=_ms(ended)), T0, T0 + timedelta(seconds=12), suspended=False)
    assert outcome == Wait(ended, ended + timedelta(seconds=10), Action.SUSPEND)
    # an end before the clock started (or a clock skewed into the future) moves nothing back
    before = decide(TEN, Work(last_end_ms=_ms(T0 - timedelta(hours=1))), T0, T0, suspended=False)
    assert isinstance(before, Wait)
    assert before.since == T0
    future = decide(TEN, Work(last_end_ms=_ms(T0 + timedelta(hours=1))), None, T0, suspended=False)
    assert isinstance(future, Wait)
    assert future.since == T0


def test_a_rayjobs_cluster_has_no_clock_until_a_submission_ended() -> None:
    """A RayJob's cluster idles between its head being ready and its job's submission: no clock
    then (its RayJob would wait on a suspended cluster, or make a deleted one again)."""
    for later in (0, 3600):
        before = decide(TEN, Work(), T0, T0 + timedelta(seconds=later), suspended=False, rayjob="job-a")
        assert before == Keep(
            Reason.AWAITING_JOB,
            "the cluster is RayJob job-a's and no job submission has ended on it yet:"
            " the idle clock starts when one has",
        )
        assert condition(before, T0)["status"] == "False"
    ended = T0 + timedelta(minutes=5)
    work = Work(ended=1, last_end_ms=_ms(ended))
    after = decide(TEN, work, None, ended + timedelta(seconds=3), suspended=False, rayjob="job-a")
    assert after == Wait(ended + timedelta(seconds=3), ended + timedelta(seconds=13), Action.SUSPEND)
    assert isinstance(
        decide(TEN, work, ended, ended + timedelta(seconds=10), suspended=False, rayjob="job-a"), Act
    )


# ---- the condition ----


def test_the_running_clock_is_the_conditions_transition_time_and_survives_a_restart() -> None:
    wait = decide(TEN, Work(), None, T0, suspended=False)
    written = condition(wait, T0 + timedelta(seconds=3))
    assert written == {
        "type": "IdleTermination",
        "status": "True",
        "reason": "Idle",
        "message": "no live driver, job, detached actor, pending demand or RayResourceRequest since"
        " 2026-01-01T12:00:00Z; the cluster is suspended at 2026-01-01T12:00:10Z unless work comes",
        "lastTransitionTime": "2026-01-01T12:00:00Z",
    }
    status = {"conditions": [{"type": "RayCompatible", "status": "True"}, written]}
    assert find_condition(status) == written
    # a restarted operator reads the clock back and acts on time
    since = idle_since(find_condition(status))
    assert since == T0
    assert isinstance(decide(TEN, Work(), since, T0 + timedelta(seconds=10), suspended=False), Act)
    # the condition does not change while the clock runs: no status write per round
    assert (
        condition(decide(TEN, Work(), since, T0 + timedelta(seconds=5), suspended=False), T0, written)
        == written
    )


def test_no_clock_to_read_back() -> None:
    assert idle_since(None) is None
    busy = condition(decide(TEN, Work(drivers=1), None, T0, suspended=False), T0)
    assert (busy["status"], busy["reason"]) == ("False", "Busy")
    assert idle_since(busy) is None
    assert idle_since({**busy, "status": "True", "reason": "Idle", "lastTransitionTime": "garbage"}) is None


def test_busy_keeps_its_transition_time() -> None:
    first = condition(Keep(Reason.BUSY, "the cluster has work: 1 x"), T0)
    later = condition(Keep(Reason.BUSY, "the cluster has work: 2 x"), T0 + timedelta(minutes=5), first)
    assert later["lastTransitionTime"] == rfc3339(T0)
    unknown = condition(Keep(Reason.UNKNOWN, "no GCS"), T0 + timedelta(minutes=6), later)
    assert (unknown["status"], unknown["lastTransitionTime"]) == ("Unknown", "2026-01-01T12:06:00Z")


def test_suspended_by_rayscale_stays_so_suspended_by_hand_does_not() -> None:
    acted = decide(TEN, Work(), T0, T0 + timedelta(seconds=10), suspended=False)
    done = condition(acted, T0 + timedelta(seconds=10))
    assert (done["status"], done["reason"]) == ("True", "IdleSuspended")
    paused = decide(TEN, Work(), None, T0 + timedelta(minutes=1), suspended=True)
    assert condition(paused, T0 + timedelta(minutes=1), done) == done
    by_hand = condition(paused, T0, None)
    assert (by_hand["status"], by_hand["reason"]) == ("False", "Suspended")
    # resumed: the clock starts afresh, not from before the suspension
    assert idle_since(done) is None


def test_bad_annotation_condition_and_event_once() -> None:
    problem = read_settings({SECONDS_ANNOTATION: "-1"})
    assert isinstance(problem, str)
    new = condition(problem, T0)
    assert (new["status"], new["reason"], new["message"]) == ("False", "InvalidAnnotation", problem)
    assert invalid_event(None, new) == ("Warning", idle.INVALID_EVENT, problem)
    assert invalid_event(new, condition(problem, T0 + timedelta(seconds=5), new)) is None  # once
    assert invalid_event(None, condition(Keep(Reason.BUSY, "x"), T0)) is None


# ---- a cluster rayscale does not autoscale: its status.autoscaler holds the condition alone ----


def test_opted_in_by_either_annotation() -> None:
    assert opted_in({SECONDS_ANNOTATION: "60"})
    assert opted_in({ACTION_ANNOTATION: "delete"})  # to be told it is bad
    assert not opted_in({"rayscale.io/autoscaler": "true"})
    assert not opted_in({})


def test_status_patch_of_a_cluster_not_autoscaled() -> None:
    idle_now = condition(decide(TEN, Work(), None, T0, suspended=False), T0)
    assert status_patch(None, idle_now) == {"status": {"autoscaler": {"conditions": [idle_now]}}}
    assert status_patch({"conditions": [idle_now]}, idle_now) is None  # written already
    # what an autoscaled past left is cleared
    past = {"groups": [], "gcs": {"reachable": True}, "conditions": [{"type": "RayCompatible"}]}
    assert status_patch(past, idle_now) == {
        "status": {"autoscaler": {"groups": None, "gcs": None, "conditions": [idle_now]}}
    }
    # opted out: the condition goes
    assert status_patch({"conditions": [idle_now]}, None) == {"status": {"autoscaler": None}}
    assert status_patch(None, None) is None
