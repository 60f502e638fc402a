"""Disruption notices: what a Node or a Pod says about the pods' coming end, read without I/O.

Kubernetes and the tools around it announce most disruptions before they happen: a cordon, a
taint that cluster-autoscaler, Karpenter, a cloud provider or a termination handler puts on a
Node, a node condition, a Pod's ``DisruptionTarget`` condition. `node_notice` and `pod_notice`
turn each into a `Notice`: a stable ``source`` id, a sentence for Events and Ray's drain message,
the ``deadline`` by which the pods are gone anyway, and whether the end is ``hard`` (the pods go
whatever Ray says) or soft (Ray may take as long as its work needs).

Taints recognised, with who sets them:

- ``spec.unschedulable`` and the ``node.kubernetes.io/unschedulable`` taint (the node lifecycle
  controller mirrors the field): ``kubectl cordon``, ``kubectl drain``, node upgrades. Soft, no
  deadline.
- ``ToBeDeletedByClusterAutoscaler`` (cluster-autoscaler, NoSchedule; its value is the Unix time
  in seconds it was added): cluster-autoscaler removes the node and evicts its pods at once,
  each given at most ``--max-graceful-termination-sec`` (600 s by default). Hard; the deadline is
  the taint's time plus `NoticeConfig.cluster_autoscaler_grace`.
  ``DeletionCandidateOfClusterAutoscaler`` (PreferNoSchedule) only marks a candidate that may
  never go: no notice.
- ``karpenter.sh/disrupted`` (Karpenter v1, NoSchedule) and ``karpenter.sh/disruption`` with
  value ``disrupting`` (Karpenter before v1): Karpenter's eviction honours PodDisruptionBudgets
  and ``karpenter.sh/do-not-disrupt`` until the NodeClaim's ``terminationGracePeriod``. Soft; the
  deadline is the Node's ``karpenter.sh/nodeclaim-termination-timestamp`` annotation (RFC 3339),
  none without it.
- ``node.kubernetes.io/out-of-service`` (an administrator, non-graceful node shutdown): the pods
  are deleted at once. Hard, deadline now.
- ``node.cloudprovider.kubernetes.io/shutdown`` (the cloud node lifecycle controller: the cloud
  says the instance is shut down). Hard, deadline now.
- ``cloud.google.com/impending-node-termination`` (GKE's and GCE's node termination handling,
  e.g. GoogleCloudPlatform/k8s-node-termination-handler's ``--taint``: a Spot or preemptible VM's
  30 s termination notice), and aws-node-termination-handler's ``aws-node-termination-handler/spot-itn``
  (an EC2 Spot interruption notice, 2 min), ``.../asg-lifecycle-termination`` (an Auto Scaling
  group terminates the instance) and ``.../scheduled-maintenance`` (an EC2 scheduled event). Hard;
  the deadline is the taint's ``timeAdded`` (now without one) plus 30 s on GKE, 120 s on AWS.

Taints and node conditions the user names (`NoticeConfig`, the ``--disruption-notice`` values)
come on top; a configured taint key replaces the built-in reading of the same key.

With no time on the object (no ``timeAdded``, no ``lastTransitionTime``), a deadline is counted
from ``now``: a caller that sees the same notice again should keep the first deadline it got.
``now`` and every deadline are timezone-aware.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from rayscale.common.timefmt import parse_time

__all__ = ["Notice", "NoticeConfig", "node_notice", "parse_notice_flag", "pod_notice"]

CLUSTER_AUTOSCALER_GRACE = 600.0
"""cluster-autoscaler's ``--max-graceful-termination-sec`` default."""

GKE_GRACE = 30.0
"""A GKE Spot or preemptible VM's termination notice."""

AWS_GRACE = 120.0
"""An EC2 Spot interruption notice."""

