"""Who holds which host before scheduling: virtual-cluster membership and job clusters. Pure.

Members of VCs that are gone, or of job clusters whose job ended, go back once idle; a VC short of
its target hosts (``desired``) takes idle hosts nobody holds, then pods still starting, before any
new pod is asked for.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Mapping

from rayscale.autoscaler.scheduling.model import Node, NodeState, Snapshot
from rayscale.autoscaler.snapshot import is_unborn
from rayscale.autoscaler.virtual.model import JobCluster, Member, VirtualCluster
from rayscale.autoscaler.virtual.route import asked, part_of

__all__ = ["GONE", "Membership", "is_idle", "job_clusters", "prepass"]

GONE = (NodeState.TERMINATING, NodeState.DRAINING, NodeState.DEAD)


def is_idle(node: Node) -> bool:
    """A running host whose Ray node has nothing to do (Ray reports an idle time only then)."""
    return node.state is NodeState.RUNNING and node.idle_seconds > 0


def releasable(node: Node) -> bool:
    """A host that may leave its VC: nothing runs on it (or it is going anyway)."""
    return is_idle(node) or node.state in GONE or node.state is NodeState.PENDING


def takable(node: Node) -> bool:
    """A host a VC may take: idle, or a real pod still starting (it holds no work yet)."""
    return is_idle(node) or (node.state is NodeState.PENDING and not is_unborn(node.name))


class Membership:
    """Who holds which host, and the changes this pass makes to it."""

    def __init__(self, snapshot: Snapshot, vcs: Mapping[str, VirtualCluster], members: Mapping[str, Member]):
        self.nodes = {n.name: n for n in snapshot.nodes}
        self.vcs = vcs
        self.members: dict[str, Member] = {}
        self.assign: dict[str, Member | None] = {}
        for pod, member in members.items():
            if pod not in self.nodes:
                continue
            vc = vcs[member.vc]
            if member.job is not None and not vc.divisible:
                self.move(pod, Member(member.vc))
            else:
                self.members[pod] = member

    def move(self, pod: str, member: Member | None) -> None:
        self.assign[pod] = member
        if member is None:
            self.members.pop(pod, None)
        else:
            self.members[pod] = member

    def hosts(self, group: str, part: str | None) -> list[Node]:
        """Live hosts of `group` in `part` (None: held by no VC), in name order."""
        out = []
        for name, node in self.nodes.items():
            member = self.members.get(name)
            if node.group == group and (None if member is None else member.part) == part:
                out.append(node)
        return sorted(out, key=lambda n: n.name)

    def count(self, vc: str, group: str) -> int:
        """Hosts of `vc` (undivided and in job clusters) in `group` that are not going."""
        return sum(
            1
            for name, m in self.members.items()
            if m.vc == vc and self.nodes[name].group == group and self.nodes[name].state not in GONE
        )

    def free(self, group: str, part: str | None) -> list[Node]:
        """Hosts of `part` that another part may take: idle first, then pods still starting."""
        hosts = [n for n in self.hosts(group, part) if takable(n)]
        return sorted(hosts, key=lambda n: (not is_idle(n), n.name))


def job_clusters(
    snapshot: Snapshot, vcs: Mapping[str, VirtualCluster], members: Membership, finished: Collection[str]
) -> dict[tuple[str, str], JobCluster]:
    """Every job cluster: those holding hosts and those that demand asks for."""
    wanted: set[tuple[str, str]] = set()
    for resources in asked(snapshot):
        part = part_of(resources)
        if part is not None and "/" in part:
            vc, _, job = part.partition("/")
            if vc in vcs and vcs[vc].divisible and not vcs[vc].removing:
                wanted.add((vc, job))
    held: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for pod, m in members.members.items():
        if m.job is not None:
            held[(m.vc, m.job)][members.nodes[pod].group] += 1
    out = {}
    for key in sorted(wanted | set(held)):
        vc, job = key
        ended = job in finished or vcs[vc].removing
        reason = ""
        if ended:
            reason = "its job ended" if job in finished else "its virtual cluster is being removed"
        out[key] = JobCluster(vc, job, dict(held.get(key, {})), destroying=ended, reason=reason)
    return out


def prepass(
    snapshot: Snapshot,
    vcs: Mapping[str, VirtualCluster],
    members: Membership,
    jobs: Mapping[tuple[str, str], JobCluster],
    frozen: bool,
) -> None:
    """Members that must go back (idle ones only), then VCs short of hosts take free ones."""
    for pod, m in sorted(members.members.items()):
        node = members.nodes[pod]
        vc = vcs[m.vc]
        job = jobs.get((m.vc, m.job)) if m.job is not None else None
        back = vc.removing or (job is not None and job.destroying)
        if back and releasable(node):
            members.move(pod, None if vc.removing else Member(m.vc))
    for vc in sorted(vcs.values(), key=lambda v: v.name):
        if vc.removing or frozen:
            continue
        for g in vc.groups:
            short = g.desired - members.count(vc.name, g.name)
            for node in members.free(g.name, None)[: max(0, short)]:
                members.move(node.name, Member(vc.name))
