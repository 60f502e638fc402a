"""The virtual-cluster branch of a round (virtual/branch.py): taken only when the cluster has VCs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.builders import group, pod, rc
from tests.support.fakes import KEY, FakeApi, FakeSource, autoscaler

from rayscale.api.virtualcluster_names import VC_LABEL, vc_resource
from rayscale.autoscaler import decide
from rayscale.autoscaler.scenario import parse_scenario
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import Demand, Group, Node, Snapshot
from rayscale.autoscaler.virtual.branch import involved
from rayscale.autoscaler.virtual.model import Member, VcPlan
from rayscale.autoscaler.virtual.plan import plan
from rayscale.autoscaler.virtual.read import Reading
from rayscale.ray import model as ray

ROOT = Path(__file__).resolve().parents[2]
CPU = Group("cpu", {"CPU": 4}, max_replicas=10)
PLAIN = Snapshot(
    groups=(CPU,), nodes=(Node("w", "cpu", available={"CPU": 4}),), demands=(Demand({"CPU": 1}),)
)


def node(resources: dict[str, float]) -> ray.RayNodeState:
    return ray.RayNodeState("id-w", ray.NodeStatus.IDLE, instance_id="w", total_resources=resources)


def test_a_plain_cluster_does_not_take_the_branch() -> None:
    assert not involved(Reading(), PLAIN, None)
    assert not involved(Reading(), PLAIN, ray.ClusterState(1, "s", nodes=(node({"CPU": 4.0}),)))


def test_any_trace_of_a_virtual_cluster_takes_it() -> None:
    assert involved(Reading(objects={"a": {}}), PLAIN, None)  # a RayVirtualCluster names the cluster
    assert involved(Reading(members={"w": Member("a")}), PLAIN, None)  # a pod still carries a VC label
    asks = Snapshot(groups=(CPU,), demands=(Demand({"CPU": 1, vc_resource("a"): 0.001}),))
    assert involved(Reading(), asks, None)  # work asks for a VC (that does not exist: it is unmet)
    stale = ray.ClusterState(1, "s", nodes=(node({"CPU": 4.0, vc_resource("a"): 1000.0}),))
    assert involved(Reading(), PLAIN, stale)  # a Ray node still carries a VC's resource


def scenarios() -> list[Path]:
    found = sorted((ROOT / "tests/differential/found").glob("*.yaml"))
    return sorted((ROOT / "examples/scenarios").glob("*.yaml")) + found


@pytest.mark.parametrize("path", scenarios(), ids=lambda p: p.name)
def test_without_virtual_clusters_the_planner_is_the_scheduler(path: Path) -> None:
    """What the branch skips changes nothing: without VCs the planner answers the scheduler's decision."""
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    snapshot = parse_scenario({k: v for k, v in doc.items() if k not in ("virtualClusters", "members")})
    if involved(Reading(), snapshot, None):
        pytest.skip("its demand asks for a virtual cluster")
    assert plan(snapshot, [], {}).decision == schedule(snapshot)


def never(*args: Any, **kwargs: Any) -> VcPlan:
    raise AssertionError("the virtual-cluster planner ran")


async def test_a_round_without_virtual_clusters_never_runs_the_planner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi(monkeypatch)
    monkeypatch.setattr(decide, "plan_with_vcs", never)
    assert await autoscaler(FakeSource(rc(group("cpu", replicas=0)))).step(KEY) == 5
    assert api.patches == []


async def test_a_round_with_a_member_pod_runs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeApi(monkeypatch)
    monkeypatch.setattr(decide, "plan_with_vcs", never)
    member = pod("rc-cpu-a", "cpu")
    member["metadata"].setdefault("labels", {})[VC_LABEL] = "gone"
    with pytest.raises(AssertionError, match="planner ran"):
        await autoscaler(FakeSource(rc(group("cpu", replicas=1)), [member])).step(KEY)
