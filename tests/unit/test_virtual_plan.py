"""The virtual-cluster layer over the scheduler: membership, splitting, folding."""

from __future__ import annotations

from typing import Any

from rayscale.api.virtualcluster_names import job_resource, vc_resource
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import (
    Demand,
    Group,
    Node,
    NodeState,
    Options,
    RemovalCause,
    Snapshot,
    UnmetReason,
)
from rayscale.autoscaler.snapshot import UNBORN_PREFIX
from rayscale.autoscaler.virtual.model import Member, VcGroup, VirtualCluster
from rayscale.autoscaler.virtual.plan import plan

CPU = Group("cpu", {"CPU": 4}, max_replicas=10)
IDLE = 120.0  # beyond the 60 s idle timeout


def idle(name: str, seconds: float = 5.0, **extra: Any) -> Node:
    return Node(name, "cpu", idle_seconds=seconds, available={"CPU": 4, **extra})


def busy(name: str) -> Node:
    return Node(name, "cpu", idle_seconds=0.0, available={"CPU": 0})


def vc(
    name: str = "a", nodes: int = 1, low: int | None = None, high: int | None = None, **kw: Any
) -> VirtualCluster:
    share = VcGroup(
        "cpu", nodes, nodes if low is None else low, nodes if high is None else high, kw.pop("desired", nodes)
    )
    return VirtualCluster(name, (share,), **kw)


def snap(*nodes: Node, demands: tuple[Demand, ...] = (), group: Group = CPU) -> Snapshot:
    return Snapshot(groups=(group,), nodes=nodes, demands=demands, options=Options(idle_timeout_seconds=60))


def test_without_virtual_clusters_the_decision_is_the_schedulers() -> None:
    s = snap(idle("p1", IDLE), busy("p2"), demands=(Demand({"CPU": 4}, count=3),))
    assert plan(s, [], {}).decision == schedule(s)


def test_a_new_vc_takes_an_idle_free_host_then_asks_for_a_new_pod() -> None:
    p = plan(snap(idle("p1")), [vc(nodes=2)], {})
    assert p.assign == {"p1": Member("a")}
    assert p.decision.groups["cpu"].replicas == 2  # p1 moved, one new pod for the VC
    assert p.desired == {"a": {"cpu": 2}}
    assert p.decision.terminate == ()


def test_a_starting_pod_fills_the_vc_next_pass() -> None:
    pending = Node("p2", "cpu", state=NodeState.PENDING)
    p = plan(snap(idle("p1"), pending), [vc(nodes=2)], {"p1": Member("a")})
    assert p.assign == {"p2": Member("a")}
    assert p.decision.groups["cpu"].replicas == 2


def test_busy_free_hosts_are_never_taken() -> None:
    p = plan(snap(busy("p1")), [vc(nodes=1)], {})
    assert p.assign == {}
    assert p.decision.groups["cpu"].replicas == 2


def test_work_outside_the_vcs_never_takes_a_vc_host() -> None:
    s = snap(idle("v1"), demands=(Demand({"CPU": 1}),))
    p = plan(s, [vc(nodes=1)], {"v1": Member("a")})
    assert p.decision.groups["cpu"].replicas == 2  # a new pod, not the VC's idle host
    assert not p.assign


def test_vc_work_goes_to_its_hosts() -> None:
    s = snap(idle("v1", **{vc_resource("a"): 1000}), demands=(Demand({"CPU": 1, vc_resource("a"): 0.001}),))
    p = plan(s, [vc(nodes=1)], {"v1": Member("a")})
    assert p.decision.groups["cpu"].replicas == 1
    assert [t.nodes for pl in p.decision.placements for t in pl.targets] == [("v1",)]
    assert p.decision.placements[0].targets[0].group == "cpu"
    assert p.decision.placements[0].label_selector == ()


