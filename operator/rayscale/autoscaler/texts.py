"""The texts of the autoscaler's Events and messages, made from plain values. Pure.

Each function answers an `EventText` (type, reason, message) or a message; the loop's parts post
and write them (the conditions' texts live beside their conditions: compat.py, gcs_override.py,
status.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, NamedTuple

from rayscale.autoscaler.eligibility import OPT_IN_ANNOTATION

__all__ = [
    "EventText",
    "backing_off",
    "drain_message",
    "gcs_reachable",
    "gcs_unreachable",
    "not_taken_message",
    "quota_refused",
    "ray_node_died",
    "refused",
    "resized",
    "unscalable_message",
]

MESSAGE_LIMIT = 1000  # what a status message keeps


class EventText(NamedTuple):
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


def resized(group: str, old: int, new: int, causes: Iterable[str] = ()) -> EventText | None:
    """``ScaledUp`` or ``ScaledDown`` (with the causes of the removals), None when `old` == `new`."""
    if new > old:
        return EventText("Normal", "ScaledUp", f"group {group}: {old} -> {new} replicas")
    if new < old:
        why = sorted(set(causes))
        said = f" ({', '.join(why)})" if why else ""
        return EventText("Normal", "ScaledDown", f"group {group}: {old} -> {new} replicas{said}")
    return None


def ray_node_died(group: str, pod: str) -> EventText:
    message = f"group {group}: the Ray node of pod {pod} died; the pod is removed"
    return EventText("Normal", "RayNodeDied", message)


def backing_off(group: str, seconds: float) -> EventText:
    message = f"group {group}: pods not provisioned in time; no launches for {seconds:.0f}s"
    return EventText("Warning", "BackingOff", message)


def quota_refused(why: str, nodes: int) -> EventText:
    """A quota refusal or a scale gate failed `nodes` of a group's launches at once (`why`:
    ``Refused.text()``, which names the group)."""
    message = f"{why}; {nodes} host(s) not launched, their work goes to the next group that can hold it"
    return EventText("Warning", "QuotaExceeded", message[:MESSAGE_LIMIT])


def gcs_unreachable(address: str | None, error: str) -> EventText:
    message = f"Ray's GCS at {address or '?'} cannot be reached ({error}); running workers are kept"
    return EventText("Warning", "GcsUnreachable", message)


def gcs_reachable(address: str | None) -> EventText:
    return EventText("Normal", "GcsReachable", f"Ray's GCS at {address} answers again")


def refused(refusal: str) -> EventText:
    """The user asked for autoscaling, but rayscale cannot take the cluster."""
    return EventText("Warning", "AutoscalingRefused", refusal)


def not_taken_message(namespace: str, name: str, *, exists: bool, beside_kuberay: bool) -> str:
    """Why a RayCluster's requests wait: it is gone, or rayscale does not autoscale it."""
    if not exists:
        why = "does not exist"
    elif beside_kuberay:
        why = f"is not autoscaled by rayscale (it needs {OPT_IN_ANNOTATION}: true, in-tree autoscaling off)"
    else:
        why = "does not have enableInTreeAutoscaling: true"
    return f"RayCluster {name} {why} in namespace {namespace}"


def unscalable_message(name: str, problem: object) -> str:
    """Why a RayCluster whose spec cannot be read is not autoscaled (its controller reports the spec)."""
    return f"RayCluster {name} cannot be autoscaled: {problem}"[:MESSAGE_LIMIT]


def drain_message(pod: str, why: str | None = None) -> str:
    """What Ray's drain request says (the node's drain reason message): idle, or `why` (e.g. the
    cluster's RayJob finished)."""
    return f"rayscale: {why or 'idle'}, removing pod {pod}"
