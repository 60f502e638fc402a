"""Whether a node is being provisioned for an unscheduled worker pod, and what that does to its clock.

Node provisioners say so with Events on the pod:

- cluster-autoscaler: ``TriggeredScaleUp`` (a node group is growing for it) or ``NotTriggerScaleUp``
  (no node group can take it: a maximum reached, no group fits);
- Karpenter: ``Nominated`` ("Pod should schedule on: nodeclaim/..."), once it has launched or
  picked a node for the pod. Karpenter writes no pod annotation for this; the Event is the signal.

The newest of these Events on a pod (matched by uid, else name) decides its `Provisioning`:

- ``SCALING_UP``: its node is on the way, which for large GPU nodes takes 10 to 20 minutes. The pod
  is not a launch failure at ``maxNodeProvisionSeconds``; it is booting, and the boot limit
  (``maxNodeBootSeconds``, 3600 s by default: the 60 minutes Ray gives a node) applies, counted from
  its creation;
- ``REFUSED``: nothing will provision a node for it;
- none: no provisioner has said anything.

A pod refused, or one with no provisioner Event at all, that kube-scheduler has found unschedulable
(``PodScheduled=False``, reason ``Unschedulable``) for longer than the grace
(``--unprovisioned-grace-seconds``, 120 s) fails to launch then, however young: its provisioning
clock runs ``maxNodeProvisionSeconds - grace`` ahead of its unschedulable time. Without a
provisioner in the cluster no Event ever comes, so such pods fail over after the grace, not after
900 s. When the Events could not be read (``None``), the clocks are as they were: creation only.

Pure: the Events are read by provision_events.py.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from rayscale.common.pods import condition, creation_time, pod_name
from rayscale.common.timefmt import parse_time
from rayscale.common.types import Obj

__all__ = [
    "PROVISIONER_REASONS",
    "Provisioning",
    "UnscheduledClock",
    "is_unschedulable",
    "pod_provisioning",
    "unscheduled_clock",
]


class Provisioning(enum.StrEnum):
    SCALING_UP = "ScalingUp"  # a node is being provisioned for the pod
    REFUSED = "Refused"  # the provisioner said no node will be


#: Event reason -> what it says about the pod it is on.
PROVISIONER_REASONS: Mapping[str, Provisioning] = {
    "TriggeredScaleUp": Provisioning.SCALING_UP,  # cluster-autoscaler
    "Nominated": Provisioning.SCALING_UP,  # Karpenter
    "NotTriggerScaleUp": Provisioning.REFUSED,  # cluster-autoscaler
}


def is_unschedulable(pod: Obj) -> bool:
    """kube-scheduler found no node for the pod (``PodScheduled=False``, reason ``Unschedulable``)."""
    scheduled = condition(pod, "PodScheduled")
    return (
        scheduled is not None
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "Unschedulable"
    )


def _when(event: Obj) -> datetime | None:
    series = event.get("series") or {}
    for value in (
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        try:
            moment = parse_time(value)
        except ValueError:
            continue
        if moment is not None:
            return moment
    return None


def pod_provisioning(events: Iterable[Obj], pods: Sequence[Obj]) -> dict[str, Provisioning]:
    """Pod name -> what the newest provisioner Event on it says (pods without one are left out).

    An Event names its pod by name and uid; one naming an older pod of the same name is ignored."""
    uids = {pod_name(p): str((p.get("metadata") or {}).get("uid") or "") for p in pods}
    newest: dict[str, tuple[datetime | None, Provisioning]] = {}
    for event in events:
        said = PROVISIONER_REASONS.get(str(event.get("reason") or ""))
        involved = event.get("involvedObject") or {}
        name = str(involved.get("name") or "")
        if said is None or involved.get("kind") != "Pod" or name not in uids:
            continue
        uid = str(involved.get("uid") or "")
        if uid and uids[name] and uid != uids[name]:
            continue
        when = _when(event)
        seen = newest.get(name)
        if seen is None or (when is not None and (seen[0] is None or when >= seen[0])):
            newest[name] = (when, said)
    return {name: said for name, (_, said) in newest.items()}


@dataclass(frozen=True, slots=True)
class UnscheduledClock:
    pending_seconds: float  # measured against the provisioning limit (booting: the boot limit)
    booting: bool  # its node is being provisioned: the boot limit applies


def _since(now: datetime, moment: datetime | None) -> float:
    return 0.0 if moment is None else max((now - moment).total_seconds(), 0.0)


def unscheduled_clock(
    pod: Obj,
    now: datetime,
    said: Provisioning | None,
    *,
    known: bool,
    provision_seconds: float,
    grace_seconds: float,
) -> UnscheduledClock:
    """The clock of a worker pod no node has taken yet. `said`: what the provisioner said about it;
    `known`: whether the Events could be read at all (if not, the pod ages from its creation)."""
    age = _since(now, parse_time(creation_time(pod)))
    if not known:
        return UnscheduledClock(age, booting=False)
    if said is Provisioning.SCALING_UP:
        return UnscheduledClock(age, booting=True)
    scheduled = condition(pod, "PodScheduled") if is_unschedulable(pod) else None
    if scheduled is None:
        return UnscheduledClock(age, booting=False)
    unschedulable = _since(
        now, parse_time(scheduled.get("lastTransitionTime")) or parse_time(creation_time(pod))
    )
    return UnscheduledClock(max(age, unschedulable + provision_seconds - grace_seconds), booting=False)
