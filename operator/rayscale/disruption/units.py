"""Which of a RayCluster's pods a disruption notice touches, as units that go as a whole (pure).

A unit is what rayscale drains and deletes together: a multi-host replica (every pod that carries
its ``ray.io/worker-group-replica-name``), or one worker pod. A unit is disrupted when any of its
hosts has a notice, its node's (`notice.node_notice`) or its own (`notice.pod_notice`); its
notice is the strongest of its hosts' (the earliest deadline, a hard one first at the same
deadline), so the earliest deadline of a replica's hosts applies to the whole replica.

Which groups are multi-host comes from the caller (``numOfHosts``, as
`rayscale.cluster.replicas.num_hosts` reads it); a group it does not name is read from the labels
alone. A host of a multi-host group without the replica label (adopted from KubeRay before v1.6,
when nothing said which pods formed a replica) is a unit of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from rayscale.common import labels as L
from rayscale.common.pods import is_head, is_terminating, is_worker, pod_group, pod_labels, pod_name
from rayscale.common.types import Obj
from rayscale.disruption.notice import Notice

__all__ = ["Host", "RayNode", "Unit", "disrupted_units", "head_notices", "strongest"]


@dataclass(frozen=True, slots=True)
class RayNode:
    """Ray's view of a pod's live node: its id (hex), whether it is idle, whether it is draining."""

    node_id: str
    idle: bool
    draining: bool


@dataclass(frozen=True, slots=True)
class Host:
    """One pod of a disrupted unit."""

    pod: str
    notice: Notice | None  # its own: its node's or its pod's (None: it goes with its replica)
    ray: RayNode | None  # None: Ray has no live node for the pod
    terminating: bool  # the pod has a deletionTimestamp: it is going already


@dataclass(frozen=True, slots=True)
class Unit:
    """A disrupted replica (or single pod) of a worker group."""

    group: str
    name: str  # the replica name, or the pod name of a single-host unit
    multi_host: bool
    hosts: tuple[Host, ...]  # by pod name
    notice: Notice  # the strongest of its hosts' notices

    @property
    def live(self) -> tuple[Host, ...]:
        """The hosts not terminating yet: the ones rayscale drains and deletes."""
        return tuple(h for h in self.hosts if not h.terminating)


_FAR = datetime.max.replace(tzinfo=UTC)


def strongest(notices: Iterable[Notice | None]) -> Notice | None:
    """The earliest deadline first (none is last); at the same deadline a hard notice first."""
    found = [n for n in notices if n is not None]
    return min(found, key=lambda n: (n.deadline or _FAR, not n.hard), default=None)


def _own_notice(pod: Obj, by_node: Mapping[str, Notice], by_pod: Mapping[str, Notice]) -> Notice | None:
    node = (pod.get("spec") or {}).get("nodeName")
    return strongest((by_node.get(node) if node else None, by_pod.get(pod_name(pod))))


def _replica(pod: Obj, hosts_per_group: Mapping[str, int]) -> str | None:
    """The multi-host replica `pod` is a host of, or None (a unit of its own)."""
    hosts = hosts_per_group.get(pod_group(pod))
    if hosts is not None and hosts <= 1:
        return None
    return pod_labels(pod).get(L.REPLICA_NAME) or None


def disrupted_units(
    pods: Sequence[Obj],
    by_node: Mapping[str, Notice],
    by_pod: Mapping[str, Notice],
    ray: Mapping[str, RayNode],
    hosts_per_group: Mapping[str, int],
) -> tuple[Unit, ...]:
    """The worker units of `pods` with a notice on any host, by group and name."""
    members: dict[tuple[str, str, bool], list[Host]] = {}
    for pod in pods:
        if not is_worker(pod):
            continue
        name = pod_name(pod)
        replica = _replica(pod, hosts_per_group)
        key = (pod_group(pod), replica or name, replica is not None)
        host = Host(name, _own_notice(pod, by_node, by_pod), ray.get(name), is_terminating(pod))
        members.setdefault(key, []).append(host)
    units = []
    for (group, name, multi_host), hosts in sorted(members.items()):
        notice = strongest(h.notice for h in hosts)
        if notice is not None:
            units.append(Unit(group, name, multi_host, tuple(sorted(hosts, key=lambda h: h.pod)), notice))
    return tuple(units)


def head_notices(
    pods: Sequence[Obj], by_node: Mapping[str, Notice], by_pod: Mapping[str, Notice]
) -> tuple[tuple[str, Notice], ...]:
    """(pod, notice) of each head pod with a notice of its node's or its own."""
    found = ((pod_name(p), _own_notice(p, by_node, by_pod)) for p in pods if is_head(p))
    return tuple((name, notice) for name, notice in found if notice is not None)
