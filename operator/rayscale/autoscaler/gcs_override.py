"""The ``GcsAddressOverride`` condition: what rayscale made of ``rayscale.io/gcs-address``. Pure.

rayscale sends a cluster's Ray auth token to the GCS address it dials, so an annotation that anyone
allowed to edit the RayCluster can set must not choose that address on its own
(``rayscale.ray.address.gcs_target``). When the annotation names an address other than the cluster's
head Service, ``status.autoscaler.conditions`` carries this condition:

- ``False``, reason ``OverrideNotAllowed``: the operator runs without
  ``--allow-gcs-address-override``, so rayscale ignores the annotation and dials the head Service;
- ``True``, reason ``OverrideAllowed``: the operator allows overrides, so rayscale dials the
  annotation's address and sends the token there.

Each change of the condition is posted once as an Event (a Warning ``GcsAddressIgnored`` for the
first, a Normal ``GcsAddressOverridden`` for the second); with the annotation gone (or naming the
head Service) there is no condition and no Event.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from rayscale.common import conditions
from rayscale.common.timefmt import rfc3339
from rayscale.common.types import Obj
from rayscale.ray.address import GCS_ADDRESS_ANNOTATION, OVERRIDE_FLAG, GcsTarget

__all__ = [
    "CHART_VALUE",
    "CONDITION",
    "IGNORED_EVENT",
    "OVERRIDDEN_EVENT",
    "Reason",
    "find_override",
    "override_condition",
    "override_event",
]


CONDITION = "GcsAddressOverride"
CHART_VALUE = "autoscaler.allowGcsAddressOverride"  # the Helm value that passes OVERRIDE_FLAG
IGNORED_EVENT = "GcsAddressIgnored"
OVERRIDDEN_EVENT = "GcsAddressOverridden"


class Reason(StrEnum):
    NOT_ALLOWED = "OverrideNotAllowed"
    ALLOWED = "OverrideAllowed"


def find_override(autoscaler_status: Obj | None) -> Obj | None:
    """The ``GcsAddressOverride`` condition of a ``status.autoscaler``, if it has one."""
    return conditions.find_condition(autoscaler_status, CONDITION)


def _message(target: GcsTarget, value: str) -> str:
    if target.override_allowed:
        return (
            f"annotation {GCS_ADDRESS_ANNOTATION} is followed: rayscale dials Ray's GCS at {target.address} "
            f"instead of the head Service, and sends the cluster's Ray auth token there, because the "
            f"operator runs with {OVERRIDE_FLAG} (Helm value {CHART_VALUE})"
        )
    return (
        f"annotation {GCS_ADDRESS_ANNOTATION}={value!r} is ignored: it names another address than the "
        f"head Service, and the cluster's Ray auth token goes only there; rayscale dials {target.address}. "
        f"An administrator allows overrides with `rayscale run {OVERRIDE_FLAG}` (Helm value "
        f"{CHART_VALUE}: true)"
    )[:1000]


def override_condition(target: GcsTarget, now: datetime, old: Obj | None = None) -> dict[str, Any] | None:
    """The condition (metav1.Condition) for `target`, None when the annotation names no other address.

    `old` is the current one, if any: ``lastTransitionTime`` moves only when the status changes.
    """
    if target.override is None:
        return None
    status = "True" if target.override_allowed else "False"
    reason = Reason.ALLOWED if target.override_allowed else Reason.NOT_ALLOWED
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == status else None
    return {
        "type": CONDITION,
        "status": status,
        "reason": str(reason),
        "message": _message(target, target.override),
        "lastTransitionTime": since or rfc3339(now),
    }


def override_event(old: Obj | None, new: Obj | None) -> tuple[str, str, str] | None:
    """The Event (type, reason, message) to post when the condition changes from `old` to `new`.

    None when there is no condition now or it says what `old` said (so once, not every round; and
    not again after an operator restart, since `old` is then the one written in the status).
    """
    if new is None:
        return None
    if old is not None and (old.get("status"), old.get("message")) == (new.get("status"), new.get("message")):
        return None
    if new.get("status") == "False":
        return "Warning", IGNORED_EVENT, str(new.get("message"))
    return "Normal", OVERRIDDEN_EVENT, str(new.get("message"))
