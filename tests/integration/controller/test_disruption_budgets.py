"""PodDisruptionBudgets of a RayCluster annotated ``rayscale.io/disruption-budget: "true"``, on a
real API server with its disruption controller (kube-controller-manager) and rayscale running:
the head's and each group's budget are made and owned by the cluster; an eviction (the Eviction
API, what ``kubectl drain``, cluster-autoscaler and Karpenter call) of a worker or of the head is
refused with 429 and the pod stays; a group removed loses its budget, the annotation removed
every one; a budget someone else made over the same pods gets a Warning Event and no second
budget, until it is gone."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from rayscale.api.disruption_annotations import DISRUPTION_BUDGET_ANNOTATION
from tests.support.builders import example
from tests.support.kube import Kube
from tests.support.operators import Operator
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
NAME = "raycluster-basic"
HEAD, CPU, OTHER = f"{NAME}-pdb-head", f"{NAME}-pdb-worker-cpu", f"{NAME}-pdb-worker-other"
CONDITION = "DisruptionBudgets"
WAIT = 60.0


def annotated(groups: int = 2) -> dict[str, Any]:
    """raycluster-basic with 1 worker in group cpu (and in group other), budgets asked for."""
    body = example("raycluster-basic.yaml")
    body["metadata"]["annotations"] = {DISRUPTION_BUDGET_ANNOTATION: "true"}
    cpu = body["spec"]["workerGroupSpecs"][0]
    cpu.update({"replicas": 1, "minReplicas": 0, "maxReplicas": 2})
    if groups == 2:
        other = copy.deepcopy(cpu)
        other["groupName"] = "other"
        body["spec"]["workerGroupSpecs"].append(other)
    return body


def policy(kube: Kube) -> Any:
    return client.PolicyV1Api(kube.core.api_client)


async def budgets(kube: Kube) -> dict[str, Any]:
    items = (await policy(kube).list_namespaced_pod_disruption_budget(kube.ns)).items
    return {p.metadata.name: p for p in items}


def has(names: set[str]) -> Any:
    """A check for `eventually`: the namespace's budgets when their names are exactly `names`."""

    async def check(kube: Kube) -> dict[str, Any] | None:
        found = await budgets(kube)
        return found if set(found) == names else None

    return check


async def evict(kube: Kube, pod: str) -> int:
    """The HTTP status of an eviction of `pod` (201 when it passed)."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": kube.ns}}
    try:
        await kube.core.create_namespaced_pod_eviction(pod, kube.ns, body)
    except ApiException as exc:
        return int(exc.status)
    return 201


async def ready(kube: Kube, group: str) -> list[Any]:
    """The group's one pod, once it is Running and Ready, else []."""
    pods = await kube.pods(NAME, group=group, live=True)
    ok = len(pods) == 1 and any(
        c.type == "Ready" and c.status == "True" for c in pods[0].status.conditions or []
    )
    return pods if ok else []


async def condition(kube: Kube, status: str, reason: str) -> dict[str, Any] | None:
    """The DisruptionBudgets condition once its status and reason are these."""
    found = await kube.condition(NAME, CONDITION)
    return found if found is not None and (found["status"], found["reason"]) == (status, reason) else None


async def condition_gone(kube: Kube) -> bool:
    return await kube.condition(NAME, CONDITION) is None