def test_demand_grows_an_autoscaled_vc_within_its_bounds() -> None:
    s = snap(busy("v1"), demands=(Demand({"CPU": 4, vc_resource("a"): 0.001}, count=5),))
    p = plan(s, [vc(nodes=1, low=1, high=3)], {"v1": Member("a")})
    assert p.decision.groups["cpu"].replicas == 3
    assert p.desired == {"a": {"cpu": 3}}
    (unmet,) = p.unmet["a"]
    assert (unmet.count, unmet.reason) == (3, UnmetReason.VIRTUAL_CLUSTER_MAX)
    assert p.decision.unmet[0].reason is UnmetReason.VIRTUAL_CLUSTER_MAX


def test_vc_growth_takes_free_idle_hosts_before_new_pods() -> None:
    s = snap(busy("v1"), idle("p1", IDLE), demands=(Demand({"CPU": 4, vc_resource("a"): 0.001}),))
    p = plan(s, [vc(nodes=1, low=1, high=3)], {"v1": Member("a")})
    assert p.assign == {"p1": Member("a")}
    assert p.decision.groups["cpu"].replicas == 2  # p1 stays (no longer idle-removed), no new pod
    assert p.decision.terminate == ()
    assert p.desired == {"a": {"cpu": 2}}


def test_idle_vc_hosts_shrink_it_to_its_minimum() -> None:
    s = snap(idle("v1", IDLE), idle("v2", IDLE), idle("v3", IDLE))
    members = {n: Member("a") for n in ("v1", "v2", "v3")}
    p = plan(s, [vc(nodes=3, low=1, high=3)], members)
    assert len(p.decision.terminate) == 2
    assert {r.reason for r in p.decision.terminate} == {RemovalCause.IDLE}
    assert {r.group for r in p.decision.terminate} == {"cpu"}
    assert p.decision.groups["cpu"].replicas == 1
    assert p.desired == {"a": {"cpu": 1}}


def test_a_fixed_vc_keeps_its_idle_hosts() -> None:
    s = snap(idle("v1", IDLE), idle("v2", IDLE))
    p = plan(s, [vc(nodes=2)], {"v1": Member("a"), "v2": Member("a")})
    assert p.decision.terminate == ()
    assert p.decision.groups["cpu"].replicas == 2


def test_a_dead_host_is_replaced_from_free_hosts_first() -> None:
    dead = Node("v1", "cpu", state=NodeState.DEAD)
    p = plan(snap(dead, idle("p1")), [vc(nodes=1)], {"v1": Member("a")})
    assert [(r.name, r.reason) for r in p.decision.terminate] == [("v1", RemovalCause.NODE_DEAD)]
    assert p.assign == {"p1": Member("a")}
    assert p.decision.groups["cpu"].replicas == 1


def test_a_dead_host_without_free_hosts_gets_a_new_pod() -> None:
    dead = Node("v1", "cpu", state=NodeState.DEAD)
    p = plan(snap(dead), [vc(nodes=1)], {"v1": Member("a")})
    assert p.decision.groups["cpu"].replicas == 1  # v1 goes, a new pod comes
    assert p.decision.groups["cpu"].launch == 1


def test_removal_returns_idle_hosts_and_waits_for_busy_ones() -> None:
    s = snap(idle("v1"), busy("v2"))
    p = plan(s, [vc(nodes=2, removing=True)], {"v1": Member("a"), "v2": Member("a")})
    assert p.assign == {"v1": None}
    assert p.removed == frozenset()
    assert p.decision.groups["cpu"].replicas == 2
    done = plan(snap(idle("v1"), idle("v2")), [vc(nodes=2, removing=True)], {"v2": Member("a")})
    assert done.assign == {"v2": None}
    assert done.removed == frozenset({"a"})


def test_members_of_a_vc_that_is_gone_are_free_again_once_idle() -> None:
    members = {"v1": Member("gone"), "v2": Member("gone", "j")}
    p = plan(snap(idle("v1"), busy("v2")), [], members)
    assert p.assign == {"v1": None}
    assert p.decision.groups["cpu"].replicas == 2
    assert p.decision.terminate == ()


def test_unknown_vc_is_its_own_reason() -> None:
    p = plan(snap(demands=(Demand({"CPU": 1, vc_resource("nope"): 0.001}),)), [vc(nodes=0)], {})
    assert [u.reason for u in p.decision.unmet] == [UnmetReason.NO_VIRTUAL_CLUSTER]
    assert p.decision.groups["cpu"].replicas == 0


