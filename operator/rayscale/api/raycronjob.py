"""RayCronJob (ray.io/v1): a RayJob created on a cron schedule, as KubeRay v1.6.2 defines it.

KubeRay's fields, plus ``spec.timeZone`` (batch/v1 CronJob's), which KubeRay's RayCronJob lacks:
an optional field, so the CRD stays a superset of KubeRay's.
"""

from __future__ import annotations

from pydantic import Field

from rayscale.api.raycluster import Condition
from rayscale.api.rayjob import DATE_TIME, RayJobSpec
from rayscale.api.schema import KubeModel

TIME_ZONE_DESCRIPTION = (
    "The IANA time zone (e.g. Etc/UTC, Europe/Berlin) the schedule is read in, as batch/v1 CronJob's "
    "spec.timeZone; unset: UTC. Not together with a CRON_TZ= / TZ= prefix of the schedule. A rayscale "
    "field KubeRay's RayCronJob lacks (KubeRay reads its schedule in the operator's local time zone, "
    "or a CRON_TZ= / TZ= prefix)."
)


class RayCronJobSpec(KubeModel):
    """The RayJob to create, the cron schedule to create it on, and whether scheduling is suspended."""

    job_template: RayJobSpec
    schedule: str
    suspend: bool | None = None
    time_zone: str | None = Field(default=None, description=TIME_ZONE_DESCRIPTION)


class RayCronJobStatus(KubeModel):
    """Observed state of a RayCronJob: when a RayJob was last scheduled; SpecValid=False while the
    spec is refused (a rayscale field KubeRay's RayCronJob lacks)."""

    last_schedule_time: str | None = Field(default=None, json_schema_extra=DATE_TIME)
    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


__all__ = ["RayCronJobSpec", "RayCronJobStatus"]
