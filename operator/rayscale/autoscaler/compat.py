"""Whether rayscale can fully serve a cluster's Ray: the ``RayCompatible`` condition. Pure.

rayscale speaks Ray's autoscaler v2 protocol, through the GCS calls of Ray 2.x's
``AutoscalerStateService``. It cannot fully serve a cluster when:

- ``AutoscalerV1``: the head runs Ray's v1 autoscaler protocol (``autoscalerOptions.version: v1``,
  or ``RAY_enable_autoscaler_v2`` set to something other than ``true``/``1`` on the head's Ray
  container). ``request_resources()`` and ``ray status`` then talk to a v1 autoscaler that does not
  run; pending tasks, actors and placement groups are still served and idle nodes still drained.
- ``RayTooOld``: the GCS has no ``GetClusterResourceState`` (it answers UNIMPLEMENTED): nothing
  can be read, so nothing is autoscaled.
- ``DrainUnsupported``: the GCS has no ``DrainNode``: no node can be removed safely, so none is.
- ``ReportUnsupported``: the GCS has no ``ReportAutoscalingState``: ``ray status`` and the
  dashboard do not show rayscale's pending launches, failures and infeasible demand.

The GCS calls are judged by what they answered (``GcsSupport``): a method is missing only when
the GCS said UNIMPLEMENTED, so ``DrainUnsupported`` shows up at the first scale-down.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from rayscale.api.raycluster import RayClusterSpec
from rayscale.common import conditions
from rayscale.common.timefmt import rfc3339
from rayscale.common.types import Obj

__all__ = [
    "CLUSTER_STATE",
    "CONDITION",
    "DRAIN",
    "REPORT",
    "GcsSupport",
    "Reason",
    "autoscaler_protocol",
    "compat_condition",
    "compat_event",
    "find_condition",
    "problems",
]


CONDITION = "RayCompatible"
V2_ENV = "RAY_enable_autoscaler_v2"
UNIMPLEMENTED = "UNIMPLEMENTED"  # the gRPC status of a method the server does not have
# The GCS methods whose absence matters (``GcsClient`` method names).
CLUSTER_STATE = "GetClusterResourceState"
DRAIN = "DrainNode"
REPORT = "ReportAutoscalingState"


class Reason(StrEnum):
    """The condition's reason; the problems in order of severity, then the all-clear."""

    RAY_TOO_OLD = "RayTooOld"
    AUTOSCALER_V1 = "AutoscalerV1"
    DRAIN_UNSUPPORTED = "DrainUnsupported"
    REPORT_UNSUPPORTED = "ReportUnsupported"
    COMPATIBLE = "Compatible"


MESSAGES = {
    Reason.RAY_TOO_OLD: (
        "Ray's GCS has no GetClusterResourceState (Ray is too old for rayscale's autoscaler): "
        "nothing is autoscaled"
    ),
    Reason.AUTOSCALER_V1: (
        "the head runs Ray's autoscaler v1 protocol (autoscalerOptions.version v1 or "
        f"{V2_ENV} false): request_resources() and ray status do not reach rayscale; pending "
        "tasks, actors and placement groups are still served"
    ),
    Reason.DRAIN_UNSUPPORTED: (
        "Ray's GCS has no DrainNode: nodes cannot be drained before removal, so no worker is removed"
    ),
    Reason.REPORT_UNSUPPORTED: (
        "Ray's GCS has no ReportAutoscalingState: ray status and the dashboard do not show "
        "rayscale's pending launches, failures and infeasible demand"
    ),
    Reason.COMPATIBLE: "rayscale can serve this Ray cluster fully (autoscaler v2 protocol)",
}


@dataclass(frozen=True, slots=True)
class GcsSupport:
    """Which GCS methods answered: True (answered), False (UNIMPLEMENTED), None (not known yet).

    Kept per cluster by the caller, updated with ``seen`` after each call, and started over with
    ``for_session`` when the GCS session changes (a new head may run another Ray version).
    """

    session: str = ""
    cluster_state: bool | None = None
    drain: bool | None = None
    report: bool | None = None

    def seen(self, method: str, code: str | None) -> GcsSupport:
        """After a call of `method` that answered (`code` None) or failed with gRPC status `code`.

        Only UNIMPLEMENTED says a method is missing; other failures (unreachable, timeouts, a bad
        token) say nothing about it.
        """
        if code is None:
            known: bool | None = True
        elif code == UNIMPLEMENTED:
            known = False
        else:
            return self
        if method == CLUSTER_STATE:
            return replace(self, cluster_state=known)
        if method == DRAIN:
            return replace(self, drain=known)
        if method == REPORT:
            return replace(self, report=known)
        return self

    def for_session(self, session: str) -> GcsSupport:
        """Forget what the GCS of another session answered.

        Knowledge not tied to a session yet (``remembered``, or before any answer) is kept and
        tied to `session`.
        """
        if session == self.session:
            return self
        if not self.session:
            return replace(self, session=session)
        return GcsSupport(session=session)

    @classmethod
    def remembered(cls, condition: Obj | None) -> GcsSupport:
        """What a ``RayCompatible`` condition written earlier (e.g. before a restart) says was missing.

        So that a restarted operator does not clear the condition (and post Events) until the GCS
        answers again; every answer it gets overrides this.
        """
        message = (
            str((condition or {}).get("message") or "") if (condition or {}).get("status") == "False" else ""
        )
        return cls(
            cluster_state=False if MESSAGES[Reason.RAY_TOO_OLD] in message else None,
            drain=False if MESSAGES[Reason.DRAIN_UNSUPPORTED] in message else None,
            report=False if MESSAGES[Reason.REPORT_UNSUPPORTED] in message else None,
        )