def test_a_job_cluster_is_carved_from_undivided_hosts() -> None:
    job = job_resource("a", "raysubmit_1")
    s = snap(idle("v1"), idle("v2"), demands=(Demand({"CPU": 2, job: 0.001}),))
    p = plan(s, [vc(nodes=2, divisible=True)], {"v1": Member("a"), "v2": Member("a")})
    assert p.assign == {"v1": Member("a", "raysubmit_1")}
    assert p.decision.groups["cpu"].replicas == 2  # no new pod
    assert p.desired == {"a": {"cpu": 2}}
    (cluster,) = p.jobs
    assert (cluster.name, dict(cluster.hosts), cluster.destroying) == ("raysubmit_1", {"cpu": 1}, False)


def test_a_job_cluster_takes_free_hosts_before_its_vcs() -> None:
    job = job_resource("a", "j")
    s = snap(idle("v1"), idle("p1"), demands=(Demand({"CPU": 2, job: 0.001}),))
    p = plan(s, [vc(nodes=1, high=2, divisible=True)], {"v1": Member("a")})
    assert p.assign == {"p1": Member("a", "j")}
    assert p.desired == {"a": {"cpu": 2}}


def test_job_demand_in_an_indivisible_vc_has_no_job_cluster() -> None:
    s = snap(idle("v1"), demands=(Demand({"CPU": 1, job_resource("a", "j"): 0.001}),))
    p = plan(s, [vc(nodes=1)], {"v1": Member("a")})
    assert [u.reason for u in p.decision.unmet] == [UnmetReason.NO_VIRTUAL_CLUSTER]
    assert p.jobs == ()


def test_a_finished_jobs_cluster_goes_back_once_idle() -> None:
    members = {"v1": Member("a", "j"), "v2": Member("a", "j")}
    s = snap(idle("v1"), busy("v2"))
    p = plan(s, [vc(nodes=2, divisible=True)], members, finished={"j"})
    assert p.assign == {"v1": Member("a")}
    (cluster,) = p.jobs
    assert (cluster.destroying, dict(cluster.hosts)) == (True, {"cpu": 1})
    assert "ended" in cluster.reason
    members = {"v1": Member("a"), "v2": Member("a", "j")}
    gone = plan(snap(idle("v1"), idle("v2")), [vc(nodes=2, divisible=True)], members, {"j"})
    assert gone.assign == {"v2": Member("a")}
    assert gone.jobs == ()


def test_an_idle_job_host_returns_to_its_vc_instead_of_being_deleted() -> None:
    members = {"v1": Member("a", "j"), "v2": Member("a")}
    p = plan(snap(idle("v1", IDLE), busy("v2")), [vc(nodes=2, divisible=True)], members)
    assert p.assign == {"v1": Member("a")}
    assert p.decision.terminate == ()
    assert p.decision.groups["cpu"].replicas == 2


def test_vc_hosts_count_toward_the_groups_max() -> None:
    group = Group("cpu", {"CPU": 4}, max_replicas=2)
    s = snap(busy("v1"), demands=(Demand({"CPU": 4}, count=3),), group=group)
    p = plan(s, [vc(nodes=1)], {"v1": Member("a")})
    assert p.decision.groups["cpu"].replicas == 2


def test_unborn_replicas_serve_the_vc_first() -> None:
    unborn = Node(f"{UNBORN_PREFIX}cpu:0", "cpu", state=NodeState.PENDING)
    p = plan(snap(busy("p1"), unborn), [vc(nodes=1)], {})
    assert p.decision.groups["cpu"].replicas == 2  # the spec's unborn replica is the VC's
    assert p.desired == {"a": {"cpu": 1}}


def test_without_rays_state_nothing_joins_a_vc_and_no_pod_is_asked_for() -> None:
    running = Node("p1", "cpu")  # Ray could not be asked: busy for all we know
    p = plan(snap(running, idle("v1")), [vc(nodes=3, low=2, high=3)], {"v1": Member("a")}, frozen=True)
    assert p.assign == {}
    assert p.decision.groups["cpu"].replicas == 2
    assert p.desired == {"a": {"cpu": 3}}
