"""Idle RayClusters end: whether an opted-in cluster has been idle long enough, and what it says. Pure.

A RayCluster opts in with two annotations (KubeRay v1.6.2's RayCluster has no field for it):

- ``rayscale.io/idle-termination-seconds: "600"``: after this many seconds idle, the cluster ends;
- ``rayscale.io/idle-termination-action: suspend | delete``: how it ends (default ``suspend``:
  ``spec.suspend: true``, which deletes its pods and keeps the RayCluster).

A cluster is idle while Ray's GCS shows no work (`Work`): no live driver (a ``ray.init()`` process
attached to it, or a submitted job's), no job submission that has not ended, no live detached
actor (a Ray Serve application, say), no pending task, actor or placement group, no
``request_resources`` constraint, and no RayResourceRequest names the cluster. The clock starts
when a round first finds it idle, or later when the GCS says a driver or submission ended later
(a driver that came and went between two rounds); any work stops it. When it has run the
cluster's seconds, the cluster ends (`Act`); until then `Wait` says when. An unknown state (the
GCS did not answer) keeps the cluster and drops the clock (it starts from zero once the GCS
answers), and so does a suspended cluster. A
RayJob's cluster has no clock until a job submission has ended on it: until its job has been
submitted and has run, its RayJob needs it (and would wait on it suspended, or make it again).

The clock is kept in the ``IdleTermination`` condition of ``status.autoscaler``: while it runs,
``status: "True"``, reason ``Idle``, its ``lastTransitionTime`` the moment the cluster became idle.
An operator restarted reads it back (`idle_since`), so the clock does not start over.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from rayscale.common import conditions
from rayscale.common.labels import ORIGIN_RAYJOB, ORIGINATED_FROM_CR_NAME, ORIGINATED_FROM_CRD
from rayscale.common.timefmt import parse_time, rfc3339
from rayscale.common.types import Obj
from rayscale.ray.model import ActorInfo, ClusterState, JobInfo, SubmissionInfo

__all__ = [
    "ACTION_ANNOTATION",
    "CONDITION",
    "INVALID_EVENT",
    "SECONDS_ANNOTATION",
    "Act",
    "Action",
    "Keep",
    "Reason",
    "Settings",
    "Wait",
    "Work",
    "condition",
    "decide",
    "find_condition",
    "idle_since",
    "invalid_event",
    "rayjob_of",
    "read_settings",
    "work_of",
]

SECONDS_ANNOTATION = "rayscale.io/idle-termination-seconds"
ACTION_ANNOTATION = "rayscale.io/idle-termination-action"
CONDITION = "IdleTermination"
INVALID_EVENT = "InvalidIdleTermination"
MAX_SECONDS = 2**31 - 1  # an int32, as Kubernetes' own durations in seconds


class Action(enum.StrEnum):
    SUSPEND = "suspend"
    DELETE = "delete"


class Reason(enum.StrEnum):
    """The reasons of the ``IdleTermination`` condition."""

    IDLE = "Idle"  # True: the clock runs
    SUSPENDED = "IdleSuspended"  # True: rayscale suspended it after its idle time
    DELETED = "IdleDeleted"  # True: rayscale deleted it (seen only until it is gone)
    BUSY = "Busy"  # False: Ray has work
    PAUSED = "Suspended"  # False: suspended, not by rayscale (or resumed since): no clock
    UNKNOWN = "RayUnreachable"  # Unknown: the GCS did not answer
    AWAITING_JOB = "AwaitingJob"  # False: a RayJob's cluster on which no job submission has ended
    INVALID = "InvalidAnnotation"  # False: the annotations cannot be read; the feature is off


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    seconds: int
    action: Action = Action.SUSPEND


def read_settings(annotations: Mapping[str, str]) -> Settings | str | None:
    """The cluster's settings; None when it did not opt in; a message saying what is wrong when
    its annotations cannot be read (the feature is then off for it)."""
    raw_seconds = annotations.get(SECONDS_ANNOTATION)
    raw_action = annotations.get(ACTION_ANNOTATION)
    if raw_seconds is None and raw_action is None:
        return None
    if raw_seconds is None:
        return (
            f"annotation {ACTION_ANNOTATION} needs {SECONDS_ANNOTATION} (how many seconds idle);"
            " idle termination is off"
        )
    text = str(raw_seconds).strip()
    if not (text.isascii() and text.isdigit()):  # ASCII digits only: no sign, fraction or unit
        return (
            f'annotation {SECONDS_ANNOTATION}="{raw_seconds}" is not a whole number of seconds'
            f' (e.g. "600"); idle termination is off'
        )
    seconds = int(text)
    if not 1 <= seconds <= MAX_SECONDS:
        return (
            f"annotation {SECONDS_ANNOTATION}={seconds} must be between 1 and {MAX_SECONDS};"
            " idle termination is off"
        )
    action = str(raw_action if raw_action is not None else Action.SUSPEND).strip().lower()
    if action not in set(Action):
        return (
            f'annotation {ACTION_ANNOTATION}="{raw_action}" is not one of suspend, delete;'
            f" idle termination is off"
        )
    return Settings(seconds, Action(action))


def rayjob_of(labels: Mapping[str, str]) -> str | None:
    """The RayJob that made the cluster (KubeRay's origin labels), if one did."""
    if labels.get(ORIGINATED_FROM_CRD) != ORIGIN_RAYJOB:
        return None
    return str(labels.get(ORIGINATED_FROM_CR_NAME) or "")


@dataclasses.dataclass(frozen=True, slots=True)
class Work:
    """What keeps a cluster from being idle, counted; `last_end_ms` is when the latest driver or
    job submission ended (Unix ms, 0: none did); `ended`: how many job submissions have ended."""

    drivers: int = 0  # live drivers started by hand (ray.init)
    jobs: int = 0  # submitted jobs not ended (their drivers, or submissions still pending)
    actors: int = 0  # live detached actors
    tasks: int = 0  # pending tasks and actors
    gangs: int = 0  # pending placement groups
    constraints: int = 0  # request_resources constraints
    requests: int = 0  # RayResourceRequests naming the cluster
    last_end_ms: int = 0
    ended: int = 0

    @property
    def busy(self) -> bool:
        return any(n > 0 for n in self._counts().values())

    def _counts(self) -> dict[str, int]:
        return {
            "live driver(s) (ray.init)": self.drivers,
            "job submission(s) not ended": self.jobs,
            "live detached actor(s)": self.actors,
            "pending task(s) or actor(s)": self.tasks,
            "pending placement group(s)": self.gangs,
            "request_resources constraint(s)": self.constraints,
            "RayResourceRequest(s)": self.requests,
        }

    def describe(self) -> str:
        """What work there is, e.g. ``1 live driver(s) (ray.init), 2 pending task(s) or actor(s)``."""
        return ", ".join(f"{n} {what}" for what, n in self._counts().items() if n > 0) or "no work"


def work_of(
    state: ClusterState,
    jobs: Iterable[JobInfo],
    submissions: Mapping[str, SubmissionInfo],
    actors: Iterable[ActorInfo],
    requests: int,
) -> Work:
    """The work Ray's GCS shows: its jobs table, the job submissions, the live actors (only the
    detached ones count: the others live and die with a driver) and the cluster's demand."""
    drivers, submitted, last_end, ended = 0, set(), 0, 0
    for job in jobs:
        if not job.is_dead:
            if job.submission_id is None:
                drivers += 1
            else:
                submitted.add(job.submission_id)
        last_end = max(last_end, job.end_time_ms)
    for submission_id, submission in submissions.items():
        if not submission.terminal:
            submitted.add(submission_id)
        else:
            ended += 1
        last_end = max(last_end, submission.end_time_ms)
    return Work(
        drivers=drivers,
        jobs=len(submitted),
        actors=sum(1 for a in actors if a.detached and a.state == "ALIVE"),
        tasks=sum(d.count for d in state.pending_requests),
        gangs=len(state.pending_gangs),
        constraints=len(state.constraints),
        requests=requests,
        last_end_ms=last_end,
        ended=ended,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Keep:
    """Leave the cluster; no clock runs."""

    reason: Reason
    message: str


@dataclasses.dataclass(frozen=True, slots=True)
class Wait:
    """Idle since `since`; it ends at `until` unless work comes."""

    since: datetime
    until: datetime
    action: Action


@dataclasses.dataclass(frozen=True, slots=True)
class Act:
    """End the cluster now: suspend or delete it."""

    action: Action
    since: datetime
    message: str


Outcome = Keep | Wait | Act


def _ms(ms: int, like: datetime) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=like.tzinfo)


def decide(
    settings: Settings,
    work: Work | None,
    since: datetime | None,
    now: datetime,
    *,
    suspended: bool,
    rayjob: str | None = None,
) -> Outcome:
    """What to do with an opted-in cluster. `work` None: Ray's state is unknown. `since`: when the
    clock started (None: it does not run). `suspended`: ``spec.suspend`` is true. `rayjob`: the
    RayJob that made the cluster (its clock waits for a job submission to end)."""
    if suspended:
        return Keep(Reason.PAUSED, "the cluster is suspended; the idle clock starts when it resumes")
    if work is None:
        return Keep(Reason.UNKNOWN, "Ray's GCS did not answer; the idle clock starts over when it does")
    if work.busy:
        return Keep(Reason.BUSY, f"the cluster has work: {work.describe()}")
    if rayjob is not None and not work.ended:
        return Keep(
            Reason.AWAITING_JOB,
            f"the cluster is RayJob {rayjob}'s and no job submission has ended on it yet:"
            " the idle clock starts when one has",
        )
    start = since or now
    if work.last_end_ms:  # a driver or a job that ended after the clock started: it starts then
        start = max(start, min(_ms(work.last_end_ms, now), now))
    until = start + timedelta(seconds=settings.seconds)
    if now < until:
        return Wait(start, until, settings.action)
    verb = "suspended" if settings.action is Action.SUSPEND else "deleted"
    message = (
        f"idle for {settings.seconds}s (since {rfc3339(start)}: no live driver, job, detached actor,"
        f" pending demand or RayResourceRequest): {verb} as {SECONDS_ANNOTATION} asks"
    )
    return Act(settings.action, start, message)


def find_condition(autoscaler_status: Obj | None) -> Obj | None:
    """The ``IdleTermination`` condition of a ``status.autoscaler``, if it has one."""
    return conditions.find_condition(autoscaler_status, CONDITION)


def idle_since(old: Obj | None) -> datetime | None:
    """When the clock of `old` (the condition last written) started; None when it did not run."""
    if old is None or old.get("status") != "True" or old.get("reason") != Reason.IDLE:
        return None
    try:
        return parse_time(old.get("lastTransitionTime"))
    except ValueError:
        return None


def condition(outcome: Outcome | str, now: datetime, old: Obj | None = None) -> dict[str, Any]:
    """The ``IdleTermination`` condition for `outcome` (a str: the annotations' problem).

    While the clock runs its ``lastTransitionTime`` is when it started; otherwise it moves only
    when the status does. A Keep after rayscale suspended the cluster still says so.
    """
    if isinstance(outcome, str):
        status, reason, message = "False", Reason.INVALID, outcome
    elif isinstance(outcome, Wait):
        verb = "suspended" if outcome.action is Action.SUSPEND else "deleted"
        status, reason = "True", Reason.IDLE
        message = (
            f"no live driver, job, detached actor, pending demand or RayResourceRequest since"
            f" {rfc3339(outcome.since)}; the cluster is {verb} at {rfc3339(outcome.until)} unless work comes"
        )
    elif isinstance(outcome, Act):
        status = "True"
        reason = Reason.SUSPENDED if outcome.action is Action.SUSPEND else Reason.DELETED
        message = outcome.message
    elif outcome.reason is Reason.PAUSED and old is not None and old.get("reason") == Reason.SUSPENDED:
        return dict(old)  # still suspended by rayscale
    else:
        status = "Unknown" if outcome.reason is Reason.UNKNOWN else "False"
        reason, message = outcome.reason, outcome.message
    if isinstance(outcome, Wait):
        moved = rfc3339(outcome.since)
    else:
        kept = old.get("lastTransitionTime") if old is not None and old.get("status") == status else None
        moved = kept or rfc3339(now)
    return {
        "type": CONDITION,
        "status": status,
        "reason": str(reason),
        "message": message[:1000],
        "lastTransitionTime": moved,
    }


def invalid_event(old: Obj | None, new: Obj) -> tuple[str, str, str] | None:
    """The Warning to post for an unreadable annotation: once per message (not again after a
    restart, when `old` is the condition written)."""
    if new.get("reason") != Reason.INVALID:
        return None
    if old is not None and (old.get("reason"), old.get("message")) == (new.get("reason"), new.get("message")):
        return None
    return "Warning", INVALID_EVENT, str(new["message"])
