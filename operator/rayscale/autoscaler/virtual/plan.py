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

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence

from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import Decision, Snapshot
from rayscale.autoscaler.virtual.fold import Fold
from rayscale.autoscaler.virtual.membership import Membership, job_clusters, prepass
from rayscale.autoscaler.virtual.model import Member, VcGroup, VcPlan, VirtualCluster
from rayscale.autoscaler.virtual.split import Split

__all__ = ["plan"]

Scheduler = Callable[[Snapshot], Decision]


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
    membership = Membership(snapshot, by_name, members)
    jobs = job_clusters(snapshot, by_name, membership, finished)
    prepass(snapshot, by_name, membership, jobs, frozen)
    split = Split(snapshot, by_name, membership, jobs, frozen)
    decision = scheduler(split.snapshot)
    return Fold(split, decision, jobs).run()
