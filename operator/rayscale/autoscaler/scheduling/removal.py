"""Which existing replicas go: failed launches, lost Ray nodes, caps, and idle ones.

Order of removal when a cap forces a choice (as Ray's): replicas without Ray (a host still
pending) first, then the longest idle, then the least used, then the earlier in Ray's list of
hosts (grouped by group, in the order the snapshot lists them).
"""

from __future__ import annotations

from collections.abc import Iterator

from rayscale.autoscaler.scheduling.fleet import Fleet, Host, HostKind, Replica
from rayscale.autoscaler.scheduling.model import RemovalCause

Removed = dict[int, RemovalCause]  # replica id -> cause


def _order(fleet: Fleet, rid: int) -> tuple[bool, float, float, int, str]:
    replica = fleet.replicas[rid]
    hosts = [fleet.hosts[h] for h in replica.hosts]
    has_ray = all(h.rank == HostKind.RUNNING for h in hosts)
    idle = min(h.idle_seconds for h in hosts) if has_ray else 0.0
    used = sum(h.used_share for h in hosts) / len(hosts)
    return (has_ray, -idle, used, min(h.position for h in hosts), replica.name or "")


def _cap_order(fleet: Fleet, rid: int) -> tuple[bool, float, float, int, str]:
    """A replica's place in Ray's termination order at a cap: that of its first host in it (no Ray
    node first, longest idle, least used). Ray cuts single hosts; KubeRay removes the replica of
    a host cut, so a wide replica with one long-idle host goes before a busy single host."""
    replica = fleet.replicas[rid]
    return min(
        (
            h.rank == HostKind.RUNNING,
            -h.idle_seconds if h.rank == HostKind.RUNNING else 0.0,
            h.used_share,
            h.position,
            replica.name or "",
        )
        for h in (fleet.hosts[i] for i in replica.hosts)
    )


def _existing(fleet: Fleet, group: int | None = None) -> Iterator[int]:
    for rid, r in enumerate(fleet.replicas):
        if not r.removed and r.name is not None and (group is None or r.group == group):
            yield rid


def _timed_out(fleet: Fleet, host: Host) -> bool:
    """A pending host past its limit (the boot limit once its pod is scheduled, else provisioning),
    or one whose pod Kubernetes refuses."""
    if host.rank != HostKind.PENDING:
        return False
    options = fleet.options
    limit = options.max_node_boot_seconds if host.booting else options.max_node_provision_seconds
    return host.refused or host.pending_seconds > limit


def launch_failures(fleet: Fleet, removed: Removed) -> None:
    """Replicas with a host pending past its limit go (LAUNCH_FAILED); their group backs off."""
    for rid in list(_existing(fleet)):
        replica = fleet.replicas[rid]
        if any(_timed_out(fleet, fleet.hosts[h]) for h in replica.hosts):
            fleet.remove(rid)
            fleet.backoff[replica.group] = True
            removed[rid] = RemovalCause.LAUNCH_FAILED


def lost_nodes(fleet: Fleet, removed: Removed) -> None:
    """Whole replicas with a draining host (DRAINED) or else a dead one (NODE_DEAD); no backoff."""
    for rid in list(_existing(fleet)):
        causes = {fleet.hosts[h].lost for h in fleet.replicas[rid].hosts}
        for cause in (RemovalCause.DRAINED, RemovalCause.NODE_DEAD):
            if cause in causes:
                fleet.remove(rid)
                removed[rid] = cause
                break


def over_max_replicas(fleet: Fleet, removed: Removed) -> set[int]:
    """Groups above maxReplicas lose their surplus (MAX_REPLICAS); returns those groups."""
    trimmed = set()
    for info in fleet.catalog.groups:
        surplus = fleet.live(info.index) - info.spec.max_replicas
        if surplus > 0:
            trimmed.add(info.index)
            for rid in sorted(_existing(fleet, info.index), key=lambda r: _order(fleet, r))[:surplus]:
                fleet.remove(rid)
                removed[rid] = RemovalCause.MAX_REPLICAS
    return trimmed


def over_max_workers(fleet: Fleet, removed: Removed) -> bool:
    """The cluster above maxWorkers loses replicas (MAX_WORKERS), never below a group's
    minReplicas: those of the hosts Ray's termination order cuts first (`_cap_order`); returns
    whether it was above."""
    cap = fleet.options.max_workers
    if cap is None or fleet.host_count() <= cap:
        return False
    for rid in sorted(_existing(fleet), key=lambda r: _cap_order(fleet, r)):
        if fleet.host_count() <= cap:
            break
        group = fleet.replicas[rid].group
        if fleet.live(group) - 1 < fleet.catalog.groups[group].spec.min_replicas:
            continue
        fleet.remove(rid)
        removed[rid] = RemovalCause.MAX_WORKERS
    return True


def _timeout(fleet: Fleet, replica: Replica) -> float | None:
    own = fleet.catalog.groups[replica.group].spec.idle_timeout_seconds
    return own if own is not None else fleet.options.idle_timeout_seconds


def idle(fleet: Fleet, removed: Removed) -> None:
    """Running replicas idle strictly longer than their timeout, not needed this pass, above min."""
    for rid in sorted(_existing(fleet), key=lambda r: _order(fleet, r)):
        replica = fleet.replicas[rid]
        timeout = _timeout(fleet, replica)
        if timeout is None or replica.worked:
            continue
        hosts = [fleet.hosts[h] for h in replica.hosts]
        if not all(h.rank == HostKind.RUNNING and h.idle_seconds > timeout for h in hosts):
            continue
        if fleet.live(replica.group) - 1 < fleet.catalog.groups[replica.group].spec.min_replicas:
            continue
        fleet.remove(rid)
        removed[rid] = RemovalCause.IDLE
