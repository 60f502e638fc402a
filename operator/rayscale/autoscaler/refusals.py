"""Which worker groups Kubernetes refuses to let grow now, and why (pure).

Two signals, each treated as a failed launch the moment it is seen, not after a timeout:

- **a ResourceQuota refused one of the group's pods**: the controller's create answered 403
  ``exceeded quota: <name>, requested: ..., used: ..., limited: ...``. The refusal is kept until
  the quota named has room again for what was asked (`has_room`), a pod of the group is created,
  or `RETRY_SECONDS` pass (then the group is tried once more, and a new refusal starts it over);
- **a Kueue workload slice not admitted**: under Kueue's elastic jobs the new pods of a scale-up
  carry the scheduling gate ``kueue.x-k8s.io/elastic-job`` until the Workload slice that counts
  them is admitted; when Kueue says it cannot (``QuotaReserved=False``: "couldn't assign flavors to
  pod set <group>: insufficient quota ..."), the group is refused, its gated pods fail to launch,
  and the refusal is kept as a quota's is, for `RETRY_SECONDS`;
- **a scale gate**: an entry in the group's ``scaleStrategy.scaleGate`` (Kueue's
  ``kueue.k8s.io/quota-exceeded``, a maintenance controller's, anyone's), for as long as any is
  there. rayscale reads gates and never writes them.

What a refusal does (snapshot.py, the scheduler, the reporter): the group's replicas that no pod
holds yet, beyond its ``minReplicas``, fail in this round; the demand they held moves to the next
group that can hold it in the same round; the group launches nothing more while refused (no
exponential backoff: the refusal is the signal, and its end lets the group grow at once); unmet
demand that only the group could hold says ``QUOTA``; ``status.autoscaler`` carries the
``QuotaExceeded`` condition naming each refused group, set while any is and cleared (``False``)
when none is.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from rayscale.api.raycluster import RayClusterSpec
from rayscale.autoscaler.scheduling.model import Group, Node, NodeState
from rayscale.common.conditions import find_condition
from rayscale.common.timefmt import rfc3339
from rayscale.common.types import Obj
from rayscale.resources import QuantityError, parse_quantity

__all__ = [
    "CONDITION",
    "RETRY_SECONDS",
    "QuotaRefusal",
    "Refused",
    "gate_refusals",
    "gated_refused",
    "has_room",
    "is_quota_refusal",
    "kueue_refusals",
    "parse_refusal",
    "quota_condition",
    "refused_groups",
]

CONDITION = "QuotaExceeded"
# A quota refusal whose end was never seen (the quota could not be read, or it was raised in a
# way the status does not show) is dropped after this long: the group is tried once more. The
# first backoff of a failed launch, as cluster-autoscaler's.
RETRY_SECONDS = 300.0

_KUEUE = re.compile(r"(?:couldn't|failed to) assign flavors to pod set (?P<podset>[^:\s]+): ")
_QUOTA = re.compile(r"exceeded quota: (?P<name>[^,\s]+), requested: (?P<requested>\S*?), used: ")


@dataclasses.dataclass(frozen=True)
class QuotaRefusal:
    """A pod create of `group` refused by a ResourceQuota (the API server's `message`)."""

    group: str
    message: str
    quota: str | None  # the ResourceQuota it names
    requested: Mapping[str, str]  # resource -> the quantity the pod asked, as the message says
    since: datetime
    source: str = "ResourceQuota"  # or "Kueue": its Workload slice was not admitted


@dataclasses.dataclass(frozen=True)
class Refused:
    """Why one group cannot grow now: its quota refusal and the names of its scale gates."""

    group: str
    quota: QuotaRefusal | None = None
    gates: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        return self.quota.source if self.quota is not None else "ScaleGate"

    def text(self) -> str:
        parts = []
        if self.quota is not None and self.quota.source == "Kueue":
            parts.append(f"Kueue did not admit the workload slice of its new pods ({self.quota.message})")
        elif self.quota is not None:
            parts.append(f"ResourceQuota {self.quota.quota or '?'} refused its pods ({self.quota.message})")
        if self.gates:
            parts.append(f"scaleGate {', '.join(self.gates)}")
        return f"group {self.group}: {'; '.join(parts)}"


def is_quota_refusal(status: int, message: str) -> bool:
    """Whether a failed pod create was a ResourceQuota's refusal (403, ``exceeded quota``)."""
    return status == 403 and "exceeded quota" in message


def parse_refusal(group: str, message: str, since: datetime) -> QuotaRefusal:
    """The refusal `message` of a pod create in `group`, with the quota and amounts it names."""
    found = _QUOTA.search(message)
    requested: dict[str, str] = {}
    if found is not None:
        for item in found["requested"].split(","):
            name, _, amount = item.partition("=")
            if name and amount:
                requested[name] = amount
    return QuotaRefusal(group, message, found["name"] if found else None, requested, since)


def has_room(refusal: QuotaRefusal, quota: Obj) -> bool:
    """Whether `quota` (the ResourceQuota the refusal names, as read now) has room for what the
    refused pod asked: ``hard - used >= requested`` for every resource the message named. False
    when that cannot be told (nothing named, a quantity that does not parse, a resource the quota's
    status does not list)."""
    status = quota.get("status") or {}
    hard, used = status.get("hard") or {}, status.get("used") or {}
    if not refusal.requested:
        return False
    try:
        for name, amount in refusal.requested.items():
            if name not in hard:
                return False
            if parse_quantity(hard[name]) - parse_quantity(used.get(name, "0")) < parse_quantity(amount):
                return False
    except QuantityError:
        return False
    return True


def kueue_refusals(workloads: Sequence[Obj]) -> dict[str, str]:
    """Pod set -> why Kueue cannot admit it, from the newest of a RayCluster's Workloads that is
    neither admitted nor finished, when its ``QuotaReserved`` is ``False`` (Kueue's words: "couldn't
    assign flavors to pod set <name>: ...", one clause per pod set, "; " between)."""
    live = [w for w in workloads if not find_condition(w.get("status"), "Finished")]
    if not live:
        return {}
    newest = max(live, key=lambda w: str((w.get("metadata") or {}).get("creationTimestamp") or ""))
    reserved = find_condition(newest.get("status"), "QuotaReserved")
    if reserved is None or reserved.get("status") != "False":
        return {}
    out: dict[str, str] = {}
    for clause in str(reserved.get("message") or "").split("; "):
        found = _KUEUE.match(clause)
        if found is not None:
            out[found["podset"]] = clause
    return out


def gate_refusals(spec: RayClusterSpec) -> dict[str, tuple[str, ...]]:
    """Group -> the names of the scale gates on it (only groups with at least one)."""
    out: dict[str, tuple[str, ...]] = {}
    for group in spec.workers:
        gates = (group.scale_strategy.scale_gate if group.scale_strategy else None) or ()
        if gates:
            out[group.group_name] = tuple(g.name for g in gates)
    return out


def refused_groups(spec: RayClusterSpec, quota: Mapping[str, QuotaRefusal]) -> dict[str, Refused]:
    """Every group of `spec` refused now, by a quota (`quota`: the refusals kept) or a gate."""
    gates = gate_refusals(spec)
    names = [g.group_name for g in spec.workers]
    return {
        name: Refused(name, quota.get(name), gates.get(name, ()))
        for name in names
        if name in quota or name in gates
    }


def quota_condition(refused: Sequence[Refused], now: datetime, old: Obj | None) -> Obj | None:
    """The ``QuotaExceeded`` condition of ``status.autoscaler``: ``True`` naming each refused group
    while any is; ``False`` once none is and it was ``True``; None when it never was. `old`: the
    ``status.autoscaler`` written, whose condition keeps its time while its status holds."""
    was = find_condition(old, CONDITION)
    if not refused:
        if was is None:
            return None
        status, reason, message = "False", "QuotaAvailable", "no worker group is refused by a quota or gated"
    else:
        reasons = sorted({r.reason for r in refused})
        status, reason = "True", reasons[0] if len(reasons) == 1 else "ResourceQuotaAndScaleGate"
        message = "; ".join(r.text() for r in sorted(refused, key=lambda r: r.group))
    since = (was or {}).get("lastTransitionTime") if (was or {}).get("status") == status else None
    return {
        "type": CONDITION,
        "status": status,
        "reason": reason,
        "message": message[:2000],
        "lastTransitionTime": since or rfc3339(now),
    }


LIVE = (NodeState.RUNNING, NodeState.PENDING)  # hosts that count towards a group's minimum


def gated_refused(nodes: list[Node], groups: Mapping[str, Group], gated: set[str]) -> list[Node]:
    """The pending hosts a scheduling gate holds in a refused group (Kueue's gate, until the slice
    it cannot admit is admitted) are refused, beyond those the group's minReplicas keeps."""
    out = []
    kept: dict[str, int] = {}
    for node in nodes:
        group = groups[node.group]
        if group.refused and node.state is NodeState.PENDING and node.name in gated:
            live = sum(1 for n in nodes if n.group == group.name and n.name not in gated and n.state in LIVE)
            keep = group.min_replicas * group.num_of_hosts - live
            if kept.get(group.name, 0) >= keep:
                node = dataclasses.replace(node, refused=True)
            else:
                kept[group.name] = kept.get(group.name, 0) + 1
        out.append(node)
    return out
