"""The scheduler's decision folded back onto the real groups. Pure.

A launch in a part that a free host can serve becomes that host's assignment instead of a new pod;
a job cluster's idle host goes back to its VC instead of being deleted; each group's replicas are
the sum of its parts', capped at its maxReplicas.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from rayscale.autoscaler.scheduling.model import (
    Decision,
    GroupDecision,
    LabelOp,
    Placement,
    RemovalCause,
    Selector,
    Unmet,
    UnmetReason,
)
from rayscale.autoscaler.virtual.model import VC_KEY, JobCluster, Member, VcPlan
from rayscale.autoscaler.virtual.split import Split, part_group, part_name, real_group

__all__ = ["Fold"]


def _without_key(selector: Selector) -> Selector:
    return tuple(c for c in selector if c.key != VC_KEY)


def _asked(selectors: Iterable[Selector]) -> str | None:
    for selector in selectors:
        for c in selector:
            if c.key == VC_KEY and c.op is LabelOp.IN:
                return c.values[0]
    return None


class Fold:
    def __init__(self, split: Split, decision: Decision, jobs: Mapping[tuple[str, str], JobCluster]) -> None:
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
            part = part_name(name)
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
            part = part_name(r.group)
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
            if real_group(name) == group and (part_name(name) or "").partition("/")[0] == vc:
                total += d.replicas
        returned = sum(
            1 for r in self.decision.terminate
            if r.name not in self.removed and real_group(r.group) == group
            and (part_name(r.group) or "").partition("/")[0] == vc
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
            # in replicas, as the scheduler counts (a multi-host replica's hosts go together)
            terminate = len(
                {r.replica or r.name for r in self.removed.values() if real_group(r.group) == real}
            )
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
