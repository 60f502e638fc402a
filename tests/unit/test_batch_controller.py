"""``--batch-scheduler`` in the controller's plan (rayscale.controller.batching) and on the command
line: the PodGroup before the pods, each pod's scheduler and metadata, the Warning Events."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import cluster, group, pod

from rayscale import cli
from rayscale.batch.registry import lookup
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.plan import Plan
from rayscale.controller.reconcile import PlannerOptions, plan_cluster
from rayscale.controller.snapshot import ClusterSnapshot


def _plan(body: dict[str, Any], name: str, pods: list[dict[str, Any]] | None = None, **options: Any) -> Plan:
    snapshot = ClusterSnapshot(body, pods or [], [{"metadata": {"name": "rc-head-svc"}}])
    plan, _ = plan_cluster(snapshot, ScaleExpectations(), PlannerOptions(batch=lookup(name), **options))
    return plan


def _labelled(**labels: str) -> dict[str, Any]:
    body = cluster(group("a", replicas=2))
    body["metadata"]["labels"] = labels
    return body


def test_volcano_plan_has_the_pod_group_and_decorated_pods() -> None:
    plan = _plan(_labelled(**{"volcano.sh/queue-name": "q"}), "volcano")
    assert plan.pod_group is not None
    assert plan.pod_group.name == "ray-rc-pg"
    assert plan.pod_group.manifest["spec"]["minMember"] == 3
    creates = [c for s in plan.steps for c in s.creates]
    assert len(creates) == 3
    for create in creates:
        meta = create.manifest["metadata"]
        assert create.manifest["spec"]["schedulerName"] == "volcano"
        assert meta["labels"]["volcano.sh/queue-name"] == "q"
        assert meta["annotations"]["scheduling.k8s.io/group-name"] == "ray-rc-pg"
        assert meta["annotations"]["volcano.sh/task-spec"] == (create.group or "headgroup")
    assert plan.events == []


def test_no_scheduler_leaves_pods_alone() -> None:
    plan = _plan(_labelled(), "")
    assert plan.pod_group is None
    assert all("schedulerName" not in c.manifest["spec"] for s in plan.steps for c in s.creates)


def test_a_pod_group_that_cannot_be_made_stops_the_pods() -> None:
    body = _labelled(**{"volcano.sh/network-topology-mode": "hard",
                        "volcano.sh/network-topology-highest-tier-allowed": "x"})  # fmt: skip
    plan = _plan(body, "volcano")
    assert plan.steps == []
    assert plan.error is not None
    assert "failed to convert volcano.sh/network-topology-highest-tier-allowed" in plan.error
    assert plan.requeue_after is not None


def test_labels_for_another_scheduler_warn_when_pods_are_made() -> None:
    body = _labelled(**{"ray.io/scheduler-name": "yunikorn"})
    plan = _plan(body, "kai-scheduler")
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "BatchScheduler")] * 2  # + KAI's queue
    assert "ray.io/scheduler-name=yunikorn is ignored" in plan.events[0].message
    assert "no label kai.scheduler/queue" in plan.events[1].message
    head = pod("h", "headgroup")
    workers = [pod(f"w{i}", "a") for i in range(2)]
    assert _plan(body, "kai-scheduler", [head, *workers]).events == []  # nothing made: nothing said


def test_no_scheduler_window_under_a_batch_scheduler() -> None:
    """A gang waits for all its pods: none is held back waiting for the kube-scheduler."""
    body = cluster(group("a", replicas=10))
    head = pod("h", "headgroup")
    windowed = _plan(body, "", [head], scheduler_window=3)
    assert sum(len(s.creates) for s in windowed.steps) == 3
    gang = _plan(body, "volcano", [head], scheduler_window=3)
    assert sum(len(s.creates) for s in gang.steps) == 10


def test_the_flag() -> None:
    args = cli.build_parser().parse_args(["run", "--batch-scheduler", "scheduler-plugins"])
    assert args.batch_scheduler == "scheduler-plugins"
    assert cli.build_parser().parse_args(["run"]).batch_scheduler == ""


def test_an_unknown_scheduler_stops_rayscale_run(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.build_parser().parse_args(["run", "--batch-scheduler", "kueue"])
    assert exit_info.value.code == 2
    assert "the batch scheduler 'kueue' is not supported: use one of volcano" in capsys.readouterr().err