POD_GRACE = 30.0
"""A pod's ``terminationGracePeriodSeconds`` when its spec gives none."""

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
CA_TAINT = "ToBeDeletedByClusterAutoscaler"
KARPENTER_TAINT = "karpenter.sh/disrupted"
KARPENTER_OLD_TAINT = "karpenter.sh/disruption"
KARPENTER_DEADLINE = "karpenter.sh/nodeclaim-termination-timestamp"
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
SHUTDOWN_TAINT = "node.cloudprovider.kubernetes.io/shutdown"

SPOT_TAINTS: Mapping[str, tuple[float, str]] = {
    "cloud.google.com/impending-node-termination": (GKE_GRACE, "is about to be terminated by Google Cloud"),
    "aws-node-termination-handler/spot-itn": (AWS_GRACE, "has an EC2 Spot interruption notice"),
    "aws-node-termination-handler/asg-lifecycle-termination": (
        AWS_GRACE,
        "is being terminated by its EC2 Auto Scaling group",
    ),
    "aws-node-termination-handler/scheduled-maintenance": (
        AWS_GRACE,
        "has an EC2 scheduled maintenance event",
    ),
}
"""Spot and maintenance notices as taints: key -> (grace in seconds, what it says of the node)."""

POD_REASONS: Mapping[str, str] = {
    "EvictionByEvictionAPI": "evicted through the Eviction API, as kubectl drain and autoscalers evict",
    "PreemptionByScheduler": "preempted by the scheduler for a pod of higher priority",
    "PreemptionByKubeScheduler": "preempted by the scheduler for a pod of higher priority",
    "DeletionByTaintManager": "deleted for a NoExecute taint on its node",
    "DeletionByPodGC": "deleted by the pod garbage collector, its node gone",
    "TerminationByKubelet": "terminated by the kubelet, for node pressure or a node shutdown",
}
"""The reasons of a Pod's ``DisruptionTarget`` condition (``PreemptionByKubeScheduler``: older
Kubernetes' name) and what each says."""


@dataclass(frozen=True, slots=True)
class Notice:
    """One announced disruption of a node's or a pod's pods."""

    source: str  # "cordon", "cluster-autoscaler", ..., "taint:<key>", "condition:<type>", "pod:<reason>"
    message: str  # one sentence naming the node (or pod) and the cause
    deadline: datetime | None  # when the pods are killed anyway; None: no deadline known
    hard: bool  # the pods go whatever Ray says


@dataclass(frozen=True, slots=True)
class NoticeConfig:
    """The notices the user adds: taint keys and node condition types (status "True"), each with
    its grace in seconds (a hard notice) or None (a soft one, no deadline)."""

    taints: Mapping[str, float | None] = field(default_factory=dict)
    conditions: Mapping[str, float | None] = field(default_factory=dict)
    cluster_autoscaler_grace: float = CLUSTER_AUTOSCALER_GRACE


def _time(value: Any) -> datetime | None:
    """A time of an API object (UTC when it names no zone), or None when missing or not a time."""
    try:
        when = parse_time(value)
    except (TypeError, ValueError):
        return None
    return when.replace(tzinfo=UTC) if when is not None and when.tzinfo is None else when


def _aware(now: datetime) -> datetime:
    if now.tzinfo is None:
        raise ValueError(f"now must be timezone-aware, not {now!r}")
    return now


def _after(start: datetime | None, now: datetime, seconds: float) -> datetime:
    return (start or now) + timedelta(seconds=seconds)


def _strongest(notices: Iterator[Notice]) -> Notice | None:
    """The earliest deadline first (none is last); at the same deadline a hard notice first."""
    far = datetime.max.replace(tzinfo=UTC)
    return min(notices, key=lambda n: (n.deadline or far, not n.hard), default=None)


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "?")


def _ca_added(taint: Mapping[str, Any]) -> datetime | None:
    """When cluster-autoscaler put its taint on: its value, Unix seconds; else ``timeAdded``."""
    try:
        return datetime.fromtimestamp(int(str(taint.get("value"))), tz=UTC)
    except (ValueError, OverflowError, OSError):
        return _time(taint.get("timeAdded"))


