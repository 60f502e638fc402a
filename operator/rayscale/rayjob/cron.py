"""A RayCronJob's reconcile, planned: KubeRay v1.6's RayCronJobReconciler as a pure function.

KubeRay's rules, kept:

- the RayCronJob is validated first (the schedule parses as robfig/cron's ParseStandard; the
  ``jobTemplate`` passes ValidateRayJobSpec); a problem is a Warning Event ``InvalidRayCronJobSpec``
  worded ``<namespace>/<name>: <problem>``, and nothing is created;
- ``suspend: true``: a Normal Event ``SuspendedRayCronJob`` on each reconcile, nothing created,
  no requeue;
- the tick due is the schedule's first tick after ``status.lastScheduleTime`` (the RayCronJob's
  creation time before the first). Not yet due: look again when it is. Due: create one RayJob for
  it, annotated ``ray.io/cronjob-scheduled-timestamp`` with the tick, labelled
  ``ray.io/cronjob-name``, owned (controller reference) by the RayCronJob, its spec the
  ``jobTemplate``; then ``lastScheduleTime`` is *now* (so missed ticks make one RayJob, for the
  first of them) and the next look is at the schedule's first tick after now.

Deliberate differences from KubeRay:

- **The RayJob's name is the tick's**, not a random suffix: ``<cronjob>-<tick in Unix minutes>``
  (seconds for an ``@every`` tick that is not on a whole minute), the RayCronJob's name cut and
  given a hash when the whole would pass 47 characters. A create that was made but not recorded
  (the operator died before writing ``lastScheduleTime``) is made again under the same name after
  a restart: the API server refuses it (AlreadyExists) and it counts as done, so a tick never makes
  two RayJobs. An existing RayJob of that name that this RayCronJob does not own is a Warning Event
  and a retry, never adopted.
- ``spec.timeZone`` (batch/v1 CronJob's field; unset: UTC) is the zone the schedule is read in;
  KubeRay reads it in the operator's local zone. A ``CRON_TZ=``/``TZ=`` prefix works as in KubeRay,
  but not together with ``spec.timeZone`` (batch/v1's rule).
- A problem is also the status condition ``SpecValid=False`` (the RayCluster's), removed when the
  spec is fixed; its Warning Event is posted when the problem is first seen or changes, not on
  every reconcile. Also refused: a schedule with no tick within five years (KubeRay would create a
  RayJob for the zero time on each reconcile), an unknown time zone, and a RayCronJob name that
  makes RayJob names that are not DNS-1035 labels (KubeRay's RayJob would fail its own validation).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from rayscale.api.names import RAYCRONJOB, RAYJOB
from rayscale.api.raycluster import SPEC_VALID
from rayscale.cluster.naming import is_dns1035_label
from rayscale.common.conditions import find_condition
from rayscale.common.timefmt import parse_time, rfc3339
from rayscale.common.types import Manifest, Obj
from rayscale.rayjob import consts as C
from rayscale.rayjob.actions import Event
from rayscale.rayjob.cron_schedule import CronError, Schedule, load_zone, next_tick, parse_standard
from rayscale.rayjob.validation import validate_spec_only

__all__ = ["CronStep", "Tick", "owned_by", "plan_cron", "rayjob_name"]

NAME_LABEL = "ray.io/cronjob-name"  # KubeRay's RayCronJobNameLabelKey
TIMESTAMP_ANNOTATION = "ray.io/cronjob-scheduled-timestamp"  # KubeRay's RayCronJobTimestampAnnotationKey
EV_INVALID_SPEC = "InvalidRayCronJobSpec"
EV_SUSPENDED = "SuspendedRayCronJob"
EV_NAME_TAKEN = "RayJobNameTaken"  # rayscale's: the tick's RayJob name is another's
_HASH = 5


@dataclasses.dataclass(frozen=True)
class Tick:
    """Create the RayJob of one tick (AlreadyExists, for a RayJob this RayCronJob owns, is done)."""

    at: datetime
    manifest: Manifest


@dataclasses.dataclass
class CronStep:
    """One reconcile: the RayJob to create (None: none), then the status to write (None: no write),
    the Events, and when to look again (None: only on a change). A failed create ends the step."""

    create: Tick | None = None
    status: dict[str, Any] | None = None
    events: list[Event] = dataclasses.field(default_factory=list)
    requeue: float | None = None
    error: str | None = None  # retried with backoff


def rayjob_name(cronjob: str, tick: datetime) -> str:
    """The tick's RayJob: ``<cronjob>-<Unix minutes>`` (``<Unix seconds>`` off a whole minute),
    at most 47 characters (KubeRay's RayJob name limit): a longer RayCronJob name is cut and ends
    in a hash of the whole, so two long names that share a start do not share RayJobs."""
    seconds = int(tick.timestamp())
    suffix = str(seconds // 60) if seconds % 60 == 0 else str(seconds)
    room = C.MAX_NAME - len(suffix) - 1
    if len(cronjob) > room:
        digest = hashlib.sha256(cronjob.encode()).hexdigest()[:_HASH]
        cronjob = f"{cronjob[: room - _HASH - 1].rstrip('-.')}-{digest}"
    return f"{cronjob}-{suffix}"


def owned_by(rayjob: Obj, cronjob: Obj) -> bool:
    uid = (cronjob.get("metadata") or {}).get("uid")
    refs = (rayjob.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("uid") == uid and ref.get("kind") == RAYCRONJOB.kind for ref in refs)


def _problem(spec: Mapping[str, Any], name: str) -> tuple[str | None, Schedule | None, ZoneInfo]:
    """(what is wrong, the schedule, the zone) of a RayCronJob's spec, in KubeRay's order."""
    utc = ZoneInfo("UTC")
    text = spec.get("schedule")
    if not isinstance(text, str):
        return "invalid cron schedule: empty spec string", None, utc
    try:
        schedule = parse_standard(text)
    except CronError as exc:
        return f"invalid cron schedule: {exc}", None, utc
    template = spec.get("jobTemplate")
    if not isinstance(template, Mapping):
        return "invalid RayJob template: jobTemplate must be set", None, utc
    if problem := validate_spec_only(template, {}):
        return f"invalid RayJob template: {problem}", None, utc
    zone_name = spec.get("timeZone")
    zone = utc
    if zone_name is not None:
        if schedule.zone is not None:
            return "invalid cron schedule: CRON_TZ or TZ cannot be used with spec.timeZone", None, utc
        try:
            zone = load_zone(str(zone_name))
        except CronError as exc:
            return f"invalid spec.timeZone: {exc}", None, utc
    if next_tick(schedule, datetime(2000, 1, 1, tzinfo=UTC), zone) is None:
        return f"invalid cron schedule: {text!r} has no time within five years", None, utc
    probe = rayjob_name(name, datetime(2000, 1, 1, tzinfo=UTC))
    if not is_dns1035_label(probe):
        return (
            f"the RayJob names this RayCronJob makes (such as {probe!r}) are not DNS-1035 labels: "
            "the name must start with a lowercase letter and hold only lowercase letters, digits and '-'",
            None,
            utc,
        )
    return None, schedule, zone


def _conditions(
    status: Mapping[str, Any], old: Obj | None, problem: str | None, now: datetime, gen: int
) -> list[Any]:
    """The status's conditions with ``SpecValid`` as `problem` says (`old`: the one written)."""
    others = [c for c in status.get("conditions") or [] if c.get("type") != SPEC_VALID]
    if problem is None:
        return others
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == "False" else None
    condition = {
        "type": SPEC_VALID,
        "status": "False",
        "observedGeneration": gen,
        "lastTransitionTime": since or rfc3339(now),
        "reason": EV_INVALID_SPEC,
        "message": problem,
    }
    return [*others, condition]


def _with_conditions(status: Mapping[str, Any], conditions: list[Any]) -> dict[str, Any]:
    out = {k: v for k, v in status.items() if k != "conditions"}
    if conditions:
        out["conditions"] = conditions
    return out


def plan_cron(cronjob: Obj, now: datetime, rayjobs: Mapping[str, Obj]) -> CronStep:
    """One reconcile of `cronjob` at `now` (UTC); `rayjobs`: the namespace's RayJobs by name, as
    the index holds them. Never raises."""
    meta = cronjob.get("metadata") or {}
    spec = cronjob.get("spec") or {}
    status: Mapping[str, Any] = cronjob.get("status") or {}
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    problem, schedule, zone = _problem(spec, name)
    old = find_condition(status, SPEC_VALID)
    conditions = _conditions(status, old, problem, now, int(meta.get("generation") or 0))
    step = CronStep()
    if conditions != (status.get("conditions") or []):
        step.status = _with_conditions(status, conditions)
    if problem is not None or schedule is None:
        if old is None or old.get("message") != problem:
            step.events.append(Event("Warning", EV_INVALID_SPEC, f"{ns}/{name}: {problem}"))
        return step
    if spec.get("suspend"):
        step.events.append(
            Event("Normal", EV_SUSPENDED, "RayCronJob suspended, no new RayJobs will be created")
        )
        return step
    earliest = parse_time(status.get("lastScheduleTime")) or parse_time(meta.get("creationTimestamp")) or now
    tick = next_tick(schedule, earliest, zone)
    if tick is None:  # a tick within five years of any time was checked above; a far past time
        tick = next_tick(schedule, now, zone)
        if tick is None:
            return step
    if tick > now:
        step.requeue = (tick - now).total_seconds()
        return step
    rayjob = rayjob_name(name, tick)
    found = rayjobs.get(rayjob)
    if found is not None and not owned_by(found, cronjob):
        message = f"RayJob {ns}/{rayjob} for the tick {rfc3339(tick)} exists and is not this RayCronJob's"
        step.events.append(Event("Warning", EV_NAME_TAKEN, message))
        step.error = message
        return step
    if found is None:
        step.create = Tick(tick, _manifest(cronjob, rayjob, tick))
    step.status = _with_conditions({**status, "lastScheduleTime": rfc3339(now)}, conditions)
    after = next_tick(schedule, now.replace(microsecond=0), zone)
    step.requeue = None if after is None else max((after - now).total_seconds(), 0.0)
    return step


def _manifest(cronjob: Obj, name: str, tick: datetime) -> Manifest:
    """KubeRay's constructRayJob, under the tick's name, with the RayCronJob's labels (rayscale's:
    a sharded fleet runs the RayJob, and its RayCluster, on the RayCronJob's shard)."""
    meta = cronjob["metadata"]
    return {
        **RAYJOB.type_meta(),
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": {**(meta.get("labels") or {}), NAME_LABEL: meta["name"]},
            "annotations": {TIMESTAMP_ANNOTATION: rfc3339(tick.astimezone(UTC))},
            "ownerReferences": [
                {
                    "apiVersion": RAYCRONJOB.api_version,
                    "kind": RAYCRONJOB.kind,
                    "name": meta["name"],
                    "uid": meta.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": copy.deepcopy(cronjob["spec"]["jobTemplate"]),
    }
