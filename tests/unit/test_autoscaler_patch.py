"""Decisions as JSON patches: resourceVersion test, replicas and workersToDelete by group index."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support.builders import group, pod, rc

from rayscale.autoscaler.patch import ClusterPatch, GroupPatch, JsonPatch, build_patch, writable
from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import Decision, GroupDecision, Removal, RemovalCause
from rayscale.autoscaler.snapshot import UNBORN_PREFIX, build_snapshot
from rayscale.autoscaler.spec_reader import ScalingSpec, read_spec
from rayscale.ray import model as ray

TEST = {"op": "test", "path": "/metadata/generation", "value": 1}


def decide(groups: dict[str, tuple[int, int]], *removals: tuple[str, str]) -> Decision:
    """groups: name -> (replicas, terminated replicas); removals: (pod, group)."""
    return Decision(
        groups={
            name: GroupDecision(current=replicas, replicas=replicas, launch=0, terminate=gone)
            for name, (replicas, gone) in groups.items()
        },
        terminate=tuple(Removal(name, g, RemovalCause.IDLE) for name, g in removals),
        unmet=(),
        placements=(),
    )


def read(body: dict[str, Any]) -> ScalingSpec:
    """The cluster as the round reads it (beside KubeRay: the CRD's shape only)."""
    return read_spec(body, check=False)


def ops_of(patch: ClusterPatch | None) -> JsonPatch | None:
    return None if patch is None else patch.ops


def test_no_change_is_none() -> None:
    body = rc(group("a", replicas=2), group("b", replicas=0))
    assert build_patch(read(body), decide({"a": (2, 0), "b": (0, 0)}), {"w1", "w2"}) is None


def test_scale_up_indexes_groups_by_name() -> None:
    body = rc(group("a", replicas=1), group("b", replicas=0), group("c", replicas=0))
    patch = ops_of(build_patch(read(body), decide({"c": (3, 0), "a": (1, 0)}), set()))
    assert patch == [TEST, {"op": "replace", "path": "/spec/workerGroupSpecs/2/replicas", "value": 3}]


def test_scale_down_names_the_pods_in_one_patch() -> None:
    body = rc(group("a", replicas=0), group("b", replicas=3))
    patch = ops_of(
        build_patch(read(body), decide({"b": (1, 2)}, ("b-1", "b"), ("b-2", "b")), {"b-1", "b-2", "b-3"})
    )
    assert patch == [
        TEST,
        {"op": "replace", "path": "/spec/workerGroupSpecs/1/replicas", "value": 1},
        {
            "op": "add",
            "path": "/spec/workerGroupSpecs/1/scaleStrategy",
            "value": {"workersToDelete": ["b-1", "b-2"]},
        },
    ]
    written = build_patch(
        read(body), decide({"b": (1, 2)}, ("b-1", "b"), ("b-2", "b")), {"b-1", "b-2", "b-3"}
    )
    assert written is not None
    b = read(body).spec.workers[1]
    assert written.groups == (GroupPatch("b", b, replicas=1, workers_to_delete=("b-1", "b-2")),)


def test_existing_scale_strategy_gets_only_its_list_written() -> None:
    body = rc(group("a", replicas=2, scaleStrategy={"workersToDelete": ["old"]}))
    patch = ops_of(build_patch(read(body), decide({"a": (1, 1)}, ("a-1", "a")), {"a-1", "a-2"}))
    assert patch is not None
    assert patch[-1] == {
        "op": "add",
        "path": "/spec/workerGroupSpecs/0/scaleStrategy/workersToDelete",
        "value": ["a-1"],
    }


def test_scale_gates_of_others_are_never_written() -> None:
    """Gates (Kueue's, anyone's) sit beside workersToDelete: no op of the patch touches them,
    whether the list is written or not, so a gate added after the read survives too."""
    gates = [{"name": "kueue.k8s.io/quota-exceeded"}, {"name": "example.com/maintenance", "message": "m"}]
    body = rc(group("a", replicas=2, scaleStrategy={"scaleGate": gates}))
    patch = ops_of(build_patch(read(body), decide({"a": (1, 1)}, ("a-1", "a")), {"a-1", "a-2"}))
    assert patch is not None
    assert [op["path"] for op in patch[1:]] == [
        "/spec/workerGroupSpecs/0/replicas",
        "/spec/workerGroupSpecs/0/scaleStrategy/workersToDelete",
    ]
    assert all("scaleGate" not in str(op["value"]) for op in patch)


def test_no_new_removals_while_listed_pods_exist() -> None:
    body = rc(group("a", replicas=2, scaleStrategy={"workersToDelete": ["a-old"]}))
    # a-old still exists (e.g. terminating): the removal of a-1 waits, replicas stay
    assert build_patch(read(body), decide({"a": (1, 1)}, ("a-1", "a")), {"a-old", "a-1", "a-2"}) is None


def test_blocked_group_may_still_grow() -> None:
    body = rc(group("a", replicas=2, scaleStrategy={"workersToDelete": ["a-old"]}))
    decision = Decision(
        groups={"a": GroupDecision(current=2, replicas=3, launch=2, terminate=1)},
        terminate=(Removal("a-1", "a", RemovalCause.LAUNCH_FAILED),),
        unmet=(),
        placements=(),
    )
    patch = ops_of(build_patch(read(body), decision, {"a-old", "a-1", "a-2"}))
    assert patch == [TEST, {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 4}]


def test_writable_keeps_only_the_removals_the_patch_writes() -> None:
    """The loop drains only these: a drain accepted for a removal the patch drops would leave a
    drained Ray node in `replicas`."""
    body = rc(
        group("a", replicas=2, scaleStrategy={"workersToDelete": ["a-old"]}),
        group("b", replicas=2, scaleStrategy={"workersToDelete": ["b-old"]}),
    )
    decision = decide({"a": (1, 1), "b": (1, 1), "gone": (0, 1)}, ("a-1", "a"), ("b-1", "b"), ("g-1", "gone"))
    pods = {"a-old", "a-1", "a-2", "b-1", "b-2", "g-1"}  # b's listed pod is gone, a's is not
    kept = writable(read(body), decision, pods)
    assert [r.name for r in kept.terminate] == ["b-1"]
    assert kept.groups["a"] == GroupDecision(current=1, replicas=2, launch=0, terminate=0)
    assert kept.groups["b"] == GroupDecision(current=1, replicas=1, launch=0, terminate=1)
    # the patch of what is kept is the patch of the whole decision: nothing else is dropped
    assert build_patch(read(body), kept, pods) == build_patch(read(body), decision, pods)
    assert writable(
        read(rc(group("a", replicas=2))), decide({"a": (1, 1)}, ("a-1", "a")), pods
    ).terminate == (Removal("a-1", "a", RemovalCause.IDLE),)


def test_list_cleared_once_its_pods_are_gone() -> None:
    body = rc(group("a", replicas=1, scaleStrategy={"workersToDelete": ["a-old"]}), group("b", replicas=1))
    patch = ops_of(build_patch(read(body), decide({"a": (1, 0), "b": (1, 0)}), {"a-1", "b-1"}))
    assert patch == [
        TEST,
        {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy/workersToDelete", "value": []},
    ]
    body["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": []}
    assert build_patch(read(body), decide({"a": (1, 0), "b": (1, 0)}), {"a-1", "b-1"}) is None


def test_unborn_removals_lower_replicas_but_are_not_named() -> None:
    body = rc(group("a", replicas=3))
    patch = ops_of(
        build_patch(read(body), decide({"a": (2, 1)}, (f"{UNBORN_PREFIX}a:0", "a")), {"a-1", "a-2"})
    )
    assert patch == [TEST, {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2}]


def test_groups_missing_from_the_spec_are_ignored() -> None:
    body = rc(group("a", replicas=1))
    assert build_patch(read(body), decide({"gone": (5, 0)}), set()) is None


def test_the_generation_is_tested_else_the_resource_version_and_one_is_required() -> None:
    body = rc(group("a", replicas=0))
    assert build_patch(read(body), decide({"a": (1, 0)}), set()).ops[0] == TEST  # type: ignore[union-attr]
    del body["metadata"]["generation"]
    without = build_patch(read(body), decide({"a": (1, 0)}), set())
    assert without is not None
    assert without.ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "42"}
    del body["metadata"]["resourceVersion"]
    with pytest.raises(ValueError, match="generation or resourceVersion"):
        build_patch(read(body), decide({"a": (1, 0)}), set())


def test_snapshot_schedule_patch_idle_scale_down() -> None:
    body = rc(group("a", replicas=2))
    pods = [pod("a-1", "a"), pod("a-2", "a")]
    state = ray.ClusterState(
        version=1,
        session_name="s",
        nodes=(
            ray.RayNodeState("n1", ray.NodeStatus.IDLE, instance_id="a-1", idle_duration_ms=600_000),
            ray.RayNodeState("n2", ray.NodeStatus.RUNNING, instance_id="a-2"),
        ),
    )
    now = datetime(2026, 1, 1, 1, tzinfo=UTC)
    decision = schedule(build_snapshot(body, pods, state, [], (), now))
    patch = ops_of(build_patch(read(body), decision, {"a-1", "a-2"}))
    assert patch == [
        TEST,
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
        {
            "op": "add",
            "path": "/spec/workerGroupSpecs/0/scaleStrategy",
            "value": {"workersToDelete": ["a-1"]},
        },
    ]


@pytest.mark.parametrize("fields", [{}, {"replicas": None, "scaleStrategy": None}, {"replicas": 1}])
def test_a_field_the_manifest_has_is_replaced_else_added(fields: dict[str, Any]) -> None:
    """RFC 6902 ``replace`` needs the key: one the manifest has (null too) is replaced, else added."""
    body = rc(group("a", replicas=None))
    body["spec"]["workerGroupSpecs"][0].update(fields)
    patch = ops_of(build_patch(read(body), decide({"a": (0, 1)}, ("a-1", "a")), {"a-1"}))
    assert patch is not None
    replicas, strategy = patch[1:]
    assert (replicas["op"], replicas["value"]) == ("replace" if "replicas" in fields else "add", 0)
    assert strategy["op"] == ("replace" if "scaleStrategy" in fields else "add")
