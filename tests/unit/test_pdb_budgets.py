"""PodDisruptionBudgets per RayCluster (rayscale.controller.budgets, pure; budgets_apply with the
policy/v1 calls faked): the head's and each group's budget, owned and labelled; made, patched back
and removed as the annotation and the groups change; another writer's budget over the same pods
is a conflict, never a second budget; a 403 says which chart value to set; a refused value of the
annotation makes the spec invalid."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests.support.builders import cluster, group, pod
from tests.support.fakes import KEY, EventLog, FakeClusterSource, FakeKubeOps

from rayscale.api.disruption_annotations import DISRUPTION_BUDGET_ANNOTATION, DRAIN_ON_STOP_ANNOTATION
from rayscale.api.raycluster import Condition, RayClusterSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.validation import Invalid, parse_and_validate
from rayscale.common import labels as L
from rayscale.controller import budgets, budgets_apply
from rayscale.controller.budgets import plan_budgets, selects, wanted
from rayscale.controller.runner import ControllerConfig, RayClusterController
from rayscale.kube import pdb_ops
from rayscale.kube.ops import KubeError


def setup(*groups: dict[str, Any], on: str | None = "true") -> tuple[ClusterMeta, RayClusterSpec]:
    body = cluster(*(groups or (group("small"),)))
    if on is not None:
        body["metadata"]["annotations"] = {DISRUPTION_BUDGET_ANNOTATION: on}
    return ClusterMeta.from_body(body), RayClusterSpec.model_validate(body["spec"])


def foreign(name: str, selector: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"selector": selector, "maxUnavailable": 1},
    }


def test_the_head_and_each_group_get_a_budget_allowing_no_eviction_owned_by_the_cluster() -> None:
    """An integer minAvailable no smaller than the pods the budget may select: 1 for the head, the
    group's most replicas times numOfHosts (maxUnavailable 0 never synced: the disruption
    controller asks the pods' owner, a RayCluster, for a scale it does not have)."""
    meta, spec = setup(group("small"), group("gpu", max_replicas=3, hosts=4))
    made = wanted(meta, spec)
    assert [b.name for b in made] == ["rc-pdb-head", "rc-pdb-worker-small", "rc-pdb-worker-gpu"]
    assert [b.what for b in made] == ["the head", "worker group small", "worker group gpu"]
    head, small = made[0].manifest, made[1].manifest
    assert head["apiVersion"] == "policy/v1"
    assert head["kind"] == "PodDisruptionBudget"
    assert head["spec"] == {
        "selector": {"matchLabels": {L.RAY_CLUSTER: "rc", L.NODE_TYPE: L.HEAD}},
        "minAvailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    assert [b.manifest["spec"]["minAvailable"] for b in made[1:]] == [10, 12]
    assert all("maxUnavailable" not in b.manifest["spec"] for b in made)
    assert small["spec"]["selector"]["matchLabels"] == {
        L.RAY_CLUSTER: "rc",
        L.NODE_TYPE: L.WORKER,
        L.GROUP: "small",
    }
    assert small["metadata"]["ownerReferences"] == [meta.owner_reference()]
    assert small["metadata"]["namespace"] == "ns"
    assert small["metadata"]["labels"][L.RAY_CLUSTER] == "rc"
    assert small["metadata"]["labels"][L.CREATED_BY] == L.CREATED_BY_VALUE
    # a group called "head" does not take the head's name
    assert budgets.budget_name("rc", "head") != budgets.budget_name("rc", None)


def test_each_budget_selects_its_own_pods_only() -> None:
    meta, spec = setup(group("small"), group("gpu"))
    head, small, gpu = (b.manifest["spec"]["selector"] for b in wanted(meta, spec))
    head_pod, small_pod = (
        pod("h", L.HEAD_GROUP)["metadata"]["labels"],
        pod("s", "small")["metadata"]["labels"],
    )
    other = pod("o", "small", cluster_name="other")["metadata"]["labels"]
    assert selects(head, head_pod)
    assert not selects(head, small_pod)
    assert selects(small, small_pod)
    assert not selects(gpu, small_pod)
    assert not selects(small, head_pod)
    assert not any(selects(s, other) for s in (head, small, gpu))


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (None, {"a": "1"}, False),  # a null selector selects nothing
        ({}, {"a": "1"}, True),  # an empty one every pod
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, {"a": "2"}, False),
    ],
)
def test_label_selectors_as_the_api_server_reads_them(
    selector: dict[str, Any] | None, labels: dict[str, str], expected: bool
) -> None:
    assert selects(selector, labels) is expected