async def test_budgets_refuse_evictions_and_follow_the_groups_and_the_annotation(
    kube: Kube, operator: Operator
) -> None:
    await kube.create(annotated())
    made = await eventually(lambda: has({HEAD, CPU, OTHER})(kube), timeout=WAIT, message="three budgets")
    cluster = await kube.get(NAME)
    for name, pdb in made.items():
        assert pdb.spec.max_unavailable is None
        assert pdb.spec.min_available == (1 if name == HEAD else 2)  # the head; a group's maxReplicas
        assert pdb.spec.unhealthy_pod_eviction_policy == "AlwaysAllow"
        (owner,) = pdb.metadata.owner_references
        assert (owner.kind, owner.name, owner.uid, owner.controller) == (
            "RayCluster",
            NAME,
            cluster["metadata"]["uid"],
            True,
        )
        assert pdb.metadata.labels["ray.io/cluster"] == NAME
    assert made[CPU].spec.selector.match_labels == {
        "ray.io/cluster": NAME, "ray.io/node-type": "worker", "ray.io/group": "cpu"
    }  # fmt: skip
    found = await eventually(lambda: condition(kube, "True", "BudgetsInPlace"), timeout=WAIT, message="True")
    assert found["message"] == (
        "PodDisruptionBudgets that allow no eviction protect the head, worker group cpu, worker group other"
    )

    # kubectl drain's call: refused, for a Ready worker and for the head (a pod not Ready could go:
    # AlwaysAllow), and the pods stay
    (worker,) = await eventually(lambda: ready(kube, "cpu"), timeout=WAIT, message="a Ready cpu worker")
    (head,) = await eventually(lambda: ready(kube, "headgroup"), timeout=WAIT, message="a Ready head")
    assert await evict(kube, worker.metadata.name) == 429
    assert await evict(kube, head.metadata.name) == 429
    pdb = await policy(kube).read_namespaced_pod_disruption_budget(CPU, kube.ns)
    assert pdb.spec.min_available == 2  # the group's maxReplicas: never fewer than its pods
    assert pdb.status.disruptions_allowed == 0

    async def synced() -> bool:
        """The disruption controller computed the budget (with maxUnavailable it never could: it
        asks the pods' owner, a RayCluster, for a scale)."""
        got = await policy(kube).read_namespaced_pod_disruption_budget(CPU, kube.ns)
        return bool(got.status.observed_generation == got.metadata.generation)

    await eventually(synced, timeout=WAIT, message="the budget synced by the disruption controller")
    still = {p.metadata.name for p in await kube.pods(NAME, live=True)}
    assert {worker.metadata.name, head.metadata.name} <= still

    # edited or deleted by hand: put back at rayscale's next look (the test's resync: 5 s)
    await policy(kube).patch_namespaced_pod_disruption_budget(CPU, kube.ns, {"spec": {"minAvailable": 0}})
    await policy(kube).delete_namespaced_pod_disruption_budget(OTHER, kube.ns)

    async def restored() -> bool:
        found = await has({HEAD, CPU, OTHER})(kube)
        return found is not None and found[CPU].spec.min_available == 2

    await eventually(restored, timeout=WAIT, message="cpu's patched back, other's made again")
    await eventually(
        lambda: kube.events("UpdatedPodDisruptionBudget"), timeout=WAIT, message="UpdatedPodDisruptionBudget"
    )

    # group "other" removed from the spec: its budget goes, the others stay
    await kube.patch_json(NAME, [{"op": "remove", "path": "/spec/workerGroupSpecs/1"}])
    await eventually(lambda: has({HEAD, CPU})(kube), timeout=WAIT, message="other's budget deleted")
    await eventually(
        lambda: kube.events("DeletedPodDisruptionBudget"), timeout=WAIT, message="DeletedPodDisruptionBudget"
    )

    # the annotation removed: every budget goes, and the condition with them; the worker can go
    await kube.patch_json(NAME, [{"op": "remove", "path": "/metadata/annotations"}])

    async def none_left() -> bool:
        return not await budgets(kube)

    await eventually(none_left, timeout=WAIT, message="every budget deleted")
    await eventually(lambda: condition_gone(kube), timeout=WAIT, message="the condition removed")
    assert await evict(kube, worker.metadata.name) == 201


async def test_a_budget_of_someone_else_over_a_group_gets_a_warning_and_no_second(
    kube: Kube, operator: Operator
) -> None:
    theirs = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "team-budget"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"ray.io/group": "cpu"}}},
    }
    await policy(kube).create_namespaced_pod_disruption_budget(kube.ns, theirs)
    await kube.create(annotated(groups=1))
    found = await eventually(
        lambda: condition(kube, "False", "ConflictingBudget"), timeout=WAIT, message="ConflictingBudget"
    )
    assert found["message"].startswith(
        f"PodDisruptionBudget {kube.ns}/team-budget selects pods of worker group cpu"
    )
    warned = await eventually(lambda: kube.events("ConflictingDisruptionBudget"), timeout=WAIT)
    assert warned[0].type == "Warning"
    assert "team-budget" in warned[0].message
    assert set(await budgets(kube)) == {"team-budget", HEAD}  # the head's is made, no second over cpu

    # theirs deleted: rayscale makes its own at its next look (the test's resync: 5 s)
    await policy(kube).delete_namespaced_pod_disruption_budget("team-budget", kube.ns)
    await eventually(lambda: has({HEAD, CPU})(kube), timeout=WAIT, message="cpu's budget made")
    await eventually(lambda: condition(kube, "True", "BudgetsInPlace"), timeout=WAIT, message="True")


async def test_a_value_not_implemented_is_refused_and_nothing_made(kube: Kube, operator: Operator) -> None:
    body = annotated(groups=1)
    body["metadata"]["annotations"][DISRUPTION_BUDGET_ANNOTATION] = "yes"
    await kube.create(body)
    found = await eventually(lambda: kube.condition(NAME, "SpecValid"), timeout=WAIT, message="SpecValid")
    assert found["status"] == "False"
    assert DISRUPTION_BUDGET_ANNOTATION in found["message"]
    warned = await eventually(lambda: kube.events("InvalidRayClusterSpec"), timeout=WAIT)
    assert DISRUPTION_BUDGET_ANNOTATION in warned[0].message
    assert await budgets(kube) == {}
    assert await kube.pods(NAME) == []
