"""No churn at the worker cap: a replica the cap cut stands in for a new one of its group.

The worker cap removes replicas before placement (pending ones first, as Ray's termination
order does). When the same pass then launches a replica of a group whose replica the cap cut,
and the cut one is the same as a new one (every host pending, or running with all of it free,
carrying its group's labels, none missing), the cut replica stays instead: its pod is not
deleted only for an identical one to be created. The hosts counted do not change, so neither
does anything the caps decide; the new replica's work goes to the kept one's hosts, host for
host (``Reuse.apply``, after placement).

What a new host took is recorded per fill (``Reuse.record``): a fill of ``copies`` new hosts
covers host ``position`` of ``copies`` consecutive replicas (``Fleet.launch_copies``), so the
work of any new replica is known without a record per host.
"""

from __future__ import annotations

from collections.abc import Iterable

from rayscale.autoscaler.scheduling.catalog import GROUP_LABELS, Catalog
from rayscale.autoscaler.scheduling.explain import Explainer
from rayscale.autoscaler.scheduling.fleet import Fleet, HostKind
from rayscale.autoscaler.scheduling.greedy import DEMAND, Bin
from rayscale.autoscaler.scheduling.model import RemovalCause
from rayscale.autoscaler.scheduling.removal import Removed

Work = list[tuple[tuple[object, ...], int]]  # (explain key, units) one host took


class Reuse:
    """The cut replicas that may stand in for new ones, and what the new hosts took."""

    def __init__(self, catalog: Catalog, fleet: Fleet) -> None:
        self.catalog = catalog
        self.fleet = fleet
        self.cut: dict[int, list[int]] = {}  # group -> replicas the cap cut, the last cut first
        self._fills: list[tuple[int, int, int, Work]] = []  # (first replica, position, copies, work)

    def note_cut(self, removed: Removed, bins: Iterable[Bin]) -> None:
        """Note the replicas the worker cap cut whose hosts (``bins``: those before the cut) are
        each what the new host in its place would be."""
        fleet = self.fleet
        like_new = {b.host: b.total for b in bins if _like_new(b)}
        for rid, cause in removed.items():
            replica = fleet.replicas[rid]
            hosts = self.catalog.groups[replica.group].hosts
            if cause is not RemovalCause.MAX_WORKERS or len(replica.hosts) != len(hosts):
                continue
            if all(like_new.get(h) == total for h, total in zip(replica.hosts, hosts, strict=True)):
                self.cut.setdefault(replica.group, []).insert(0, rid)

    def record(self, b: Bin, copies: int, work: Work) -> None:
        """A fill of ``copies`` new hosts like ``b`` (a group with a cut replica)."""
        host = self.fleet.hosts[b.host]
        position = self.fleet.replicas[host.replica].hosts.index(b.host)
        self._fills.append((host.replica, position, copies, work))

    def apply(self, removed: Removed, explain: Explainer) -> None:
        """Each group keeps up to as many cut replicas as it launched, in place of its first
        new replicas: the launches and the removals drop by as many, the work moves."""
        fleet = self.fleet
        for group, cut in self.cut.items():
            if not fleet.launched[group]:
                continue
            name = self.catalog.group_name(group)
            fresh = [r for r, rep in enumerate(fleet.replicas) if rep.group == group and rep.name is None]
            for old, new in zip(cut, fresh, strict=False):
                replica = fleet.replicas[old]
                for position, host in enumerate(replica.hosts):
                    target = fleet.hosts[host]
                    for key, units in self._work(new, position):
                        explain.moved(key, name, target.rank, units, target.name or "")
                fleet.reuse(old, new)
                del removed[old]

    def _work(self, rid: int, position: int) -> Work:
        """What host ``position`` of new replica ``rid`` took."""
        out: Work = []
        for first, at, copies, work in self._fills:
            if at == position and first <= rid < first + copies:
                out += work
        return out


def _like_new(b: Bin) -> bool:
    """A pending or running host with its group's labels and all of its capacity free."""
    if b.label_set != GROUP_LABELS or b.rank not in (HostKind.PENDING, HostKind.RUNNING):
        return False
    return b.loads[DEMAND].free == b.total