def test_missing_budgets_are_made_edited_ones_patched_back_and_a_removed_groups_deleted() -> None:
    meta, spec = setup(group("small"), group("gpu"))
    fresh = plan_budgets(meta, spec, True, [], [])
    assert [m["metadata"]["name"] for m in fresh.creates] == [
        "rc-pdb-head",
        "rc-pdb-worker-small",
        "rc-pdb-worker-gpu",
    ]
    assert fresh.protected == ["the head", "worker group small", "worker group gpu"]
    assert not (fresh.updates)
    assert not (fresh.deletes)
    assert not (fresh.conflicts)

    existing = [copy.deepcopy(m) for m in fresh.creates]
    assert not plan_budgets(meta, spec, True, existing, []).creates  # all there: nothing to do
    existing[1]["spec"]["minAvailable"] = 1  # edited by hand
    gone_meta, gone_spec = setup(group("small"))  # gpu removed from the spec
    again = plan_budgets(gone_meta, gone_spec, True, existing, [])
    assert again.creates == []
    # a merge patch: maxUnavailable (which cannot stand beside minAvailable) set to null
    assert again.updates == {
        "rc-pdb-worker-small": {"spec": {**fresh.creates[1]["spec"], "maxUnavailable": None}}
    }
    assert again.deletes == ["rc-pdb-worker-gpu"]

    off = plan_budgets(gone_meta, gone_spec, False, existing, [])  # annotation removed: every one goes
    assert off.deletes == ["rc-pdb-head", "rc-pdb-worker-gpu", "rc-pdb-worker-small"]
    assert budgets.verdict(meta, False, off, None) is None  # and the condition with them


def test_a_budget_of_someone_else_over_the_same_pods_is_a_conflict_and_gets_no_second() -> None:
    meta, spec = setup(group("small"), group("gpu"))
    theirs = foreign("team-pdb", {"matchLabels": {L.GROUP: "gpu"}})
    other_cluster = foreign("rc2-pdb", {"matchLabels": {L.RAY_CLUSTER: "rc2"}})
    plan = plan_budgets(meta, spec, True, [theirs, other_cluster], [])
    assert [m["metadata"]["name"] for m in plan.creates] == ["rc-pdb-head", "rc-pdb-worker-small"]
    assert plan.conflicts == [("team-pdb", "selects pods of worker group gpu")]
    result = budgets.verdict(meta, True, plan, None)
    assert result is not None
    assert (result.status, result.reason) == (False, "ConflictingBudget")
    assert "ns/team-pdb selects pods of worker group gpu" in result.message
    assert result.warning == "ConflictingDisruptionBudget"

    # one selecting by a label of the running pods only (not of the template) is found through them
    meta, spec = setup(group("small"))
    by_pod = foreign("by-pod", {"matchExpressions": [{"key": "podlabel", "operator": "Exists"}]})
    running = pod("rc-small-worker-a", "small")
    running["metadata"]["labels"]["podlabel"] = "x"
    ours = copy.deepcopy(plan_budgets(meta, spec, True, [], []).creates)
    plan = plan_budgets(meta, spec, True, [*ours, by_pod], [running])
    assert plan.conflicts == [("by-pod", "selects pods of worker group small")]
    assert plan.deletes == ["rc-pdb-worker-small"]  # ours goes: two budgets over a pod block it for good

    # a budget of another writer that has our name
    squatter = foreign("rc-pdb-head", {"matchLabels": {"nothing": "here"}})
    plan = plan_budgets(meta, spec, True, [squatter], [])
    assert plan.conflicts == [("rc-pdb-head", "has the name of the budget of the head")]
    assert [m["metadata"]["name"] for m in plan.creates] == ["rc-pdb-worker-small"]


def test_the_condition_says_what_is_protected() -> None:
    meta, spec = setup(group("small"))
    result = budgets.verdict(meta, True, plan_budgets(meta, spec, True, [], []), None)
    assert result is not None
    assert (result.status, result.reason, result.warning) == (
        True,
        "BudgetsInPlace",
        None,
    )
    assert (
        result.message == "PodDisruptionBudgets that allow no eviction protect the head, worker group small"
    )