def _taint_notice(
    taint: Mapping[str, Any], node: Mapping[str, Any], now: datetime, config: NoticeConfig
) -> Notice | None:
    key = str(taint.get("key") or "")
    name = _name(node)
    added = _time(taint.get("timeAdded"))
    if key in config.taints:
        grace = config.taints[key]
        return Notice(
            source=f"taint:{key}",
            message=f"Node {name} has the taint {key}, configured as a disruption notice.",
            deadline=None if grace is None else _after(added, now, grace),
            hard=grace is not None,
        )
    if key == UNSCHEDULABLE_TAINT:
        return Notice("cordon", f"Node {name} is cordoned (taint {key}).", None, hard=False)
    if key == CA_TAINT:
        return Notice(
            source="cluster-autoscaler",
            message=f"Node {name} is being removed by cluster-autoscaler (taint {key}).",
            deadline=_after(_ca_added(taint), now, config.cluster_autoscaler_grace),
            hard=True,
        )
    if key == KARPENTER_TAINT or (key == KARPENTER_OLD_TAINT and taint.get("value") == "disrupting"):
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        return Notice(
            source="karpenter",
            message=f"Node {name} is being disrupted by Karpenter (taint {key}).",
            deadline=_time(annotations.get(KARPENTER_DEADLINE)),
            hard=False,
        )
    if key == OUT_OF_SERVICE_TAINT:
        return Notice("out-of-service", f"Node {name} is out of service (taint {key}).", now, hard=True)
    if key == SHUTDOWN_TAINT:
        message = f"Node {name} is shut down, says its cloud provider (taint {key})."
        return Notice("node-shutdown", message, now, hard=True)
    if key in SPOT_TAINTS:
        grace, says = SPOT_TAINTS[key]
        return Notice("spot", f"Node {name} {says} (taint {key}).", _after(added, now, grace), hard=True)
    return None


def _condition_notice(
    condition: Mapping[str, Any], node: Mapping[str, Any], now: datetime, config: NoticeConfig
) -> Notice | None:
    kind = str(condition.get("type") or "")
    if kind not in config.conditions or condition.get("status") != "True":
        return None
    grace = config.conditions[kind]
    reason = condition.get("reason")
    why = f" ({reason})" if reason else ""
    return Notice(
        source=f"condition:{kind}",
        message=f"Node {_name(node)} has the condition {kind}=True{why}, configured as a disruption notice.",
        deadline=None if grace is None else _after(_time(condition.get("lastTransitionTime")), now, grace),
        hard=grace is not None,
    )


def _node_notices(node: Mapping[str, Any], now: datetime, config: NoticeConfig) -> Iterator[Notice]:
    spec = node.get("spec") or {}
    if spec.get("unschedulable") is True:
        yield Notice("cordon", f"Node {_name(node)} is cordoned (spec.unschedulable).", None, hard=False)
    for taint in spec.get("taints") or ():
        notice = _taint_notice(taint, node, now, config)
        if notice is not None:
            yield notice
    for condition in (node.get("status") or {}).get("conditions") or ():
        notice = _condition_notice(condition, node, now, config)
        if notice is not None:
            yield notice


def node_notice(node: Mapping[str, Any], now: datetime, config: NoticeConfig) -> Notice | None:
    """The strongest disruption notice `node` (a Node as read) gives, or None: the earliest
    deadline first (a notice without one comes last), and at the same deadline a hard notice
    before a soft one."""
    return _strongest(_node_notices(node, _aware(now), config))


