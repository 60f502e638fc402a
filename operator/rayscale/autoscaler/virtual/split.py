"""The snapshot split into parts: the RayCluster's own share of each group, one per VC and job
cluster, each with its own bounds and a scheduling label; demand routed to its part. Pure.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping

from rayscale.autoscaler.scheduling.model import Group, Head, Node, NodeState, Snapshot
from rayscale.autoscaler.snapshot import UNBORN_PREFIX, is_unborn
from rayscale.autoscaler.virtual.membership import GONE, Membership
from rayscale.autoscaler.virtual.model import PART_SEPARATOR, VC_KEY, JobCluster, VirtualCluster
from rayscale.autoscaler.virtual.route import route, strip

__all__ = ["Split", "part_group", "part_name", "real_group"]


def part_group(group: str, part: str) -> str:
    return f"{group}{PART_SEPARATOR}{part}"


def real_group(name: str) -> str:
    return name.partition(PART_SEPARATOR)[0]


def part_name(name: str) -> str | None:
    _, sep, part = name.partition(PART_SEPARATOR)
    return part if sep else None


def _bounded(group: Group, name: str, part: str, lowest: int, highest: int) -> Group:
    return dataclasses.replace(
        group,
        name=name,
        labels={**group.labels, VC_KEY: part},
        min_replicas=max(0, lowest),
        max_replicas=max(0, highest),
    )


class Split:
    """The snapshot split into parts, and what the fold needs to undo it."""

    def __init__(
        self,
        snapshot: Snapshot,
        vcs: Mapping[str, VirtualCluster],
        members: Membership,
        jobs: Mapping[tuple[str, str], JobCluster],
        frozen: bool = False,
    ) -> None:
        self.original = snapshot
        self.frozen = frozen
        self.vcs = vcs
        self.members = members
        self.parts: set[str] = set()
        self.at_vc_max: set[str] = set()  # VCs whose parts are bounded by maxNodes, not the group
        self.extra_unborn: Counter[str] = Counter()  # pods VCs need beyond the spec's replicas
        groups: list[Group] = []
        nodes: list[Node] = []
        for group in snapshot.groups:
            g_groups, g_nodes = self._group(group, jobs)
            groups += g_groups
            nodes += g_nodes
        head = snapshot.head
        if head is not None:
            head = Head(
                resources=strip(head.resources) or {},
                available=strip(head.available),
                labels=head.labels,
            )
        self.snapshot = route(
            dataclasses.replace(snapshot, groups=tuple(groups), nodes=tuple(nodes), head=head),
            self.parts,
        )

    def _group(
        self, group: Group, jobs: Mapping[tuple[str, str], JobCluster]
    ) -> tuple[list[Group], list[Node]]:
        members = self.members
        own = [n for n in self.original.nodes if n.group == group.name]
        unborn = [n for n in own if is_unborn(n.name)]
        live = {n.name: n for n in own if not is_unborn(n.name)}
        in_vcs = sum(members.count(vc.name, group.name) for vc in self.vcs.values())
        groups: list[Group] = []
        nodes: list[Node] = []
        wanted: dict[str, int] = {}  # part -> unborn hosts it needs
        for vc in sorted(self.vcs.values(), key=lambda v: v.name):
            share = vc.group(group.name)
            if share is None:
                continue
            total = members.count(vc.name, group.name)
            in_jobs = total - len([n for n in members.hosts(group.name, vc.name) if n.state not in GONE])
            others = in_vcs - total
            room = group.max_replicas - others
            self.parts.add(vc.name)
            name = part_group(group.name, vc.name)
            if vc.removing or self.frozen:  # no growth
                undivided = total - in_jobs
                groups.append(_bounded(group, name, vc.name, 0 if vc.removing else undivided, undivided))
            else:
                highest = min(share.max_nodes, room) - in_jobs
                if share.max_nodes <= room:
                    self.at_vc_max.add(vc.name)
                groups.append(_bounded(group, name, vc.name, share.min_nodes - in_jobs, highest))
                wanted[vc.name] = 0 if self.frozen else max(0, min(share.desired, share.max_nodes) - total)
            for (jvc, job), cluster in sorted(jobs.items()):
                if jvc != vc.name:
                    continue
                part = f"{vc.name}/{job}"
                self.parts.add(part)
                mine = len([n for n in members.hosts(group.name, part) if n.state not in GONE])
                # undivided hosts may be carved into the job cluster; the fold keeps the VC's
                # total within maxNodes
                other_jobs = in_jobs - mine
                highest = mine if cluster.destroying else min(share.max_nodes, room) - other_jobs
                groups.append(_bounded(group, part_group(group.name, part), part, 0, highest))
        primary_min = group.min_replicas - in_vcs
        primary_max = group.max_replicas - in_vcs
        groups.insert(
            0, dataclasses.replace(group, min_replicas=max(0, primary_min), max_replicas=max(0, primary_max))
        )
        for name, node in live.items():  # the snapshot's order: a replica's host 0 first
            member = members.members.get(name)
            nodes.append(self._host(node, None if member is None else member.part))
        spare = list(unborn)
        for part, count in sorted(wanted.items()):
            for i in range(count):
                if spare:
                    base = spare.pop(0)
                else:
                    self.extra_unborn[group.name] += 1
                    unborn_name = f"{UNBORN_PREFIX}{part_group(group.name, part)}:{i}"
                    base = Node(name=unborn_name, group=group.name, state=NodeState.PENDING)
                nodes.append(self._host(base, part))
        nodes += spare
        return groups, nodes

    def _host(self, node: Node, part: str | None) -> Node:
        available = strip(node.available)
        if part is None:
            return dataclasses.replace(node, available=available)
        labels = None if node.labels is None else {**node.labels, VC_KEY: part}
        return dataclasses.replace(
            node, group=part_group(node.group, part), available=available, labels=labels
        )