@pytest.mark.parametrize("value", ["yes", "True", "1", "", '{"maxUnavailable": 1}'])
def test_a_value_of_the_annotations_other_than_true_or_false_is_refused(value: str) -> None:
    for key in (DISRUPTION_BUDGET_ANNOTATION, DRAIN_ON_STOP_ANNOTATION):
        body = cluster(group("small"))
        body["metadata"]["annotations"] = {key: value}
        parsed = parse_and_validate(ClusterMeta.from_body(body), body["spec"])
        assert isinstance(parsed, Invalid)
        assert (
            parsed.message
            == f'metadata.annotations.{key}: {value!r} is not implemented (use "true" or "false")'
        )
    for ok in ("true", "false"):
        body = cluster(group("small"))
        body["metadata"]["annotations"] = {DISRUPTION_BUDGET_ANNOTATION: ok, DRAIN_ON_STOP_ANNOTATION: ok}
        assert not isinstance(parse_and_validate(ClusterMeta.from_body(body), body["spec"]), Invalid)


class FakePdbs:
    """The policy/v1 calls of rayscale.kube.pdb_ops, against a dict of budgets."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.refuse: KubeError | None = None

        async def list_pdbs(_api: Any, ns: str) -> list[dict[str, Any]]:
            self.calls.append(("list", ns))
            if self.refuse:
                raise self.refuse
            return [copy.deepcopy(o) for o in self.objects.values()]

        async def create_pdb(_api: Any, _ns: str, manifest: dict[str, Any]) -> bool:
            name = manifest["metadata"]["name"]
            self.calls.append(("create", name))
            self.objects[name] = copy.deepcopy(manifest)
            return True

        async def patch_pdb(_api: Any, _ns: str, name: str, patch: dict[str, Any]) -> bool:
            self.calls.append(("patch", name))
            self.objects[name]["spec"].update(patch.get("spec") or {})
            return True

        async def delete_pdb(_api: Any, _ns: str, name: str) -> bool:
            self.calls.append(("delete", name))
            return self.objects.pop(name, None) is not None

        for fn in (list_pdbs, create_pdb, patch_pdb, delete_pdb):
            monkeypatch.setattr(pdb_ops, fn.__name__, fn)


def stored(result: budgets.Verdict | budgets_apply.Unchanged | None) -> Condition | None:
    """The condition as the next reconcile reads it back."""
    assert not isinstance(result, budgets_apply.Unchanged)
    if result is None:
        return None
    return Condition.model_validate(
        {
            "type": budgets.CONDITION,
            "status": str(result.status),
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "reason": result.reason,
            "message": result.message,
        }
    )


async def test_the_keeper_makes_them_once_and_removes_them_with_the_annotation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake, events = FakePdbs(monkeypatch), EventLog()
    keeper = budgets_apply.BudgetKeeper(None, events, recheck=60.0)  # type: ignore[arg-type]
    meta, spec = setup(group("small"))
    result = await keeper.keep(meta, spec, [], None)
    assert fake.calls == [("list", "ns"), ("create", "rc-pdb-head"), ("create", "rc-pdb-worker-small")]
    assert events.reasons() == ["CreatedPodDisruptionBudget", "CreatedPodDisruptionBudget"]
    assert isinstance(result, budgets.Verdict)
    assert result.status

    # nothing changed, within the recheck period: no call at all
    assert isinstance(await keeper.keep(meta, spec, [], stored(result)), budgets_apply.Unchanged)
    assert len(fake.calls) == 3

    # the annotation removed: the condition tells that budgets were made; they go, then the condition
    off_meta, off_spec = setup(group("small"), on=None)
    assert await keeper.keep(off_meta, off_spec, [], stored(result)) is None
    assert fake.calls[3:] == [("list", "ns"), ("delete", "rc-pdb-head"), ("delete", "rc-pdb-worker-small")]
    assert fake.objects == {}
    # ... and a cluster without the annotation or the condition costs no call
    assert isinstance(await keeper.keep(off_meta, off_spec, [], None), budgets_apply.Unchanged)
    assert len(fake.calls) == 6


async def test_a_forbidden_answer_names_the_chart_value_once(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, events = FakePdbs(monkeypatch), EventLog()
    fake.refuse = KubeError("list poddisruptionbudgets in ns: 403 forbidden", 403)
    keeper = budgets_apply.BudgetKeeper(None, events, recheck=0.0)  # type: ignore[arg-type]
    meta, spec = setup(group("small"))
    result = await keeper.keep(meta, spec, [], None)
    assert isinstance(result, budgets.Verdict)
    assert (result.status, result.reason) == (False, "Forbidden")
    assert "podDisruptionBudgets.enabled=true" in result.message
    assert events.reasons() == ["DisruptionBudgetForbidden"]
    again = await keeper.keep(meta, spec, [], stored(result))
    assert again == result
    assert events.reasons() == ["DisruptionBudgetForbidden"]
    assert fake.objects == {}


async def test_a_conflict_is_a_warning_event_and_the_other_budgets_are_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake, events = FakePdbs(monkeypatch), EventLog()
    fake.objects["team"] = foreign("team", {"matchLabels": {L.RAY_CLUSTER: "rc", L.NODE_TYPE: L.HEAD}})
    keeper = budgets_apply.BudgetKeeper(None, events, recheck=60.0)  # type: ignore[arg-type]
    meta, spec = setup(group("small"))
    result = await keeper.keep(meta, spec, [], None)
    assert isinstance(result, budgets.Verdict)
    assert result.reason == "ConflictingBudget"
    assert sorted(fake.objects) == ["rc-pdb-worker-small", "team"]
    assert events.reasons("Warning") == ["ConflictingDisruptionBudget"]
    assert "PodDisruptionBudget ns/team selects pods of the head" in events.events[-1].message


async def test_a_reconcile_writes_the_condition_and_removes_it_with_the_annotation(
    monkeypatch: pytest.MonkeyPatch, kube_ops: FakeKubeOps
) -> None:
    """The wiring in RayClusterController: the budgets are kept after the pods, and the condition
    goes into the status the reconcile writes."""
    fake = FakePdbs(monkeypatch)
    body = cluster(group("small"))
    body["metadata"]["annotations"] = {DISRUPTION_BUDGET_ANNOTATION: "true"}
    source = FakeClusterSource(body)
    scaler = RayClusterController(None, source, EventLog(), ControllerConfig())  # type: ignore[arg-type]
    await scaler.reconcile(KEY)
    assert sorted(fake.objects) == ["rc-pdb-head", "rc-pdb-worker-small"]
    (written,) = [c for c in kube_ops.statuses[-1]["conditions"] if c["type"] == budgets.CONDITION]
    assert (written["status"], written["reason"]) == ("True", "BudgetsInPlace")

    body["status"] = kube_ops.statuses[-1]
    del body["metadata"]["annotations"]
    body["metadata"]["generation"] = 2
    await scaler.reconcile(KEY)
    assert fake.objects == {}
    assert budgets.CONDITION not in [c["type"] for c in kube_ops.statuses[-1]["conditions"]]


def test_a_budget_over_every_ray_pod_conflicts_before_any_pod_exists() -> None:
    """The labels every pod rayscale creates carries (app.kubernetes.io/name: kuberay, ...) and the
    template's own are judged too, not only the pods there are."""
    template = {
        "metadata": {"labels": {"team": "a"}},
        "spec": {"containers": [{"name": "w", "image": "ray"}]},
    }
    meta, spec = setup(group("small", template=template))
    blanket = foreign("all-ray", {"matchLabels": {L.APP_NAME: L.APP_NAME_VALUE}})
    team = foreign("team-a", {"matchLabels": {"team": "a"}})
    plan = plan_budgets(meta, spec, True, [blanket, team], [])
    assert plan.creates == []
    assert plan.conflicts == [
        ("all-ray", "selects pods of the head"),
        ("all-ray", "selects pods of worker group small"),
        ("team-a", "selects pods of worker group small"),
    ]


def test_a_group_without_a_real_maximum_gets_the_largest_minavailable() -> None:
    """maxReplicas left at its int32 most (a spec without one), times numOfHosts: capped."""
    meta, spec = setup(group("big", max_replicas=2**31 - 1, hosts=2))
    assert wanted(meta, spec)[1].manifest["spec"]["minAvailable"] == budgets.MOST


def test_a_budget_made_with_max_unavailable_0_is_patched_to_min_available() -> None:
    """Budgets made before (maxUnavailable 0, never synced) are patched in place: the patch sets
    minAvailable and nulls maxUnavailable."""
    meta, spec = setup(group("small"))
    made = [copy.deepcopy(b.manifest) for b in wanted(meta, spec)]
    for manifest in made:
        manifest["spec"].pop("minAvailable")
        manifest["spec"]["maxUnavailable"] = 0
    result = plan_budgets(meta, spec, True, made, [])
    assert result.updates["rc-pdb-head"]["spec"]["minAvailable"] == 1
    assert result.updates["rc-pdb-head"]["spec"]["maxUnavailable"] is None
    assert result.updates["rc-pdb-worker-small"]["spec"]["minAvailable"] == 10