def pod_notice(pod: Mapping[str, Any], now: datetime) -> Notice | None:
    """The notice of `pod`'s ``DisruptionTarget`` condition with status "True", or None.

    Every reason is hard: Kubernetes adds the condition only once the pod's deletion is decided
    (an eviction that passed its PodDisruptionBudgets, a preemption, the taint manager, the pod
    garbage collector, the kubelet); the time to hold a disruption off is before it, not after.
    The deadline is the pod's ``deletionTimestamp`` (the deletion's time plus its grace period),
    else the condition's time plus the pod's ``terminationGracePeriodSeconds`` (30 s when unset).
    """
    _aware(now)
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") != "DisruptionTarget" or condition.get("status") != "True":
            continue
        meta = pod.get("metadata") or {}
        reason = str(condition.get("reason") or "")
        says = POD_REASONS.get(reason, "about to be disrupted")
        pod_ref = f"{meta.get('namespace') or ''}/{_name(pod)}"
        node = (pod.get("spec") or {}).get("nodeName")
        where = f" on node {node}" if node else ""
        why = f", reason {reason}" if reason else ""
        deadline = _time(meta.get("deletionTimestamp"))
        if deadline is None:
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
            seconds = float(grace) if isinstance(grace, int | float) else POD_GRACE
            deadline = _after(_time(condition.get("lastTransitionTime")), now, seconds)
        return Notice(
            source=f"pod:{reason or 'DisruptionTarget'}",
            message=f"Pod {pod_ref}{where} is {says} (condition DisruptionTarget{why}).",
            deadline=deadline,
            hard=True,
        )
    return None


_QUALIFIED = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
"""A taint key or a condition type: an optional DNS subdomain prefix and "/", then a name."""

FORMS = "taint:KEY[=SECONDS], condition:TYPE[=SECONDS] or cluster-autoscaler-grace=SECONDS"


def _seconds(value: str, text: str, form: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(
            f"--disruption-notice {value!r}: {text!r} is not a number of seconds, 0 or more (expected {form})"
        )
    return seconds


NAMED: Mapping[str, tuple[str, str, str]] = {
    "taint": ("taint key", "taint:KEY[=SECONDS]", "example.com/reclaim"),
    "condition": ("condition type", "condition:TYPE[=SECONDS]", "SpotTermination"),
}
"""The values that name a taint or a condition: what the name is, the form, an example."""


def _named(value: str, kind: str, rest: str) -> tuple[str, float | None]:
    what, form, example = NAMED[kind]
    name, sep, text = rest.partition("=")
    prefix = name.split("/")[0] if "/" in name else ""
    if not _QUALIFIED.match(name) or len(prefix) > 253:
        raise ValueError(
            f"--disruption-notice {value!r}: {name!r} is not a {what} such as {example} (expected {form})"
        )
    return name, _seconds(value, text, form) if sep else None


def parse_notice_flag(values: Sequence[str]) -> NoticeConfig:
    """The `NoticeConfig` of the repeated ``--disruption-notice`` values: ``taint:KEY[=SECONDS]``,
    ``condition:TYPE[=SECONDS]`` (without SECONDS, a soft notice) and
    ``cluster-autoscaler-grace=SECONDS``. Raises ValueError naming a bad value and the form
    expected; a taint, a condition or the grace given twice is an error too."""
    named: dict[str, dict[str, float | None]] = {kind: {} for kind in NAMED}
    grace: float | None = None
    for value in values:
        kind, _, rest = value.partition(":")
        if kind in named:
            name, seconds = _named(value, kind, rest)
            if name in named[kind]:
                raise ValueError(f"--disruption-notice {value!r}: the {kind} {name} is given twice")
            named[kind][name] = seconds
        elif value.startswith("cluster-autoscaler-grace="):
            if grace is not None:
                raise ValueError(f"--disruption-notice {value!r}: cluster-autoscaler-grace is given twice")
            grace = _seconds(value, value.partition("=")[2], "cluster-autoscaler-grace=SECONDS")
        else:
            raise ValueError(f"--disruption-notice {value!r}: expected {FORMS}")
    return NoticeConfig(
        taints=named["taint"],
        conditions=named["condition"],
        cluster_autoscaler_grace=CLUSTER_AUTOSCALER_GRACE if grace is None else grace,
    )
