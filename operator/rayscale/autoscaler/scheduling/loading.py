"""The scheduler's input: a snapshot's hosts as the fleet's replicas and the bins that take work.

Hosts are read in Ray's order (the head, then the nodes as listed). A replica's hosts take the
capacities of their places in it, counted in the order listed (host 0, a TPU slice's head, first;
terminating hosts keep their places). Draining and dead hosts take no work; a replica with a
host drained by someone else while it works is held (``Fleet.hold``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rayscale.autoscaler.scheduling.catalog import HEAD_GROUP, Catalog
from rayscale.autoscaler.scheduling.fleet import Fleet, Host, HostKind
from rayscale.autoscaler.scheduling.greedy import Bin, Load
from rayscale.autoscaler.scheduling.model import (
    Node,
    NodeState,
    RemovalCause,
    Snapshot,
    drained_while_working,
)
from rayscale.autoscaler.scheduling.space import Vec

__all__ = ["by_group", "free_vec", "load"]

LOST = {NodeState.DRAINING: RemovalCause.DRAINED, NodeState.DEAD: RemovalCause.NODE_DEAD}


def by_group(bins: Iterable[Bin]) -> dict[int, list[Bin]]:
    """Hosts by group, groups in the order they first appear (as Ray lists them at its caps)."""
    out: dict[int, list[Bin]] = {}
    for b in bins:
        out.setdefault(b.group, []).append(b)
    return out


def free_vec(catalog: Catalog, capacity: Vec, available: Mapping[str, float] | None) -> Vec:
    """Free resources reported by Ray, capped at capacity; None: all free."""
    if available is None:
        return capacity
    space = catalog.space
    free = tuple(min(a, c) for a, c in zip(space.vec(available), capacity, strict=True))
    return tuple(  # absent implicit resources count as free (as in Ray)
        capacity[i] if i in space.implicit and space.names[i] not in available else a
        for i, a in enumerate(free)
    )


def _host(catalog: Catalog, node: Node, capacity: Vec, free: Vec) -> Host:
    running = node.state is NodeState.RUNNING
    used = [(c - f) / c for c, f in zip(capacity, free, strict=True) if c > 0]
    return Host(
        node.name,
        catalog.by_name[node.group].index,
        HostKind.PENDING if node.state is NodeState.PENDING else HostKind.RUNNING,
        -1,
        node.idle_seconds if running else 0.0,
        node.pending_seconds if node.state is NodeState.PENDING else 0.0,
        sum(used) / len(used) if used else 0.0,
        booting=node.booting,
        refused=node.refused and node.state is NodeState.PENDING,
        lost=LOST.get(node.state),
    )


def load(snapshot: Snapshot, catalog: Catalog, fleet: Fleet) -> list[Bin]:
    """The fleet's replicas and, in Ray's order (the head, then the nodes as listed), the
    hosts that can take work: draining and dead hosts take none."""
    by_replica: dict[tuple[str, str], list[tuple[int, Host, Vec, int, Vec]]] = {}
    ranks: dict[tuple[str, str], int] = {}  # hosts of each replica listed so far
    for position, node in enumerate(snapshot.nodes):
        info = catalog.by_name.get(node.group)
        if info is None:
            continue
        key = (node.group, node.replica or node.name)
        rank = ranks[key] = ranks.get(key, -1) + 1  # host 0 (a slice's head) is listed first
        if node.state is NodeState.TERMINATING:
            continue  # terminating hosts absorb nothing and are not counted
        members = by_replica.setdefault(key, [])
        capacity = info.hosts[min(rank, info.num_hosts - 1)]
        free = free_vec(catalog, capacity, node.available if node.state is NodeState.RUNNING else None)
        labels = catalog.label_set(node.labels, info.index)
        members.append((position, _host(catalog, node, capacity, free), free, labels, capacity))
    found: list[tuple[int, Bin]] = []
    for (group, name), members in sorted(by_replica.items()):
        info = catalog.by_name[group]
        if any(drained_while_working(snapshot.nodes[p]) for p, *_ in members):
            fleet.hold(info.index, len(members))
            continue
        rid = fleet.add_existing(info.index, [m[1] for m in members], name)
        hosts = fleet.replicas[rid].hosts
        for host_id, (position, host, free, labels, total) in zip(hosts, members, strict=True):
            if host.lost is None:
                bin_ = Bin(
                    host_id,
                    info.index,
                    host.rank,
                    total,
                    labels,
                    info.spec.priority,
                    (Load(free), Load(total)),
                    running=host.rank == HostKind.RUNNING,
                )
                found.append((position, bin_))
    order = [b for _, b in sorted(found, key=lambda item: item[0])]
    head = _load_head(snapshot, catalog, fleet)
    order = ([head] if head is not None else []) + order
    for position, b in enumerate(b for bins in by_group(order).values() for b in bins):
        fleet.hosts[b.host].position = position
    return order


def _load_head(snapshot: Snapshot, catalog: Catalog, fleet: Fleet) -> Bin | None:
    """The head: its free resources take work, its whole capacity counts for constraints."""
    head = snapshot.head
    if head is None:
        return None
    total = catalog.space.capacity(head.resources)
    free = free_vec(catalog, total, head.available)
    hid = fleet.add_head()
    labels = catalog.label_set(head.labels)
    return Bin(hid, HEAD_GROUP, HostKind.HEAD, total, labels, 0, (Load(free), Load(total)), running=True)
