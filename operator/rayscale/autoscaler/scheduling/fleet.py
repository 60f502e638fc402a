"""The worker hosts of one pass, grouped into replicas, and the room each group has to grow.

A replica is ``numOfHosts`` hosts counted, launched, idle-checked and removed as one unit.
The head node is a host too (so that pools can hold it) but belongs to no replica and is
never counted, launched or removed.
Room for a launch is limited by the group's ``maxReplicas``, the cluster-wide worker cap,
backoff and, in Conservative mode, the number of hosts already in flight.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from rayscale.autoscaler.scheduling.catalog import HEAD_GROUP, Catalog
from rayscale.autoscaler.scheduling.model import Options, RemovalCause, Target, UnmetReason, UpscalingMode


class HostKind(IntEnum):
    """What a host is, in the order output lists them (and an index into per-kind counts)."""

    HEAD = 0
    RUNNING = 1
    PENDING = 2
    NEW = 3  # launched by this pass

    @property
    def target(self) -> Target:
        """Where work placed on a host of this kind lands (the decision's name for it)."""
        return _TARGETS[self]


_TARGETS = (Target.HEAD, Target.RUNNING, Target.PENDING, Target.NEW)  # by HostKind

NO_REPLICA = -1  # the head's replica

CONSERVATIVE_MIN_IN_FLIGHT = 5


@dataclass(slots=True)
class Host:
    name: str | None  # None for hosts this pass launches
    group: int
    rank: HostKind
    replica: int
    idle_seconds: float = 0.0
    pending_seconds: float = 0.0
    used_share: float = 0.0  # mean used/capacity, for the termination order
    booting: bool = False  # pending and scheduled: the boot limit applies, not the provisioning one
    refused: bool = False  # pending, its pod refused by Kubernetes: it fails to launch now
    lost: RemovalCause | None = None  # DRAINED or NODE_DEAD: its Ray node is going or gone
    position: int = 1 << 30  # place in Ray's list of hosts: ties in the removal order go first


@dataclass(slots=True)
class Replica:
    group: int
    hosts: list[int]
    name: str | None
    removed: bool = False
    worked: bool = False  # got demand, a gang bundle or a constraint bundle this pass


@dataclass(slots=True)
class Fleet:
    catalog: Catalog
    options: Options
    hosts: list[Host] = field(default_factory=list)
    replicas: list[Replica] = field(default_factory=list)
    existing: list[int] = field(default_factory=list)  # per group: live replicas found
    removed: list[int] = field(default_factory=list)  # per group: replicas removed this pass
    launched: list[int] = field(default_factory=list)  # per group: replicas launched this pass
    # per group: replicas kept by a host drained by someone else while it works (`hold`)
    held: list[int] = field(default_factory=list)
    held_hosts: int = 0
    backoff: list[bool] = field(default_factory=list)
    live_hosts: list[int] = field(default_factory=lambda: [0, 0, 0, 0])  # by HostKind, removals excluded
    _saved: tuple[int, int, list[int], list[int]] | None = None

    def __post_init__(self) -> None:
        n = len(self.catalog.groups)
        self.existing = [0] * n
        self.removed = [0] * n
        self.launched = [0] * n
        self.held = [0] * n
        self.backoff = [g.spec.backoff for g in self.catalog.groups]

    # -- counts ------------------------------------------------------------------
    def live(self, group: int) -> int:
        """Replicas of the group after this pass's removals and launches."""
        return self.existing[group] - self.removed[group] + self.launched[group]

    def host_count(self, rank: HostKind | None = None) -> int:
        return sum(self.live_hosts) if rank is None else self.live_hosts[rank]

    def pods(self, group: int) -> int:
        """Replicas of the group whose pods exist or are launched: the live ones and the held."""
        return self.live(group) + self.held[group]

    def _in_flight(self) -> int:
        return self.live_hosts[HostKind.PENDING] + self.live_hosts[HostKind.NEW]

    def blocked(self, group: int, minimum: bool = False) -> UnmetReason | None:
        """Why the group cannot launch one more replica now, or None if it can. `minimum`: the
        replica keeps the group's minReplicas, which a backoff does not hold back (KubeRay's
        controller keeps minReplicas whatever the autoscaler writes)."""
        info = self.catalog.groups[group]
        if info.spec.refused and not minimum:
            return UnmetReason.QUOTA
        if self.backoff[group] and not minimum:
            return UnmetReason.BACKOFF
        if self.pods(group) + 1 > info.spec.max_replicas:
            return UnmetReason.MAX_REPLICAS
        cap = self.options.max_workers
        if cap is not None and self.host_count() + self.held_hosts + info.num_hosts > cap:
            return UnmetReason.MAX_WORKERS
        if self.options.upscaling_mode is UpscalingMode.CONSERVATIVE:
            in_flight = self._in_flight()
            limit = max(CONSERVATIVE_MIN_IN_FLIGHT, self.host_count(HostKind.RUNNING))
            if in_flight and in_flight + info.num_hosts > limit:
                return UnmetReason.UPSCALING_LIMIT
        return None

    def room(self, group: int, wanted: int, minimum: bool = False) -> int:
        """How many of ``wanted`` new replicas the group may launch now (at least 0)."""
        info = self.catalog.groups[group]
        if wanted <= 0 or self.blocked(group, minimum) is not None:
            return 0
        room = min(wanted, info.spec.max_replicas - self.pods(group))
        cap = self.options.max_workers
        if cap is not None:
            room = min(room, (cap - self.host_count() - self.held_hosts) // info.num_hosts)
        if self.options.upscaling_mode is UpscalingMode.CONSERVATIVE:
            in_flight = self._in_flight()
            limit = max(CONSERVATIVE_MIN_IN_FLIGHT, self.host_count(HostKind.RUNNING))
            room = min(room, max((limit - in_flight) // info.num_hosts, 0 if in_flight else 1))
        return max(room, 0)

    # -- changes -----------------------------------------------------------------
    def add_head(self) -> int:
        """The head as a host of no replica; returns its host id."""
        self.hosts.append(Host("", HEAD_GROUP, HostKind.HEAD, NO_REPLICA))
        return len(self.hosts) - 1

    def mark_worked(self, host: int) -> None:
        """The host got work, a gang bundle or a constraint bundle: its replica is not idle."""
        rid = self.hosts[host].replica
        if rid != NO_REPLICA:
            self.replicas[rid].worked = True

    def add_existing(self, group: int, hosts: list[Host], name: str | None) -> int:
        rid = len(self.replicas)
        ids = []
        for h in hosts:
            h.replica = rid
            ids.append(len(self.hosts))
            self.hosts.append(h)
        self.replicas.append(Replica(group, ids, name))
        self.existing[group] += 1
        self.live_hosts[hosts[0].rank] += len(hosts)
        return rid

    def hold(self, group: int, hosts: int) -> None:
        """A replica of the group that stays, takes no work and is neither counted nor removed:
        one of its hosts was drained by someone else while it works."""
        self.held[group] += 1
        self.held_hosts += hosts

    def launch(self, group: int) -> int:
        """Add one new replica of the group; returns its id."""
        rid = len(self.replicas)
        ids = []
        for _ in self.catalog.groups[group].hosts:
            ids.append(len(self.hosts))
            self.hosts.append(Host(None, group, HostKind.NEW, rid))
        self.replicas.append(Replica(group, ids, None, worked=True))
        self.launched[group] += 1
        self.live_hosts[HostKind.NEW] += len(ids)
        return rid

    def launch_copies(self, group: int, copies: int) -> list[int]:
        """Add ``copies`` new replicas of the group; returns their ids."""
        if copies <= 0:
            return []
        width = len(self.catalog.groups[group].hosts)
        first_rid, first_host = len(self.replicas), len(self.hosts)
        rids = list(range(first_rid, first_rid + copies))
        self.hosts += [Host(None, group, HostKind.NEW, rid) for rid in rids for _ in range(width)]
        ids = iter(range(first_host, len(self.hosts)))
        self.replicas += [Replica(group, [next(ids) for _ in range(width)], None, worked=True) for _ in rids]
        self.launched[group] += copies
        self.live_hosts[HostKind.NEW] += copies * width
        return rids

    def count_copies(self, group: int, copies: int) -> None:
        """Count ``copies`` new replicas of the group without building them: for a launch that
        is only counted, then rolled back."""
        self.launched[group] += copies
        self.live_hosts[HostKind.NEW] += copies * len(self.catalog.groups[group].hosts)

    def remove(self, rid: int) -> None:
        replica = self.replicas[rid]
        replica.removed = True
        self.removed[replica.group] += 1
        self.live_hosts[self.hosts[replica.hosts[0]].rank] -= len(replica.hosts)

    def reuse(self, cut: int, new: int) -> None:
        """Keep replica ``cut`` (removed this pass) instead of ``new`` (launched this pass, of
        the same width): one removal and one launch fewer, the same hosts counted."""
        old, fresh = self.replicas[cut], self.replicas[new]
        old.removed, old.worked, fresh.removed = False, True, True
        self.removed[old.group] -= 1
        self.launched[fresh.group] -= 1
        self.live_hosts[self.hosts[old.hosts[0]].rank] += len(old.hosts)
        self.live_hosts[HostKind.NEW] -= len(fresh.hosts)

    def checkpoint(self) -> None:
        self._saved = (len(self.hosts), len(self.replicas), list(self.launched), list(self.live_hosts))

    def rollback(self) -> None:
        """Forget the launches since the checkpoint (only launches happen inside one)."""
        assert self._saved is not None
        nhosts, nreplicas, self.launched, self.live_hosts = self._saved
        del self.hosts[nhosts:]
        del self.replicas[nreplicas:]
        self._saved = None

    def commit(self) -> None:
        self._saved = None