# ----------------------------------------------------------------------------- the protocol


def _ray_container(spec: RayClusterSpec) -> Obj:
    """The head's Ray container (the first) in the head's pod template."""
    containers = (spec.head_group_spec.template.get("spec") or {}).get("containers") or []
    first = containers[0] if isinstance(containers, list) and containers else {}
    return first if isinstance(first, Mapping) else {}


def autoscaler_protocol(spec: RayClusterSpec) -> str:
    """``v1`` or ``v2``: the autoscaler protocol the head of the cluster of `spec` runs.

    The head's own ``RAY_enable_autoscaler_v2`` decides when it is given as a value (Ray reads
    ``true`` or ``1``, any case, as on; anything else as off); else ``autoscalerOptions.version``;
    else v2 (rayscale sets it on the head, see ``rayscale.controller.pods``). A value taken from
    a ConfigMap or Secret cannot be read here and counts as v2.
    """
    for env in _ray_container(spec).get("env") or []:
        if isinstance(env, Mapping) and env.get("name") == V2_ENV and "value" in env:
            return "v2" if str(env.get("value") or "").strip().lower() in ("true", "1") else "v1"
    options = spec.autoscaler_options
    return "v1" if options is not None and options.version == "v1" else "v2"


def problems(cluster: RayClusterSpec, support: GcsSupport) -> tuple[Reason, ...]:
    """Why rayscale cannot fully serve the cluster of spec `cluster`, the most severe first; ()
    when it can."""
    found = []
    if support.cluster_state is False:
        found.append(Reason.RAY_TOO_OLD)
    if autoscaler_protocol(cluster) == "v1":
        found.append(Reason.AUTOSCALER_V1)
    if support.drain is False:
        found.append(Reason.DRAIN_UNSUPPORTED)
    if support.report is False:
        found.append(Reason.REPORT_UNSUPPORTED)
    return tuple(found)


# ----------------------------------------------------------------------------- condition and Event


def find_condition(autoscaler_status: Obj | None) -> Obj | None:
    """The ``RayCompatible`` condition of a ``status.autoscaler``, if it has one."""
    return conditions.find_condition(autoscaler_status, CONDITION)


def compat_condition(
    cluster: RayClusterSpec, support: GcsSupport, now: datetime, old: Obj | None = None
) -> dict[str, Any]:
    """The ``RayCompatible`` condition (metav1.Condition) of the cluster of spec `cluster`; `old` is
    the current one, if any.

    False with the most severe problem as its reason and every problem in the message; True
    when there is none. ``lastTransitionTime`` moves only when the status changes.
    """
    found = problems(cluster, support)
    status = "False" if found else "True"
    reason = found[0] if found else Reason.COMPATIBLE
    message = "; ".join(MESSAGES[r] for r in found) if found else MESSAGES[Reason.COMPATIBLE]
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == status else None
    return {
        "type": CONDITION,
        "status": status,
        "reason": str(reason),
        "message": message,
        "lastTransitionTime": since or rfc3339(now),
    }


def compat_event(old: Obj | None, new: Obj) -> tuple[str, str, str] | None:
    """The Event (type, reason, message) to post when the condition changes from `old` to `new`.

    A Warning when it turns False or its problems change; a Normal ``RayCompatible`` when it
    turns True again; None otherwise (also for a first condition that is True).
    """
    was_false = old is not None and old.get("status") == "False"
    if new.get("status") == "False":
        if was_false and old is not None and old.get("message") == new.get("message"):
            return None  # the same problems (the message names every one)
        return "Warning", str(new.get("reason")), str(new.get("message"))
    if was_false:
        return "Normal", CONDITION, str(new.get("message"))
    return None
