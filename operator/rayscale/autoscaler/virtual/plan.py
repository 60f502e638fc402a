"""Virtual clusters on top of the scheduler: ``plan(snapshot, vcs, members, finished) -> VcPlan``.

Pure and deterministic. The scheduler itself knows nothing of VCs; this module

1. keeps membership honest before scheduling: members of VCs that are gone, or of job clusters
   whose job ended, go back once idle; a VC short of its target hosts (``desired``) takes idle
   hosts nobody holds, then pods still starting, before any new pod is asked for (job clusters
   take the RayCluster's free hosts first, then their VC's undivided ones);
2. splits every worker group into parts: the RayCluster's own share (the group's name) and one
   share per VC (``<group>@<vc>``) and job cluster (``<group>@<vc>/<job>``), each with its own
   bounds and a scheduling label; demand is routed to its part (``route``);
3. runs the scheduler, and folds its decision back onto the real groups: a launch in a part that
   a free host can serve becomes that host's assignment instead of a new pod; a job cluster's
   idle host goes back to its VC instead of being deleted; each group's replicas are the sum of
   its parts', capped at its maxReplicas.

A VC's hosts count toward their group's minReplicas and maxReplicas; the RayCluster's share gets
what the VCs leave.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import (
    Decision,
    Group,
    GroupDecision,
    Head,
    LabelOp,
    Node,
    NodeState,
    Placement,
    RemovalCause,
    Selector,
    Snapshot,
    Unmet,
    UnmetReason,
)
from rayscale.autoscaler.snapshot import UNBORN_PREFIX, is_unborn
from rayscale.autoscaler.virtual.model import (
    PART_SEPARATOR,
    VC_KEY,
    JobCluster,
    Member,
    VcGroup,
    VcPlan,
    VirtualCluster,
)
from rayscale.autoscaler.virtual.route import part_of, route, strip

__all__ = ["is_idle", "part_group", "plan", "real_group"]

Scheduler = Callable[[Snapshot], Decision]
GONE = (NodeState.TERMINATING, NodeState.DRAINING, NodeState.DEAD)


def part_group(group: str, part: str) -> str:
    return f"{group}{PART_SEPARATOR}{part}"


def real_group(name: str) -> str:
    return name.partition(PART_SEPARATOR)[0]


def _part(name: str) -> str | None:
    _, sep, part = name.partition(PART_SEPARATOR)
    return part if sep else None


def is_idle(node: Node) -> bool:
    """A running host whose Ray node has nothing to do (Ray reports an idle time only then)."""
    return node.state is NodeState.RUNNING and node.idle_seconds > 0


def _releasable(node: Node) -> bool:
    """A host that may leave its VC: nothing runs on it (or it is going anyway)."""
    return is_idle(node) or node.state in GONE or node.state is NodeState.PENDING


def _takable(node: Node) -> bool:
    """A host a VC may take: idle, or a real pod still starting (it holds no work yet)."""
    return is_idle(node) or (node.state is NodeState.PENDING and not is_unborn(node.name))


class _Membership:
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
        hosts = [n for n in self.hosts(group, part) if _takable(n)]
        return sorted(hosts, key=lambda n: (not is_idle(n), n.name))


def _jobs(
    snapshot: Snapshot, vcs: Mapping[str, VirtualCluster], members: _Membership, finished: Collection[str]
) -> dict[tuple[str, str], JobCluster]:
    """Every job cluster: those holding hosts and those that demand asks for."""
    asked: set[tuple[str, str]] = set()
    requests: list[Mapping[str, float]] = [d.resources for d in snapshot.demands]
    requests += [b for g in snapshot.gangs for b in g.bundles]
    requests += [c.resources for c in snapshot.constraints]
    for resources in requests:
        part = part_of(resources)
        if part is not None and "/" in part:
            vc, _, job = part.partition("/")
            if vc in vcs and vcs[vc].divisible and not vcs[vc].removing:
                asked.add((vc, job))
    held: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for pod, m in members.members.items():
        if m.job is not None:
            held[(m.vc, m.job)][members.nodes[pod].group] += 1
    out = {}
    for key in sorted(asked | set(held)):
        vc, job = key
        ended = job in finished or vcs[vc].removing
        reason = ""
        if ended:
            reason = "its job ended" if job in finished else "its virtual cluster is being removed"
        out[key] = JobCluster(vc, job, dict(held.get(key, {})), destroying=ended, reason=reason)
    return out


def _prepass(
    snapshot: Snapshot,
    vcs: Mapping[str, VirtualCluster],
    members: _Membership,
    jobs: Mapping[tuple[str, str], JobCluster],
    frozen: bool,
) -> None:
    """Members that must go back (idle ones only), then VCs short of hosts take free ones."""
    for pod, m in sorted(members.members.items()):
        node = members.nodes[pod]
        vc = vcs[m.vc]
        job = jobs.get((m.vc, m.job)) if m.job is not None else None
        back = vc.removing or (job is not None and job.destroying)
        if back and _releasable(node):
            members.move(pod, None if vc.removing else Member(m.vc))
    for vc in sorted(vcs.values(), key=lambda v: v.name):
        if vc.removing or frozen:
            continue
        for g in vc.groups:
            short = g.desired - members.count(vc.name, g.name)
            for node in members.free(g.name, None)[: max(0, short)]:
                members.move(node.name, Member(vc.name))


def _bounded(group: Group, name: str, part: str, lowest: int, highest: int) -> Group:
    return dataclasses.replace(
        group,
        name=name,
        labels={**group.labels, VC_KEY: part},
        min_replicas=max(0, lowest),
        max_replicas=max(0, highest),
    )


class _Split:
    """The snapshot split into parts, and what the fold needs to undo it."""

    def __init__(
        self,
        snapshot: Snapshot,
        vcs: Mapping[str, VirtualCluster],
        members: _Membership,
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


def _without_key(selector: Selector) -> Selector:
    return tuple(c for c in selector if c.key != VC_KEY)


def _asked(selectors: Iterable[Selector]) -> str | None:
    for selector in selectors:
        for c in selector:
            if c.key == VC_KEY and c.op is LabelOp.IN:
                return c.values[0]
    return None


class _Fold:
    def __init__(self, split: _Split, decision: Decision, jobs: Mapping[tuple[str, str], JobCluster]) -> None:
        self.split = split
        self.decision = decision
        self.jobs = jobs
        self.members = split.members
        self.removed = {r.name: r for r in decision.terminate}
        self.used: set[str] = {n for p in decision.placements for t in p.targets for n in t.nodes}
        self.fewer_pods: Counter[str] = Counter()  # per real group: launches served by free hosts
        self.kept: Counter[str] = Counter()  # per real group: removals turned into returns
        self.launches: Counter[str] = Counter({g: d.launch for g, d in decision.groups.items()})
        self.moved_within: Counter[tuple[str, str]] = Counter()  # (vc, group): undivided -> job moves
        self.cut: Counter[str] = Counter()  # per real group: new pods VCs may not have

    def run(self) -> VcPlan:
        self._returns()
        for name in sorted(self.decision.groups, key=lambda n: (n.count("/"), n)):
            part = _part(name)
            if part is not None and not self.split.frozen:
                self._convert(real_group(name), part)
        self._clamp()
        return VcPlan(
            decision=self._decision(),
            assign=dict(self.members.assign),
            desired=self._desired(),
            jobs=self._job_clusters(),
            unmet=self._vc_unmet(),
            removed=self._removed(),
        )

    def _returns(self) -> None:
        """A job cluster's idle host the scheduler would remove goes back to its VC instead."""
        for r in self.decision.terminate:
            part = _part(r.group)
            if part is None or "/" not in part or r.reason is not RemovalCause.IDLE:
                continue
            vc = part.partition("/")[0]
            self.members.move(r.name, Member(vc))
            self.kept[real_group(r.group)] += 1
            del self.removed[r.name]

    def _convert(self, group: str, part: str) -> None:
        """Launches in `part` served by free hosts: the RayCluster's first, then (for a job
        cluster) its VC's undivided hosts."""
        name = part_group(group, part)
        vc = part.partition("/")[0]
        sources: list[str | None] = [None] + ([vc] if "/" in part else [])
        for source in sources:
            for node in self.members.free(group, source):
                if self.launches[name] <= 0:
                    return
                removal = self.removed.get(node.name)
                if node.name in self.used or (
                    removal is not None and removal.reason is not RemovalCause.IDLE
                ):
                    continue
                vc_name, _, job = part.partition("/")
                self.members.move(node.name, Member(vc_name, job or None))
                self.launches[name] -= 1
                if removal is not None:
                    del self.removed[node.name]
                else:
                    self.fewer_pods[group] += 1
                if source is not None:
                    self.moved_within[(vc, group)] += 1

    def _total(self, vc: str, group: str) -> int:
        """Hosts of `vc` in `group` once the decision is carried out."""
        total = 0
        for name, d in self.decision.groups.items():
            if real_group(name) == group and (_part(name) or "").partition("/")[0] == vc:
                total += d.replicas
        returned = sum(
            1 for r in self.decision.terminate
            if r.name not in self.removed and real_group(r.group) == group
            and (_part(r.group) or "").partition("/")[0] == vc
        )  # fmt: skip
        return total + returned - self.moved_within[(vc, group)]

    def _clamp(self) -> None:
        """New pods beyond a VC's maxNodes (job clusters may ask for more than the VC has left)
        are not asked for."""
        for vc in self.split.vcs.values():
            for share in vc.groups:
                over = self._total(vc.name, share.name) - share.max_nodes
                if not vc.removing and over > 0:
                    self.cut[share.name] += over

    def _decision(self) -> Decision:
        groups: dict[str, GroupDecision] = {}
        by_real: dict[str, list[GroupDecision]] = defaultdict(list)
        for name, d in self.decision.groups.items():
            by_real[real_group(name)].append(d)
        specs = {g.name: g for g in self.split.original.groups}
        for real, parts in by_real.items():
            extra = self.split.extra_unborn[real]
            current = sum(d.current for d in parts) - extra
            replicas = (
                sum(d.replicas for d in parts) - self.fewer_pods[real] + self.kept[real] - self.cut[real]
            )
            spec = specs.get(real)
            if spec is not None:
                replicas = min(replicas, spec.max_replicas)
            terminate = sum(1 for r in self.removed.values() if real_group(r.group) == real)
            groups[real] = GroupDecision(
                current=current,
                replicas=replicas,
                launch=max(0, replicas - current + terminate),
                terminate=terminate,
            )
        return Decision(
            groups=groups,
            terminate=tuple(dataclasses.replace(r, group=real_group(r.group)) for r in self.removed.values()),
            unmet=tuple(self._unmet(u) for u in self.decision.unmet),
            placements=tuple(self._placement(p) for p in self.decision.placements),
        )

    def _reason(self, u: Unmet) -> UnmetReason:
        part = _asked((u.label_selector, *u.fallbacks, *u.bundle_selectors))
        if part is None:
            return u.reason
        vc, _, job = part.partition("/")
        known = self.split.vcs.get(vc)
        if known is None or known.removing or (job and (vc, job) not in self.jobs):
            return UnmetReason.NO_VIRTUAL_CLUSTER
        if u.reason is UnmetReason.MAX_REPLICAS and vc in self.split.at_vc_max:
            return UnmetReason.VIRTUAL_CLUSTER_MAX
        return u.reason

    def _unmet(self, u: Unmet) -> Unmet:
        return dataclasses.replace(
            u,
            reason=self._reason(u),
            label_selector=_without_key(u.label_selector),
            fallbacks=tuple(_without_key(s) for s in u.fallbacks),
            bundle_selectors=tuple(_without_key(s) for s in u.bundle_selectors),
        )

    def _placement(self, p: Placement) -> Placement:
        return dataclasses.replace(
            p,
            label_selector=_without_key(p.label_selector),
            fallbacks=tuple(_without_key(s) for s in p.fallbacks),
            bundle_selectors=tuple(_without_key(s) for s in p.bundle_selectors),
            targets=tuple(dataclasses.replace(t, group=real_group(t.group)) for t in p.targets),
        )

    def _vc_unmet(self) -> dict[str, tuple[Unmet, ...]]:
        out: dict[str, list[Unmet]] = defaultdict(list)
        for u in self.decision.unmet:
            part = _asked((u.label_selector, *u.fallbacks, *u.bundle_selectors))
            if part is not None:
                out[part.partition("/")[0]].append(self._unmet(u))
        return {vc: tuple(items) for vc, items in out.items()}

    def _desired(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for vc in self.split.vcs.values():
            if vc.removing:
                continue
            targets: dict[str, int] = {}
            for share in vc.groups:
                if self.split.frozen:  # nothing was decided for the VC: its target stands
                    targets[share.name] = share.desired
                    continue
                total = self._total(vc.name, share.name)
                targets[share.name] = max(share.min_nodes, min(total, share.max_nodes))
            out[vc.name] = targets
        return out

    def _job_clusters(self) -> tuple[JobCluster, ...]:
        out = []
        for (vc, job), cluster in sorted(self.jobs.items()):
            hosts: Counter[str] = Counter()
            for pod, m in self.members.members.items():
                if m.vc == vc and m.job == job:
                    hosts[self.members.nodes[pod].group] += 1
            if cluster.destroying and not hosts:
                continue  # destroyed
            out.append(dataclasses.replace(cluster, hosts=dict(hosts)))
        return tuple(out)

    def _removed(self) -> frozenset[str]:
        holding = {m.vc for m in self.members.members.values()}
        return frozenset(v.name for v in self.split.vcs.values() if v.removing and v.name not in holding)


def plan(
    snapshot: Snapshot,
    vcs: Sequence[VirtualCluster],
    members: Mapping[str, Member],
    finished: Collection[str] = (),
    scheduler: Scheduler | None = None,
    *,
    frozen: bool = False,
) -> VcPlan:
    """Schedule `snapshot` with its virtual clusters.

    `members`: each pod's place, as its labels say; `finished`: submission ids of Ray jobs that
    ended. `frozen` (Ray's state is unknown, so no host can be seen idle): no host joins a VC and
    no VC asks for new pods; VC hosts stay where they are. Without VCs and members this is the
    scheduler's own decision.
    """
    scheduler = scheduler or schedule
    by_name = {v.name: v for v in vcs}
    groups = {n.name: n.group for n in snapshot.nodes}
    orphans: dict[str, set[str]] = defaultdict(set)
    for pod, m in members.items():
        if m.vc not in by_name and pod in groups:
            orphans[m.vc].add(groups[pod])
    for name, held in orphans.items():  # a VC gone or invalid: its hosts go back once idle
        shares = tuple(VcGroup(g, 0, 0, 0, 0) for g in sorted(held))
        by_name[name] = VirtualCluster(name, shares, divisible=True, removing=True)
    membership = _Membership(snapshot, by_name, members)
    jobs = _jobs(snapshot, by_name, membership, finished)
    _prepass(snapshot, by_name, membership, jobs, frozen)
    split = _Split(snapshot, by_name, membership, jobs, frozen)
    decision = scheduler(split.snapshot)
    return _Fold(split, decision, jobs).run()
