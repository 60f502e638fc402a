"""PodDisruptionBudgets over a RayCluster's pods (annotation ``rayscale.io/disruption-budget``), pure.

With the annotation ``"true"`` a RayCluster gets one budget over its head and one over each worker
group, each with a ``minAvailable`` no smaller than the pods it may select (1 for the head; for a
group, its most replicas times ``numOfHosts``): the API server refuses every voluntary eviction of
their pods (``kubectl drain``, cluster-autoscaler, Karpenter), so that the node's notice goes through
Ray's drain instead of killing its work. Not ``maxUnavailable: 0``: for it (and for a percentage)
the disruption controller asks the pods' owner for its scale, a RayCluster has none, and the
budget never synced (``SyncFailed``; each eviction was then refused as "still being processed",
and ``kubectl drain`` waited in silence). An integer ``minAvailable`` needs no owner.
``unhealthyPodEvictionPolicy: AlwaysAllow`` lets a pod
that is not Ready (no Ray work to lose) be evicted, so a broken pod never blocks a node's drain.

The budgets are owned by the RayCluster (they go with it) and labelled as its Services are. One
that another writer made and that selects the same pods is a conflict: two budgets over one pod
make every eviction of it fail, so rayscale makes none there (and removes its own if it had one)
and says which budget is in the way. A group removed from the spec loses its budget; the
annotation removed (or ``"false"``), every budget rayscale made for the cluster goes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rayscale.api.disruption_annotations import DISRUPTION_BUDGET_ANNOTATION
from rayscale.api.raycluster import RayClusterSpec, WorkerGroupSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.replicas import expected_replicas, num_hosts
from rayscale.common import labels as L
from rayscale.common.types import Manifest, Obj
from rayscale.controller import pods as podspec

#: the RayCluster's condition: True while every budget is in place, False with why not
CONDITION = "DisruptionBudgets"
API_VERSION = "policy/v1"
#: the spec keys rayscale sets on its budgets (and compares, to update one edited by hand)
_SPEC_KEYS = ("selector", "maxUnavailable", "minAvailable", "unhealthyPodEvictionPolicy")


@dataclasses.dataclass(frozen=True)
class Budget:
    """One budget rayscale wants: its manifest, what it protects, and the labels a pod it protects
    will carry (the pods that exist may carry more)."""

    manifest: Manifest
    what: str  # "the head" | "worker group <name>"
    pod_labels: Mapping[str, str]

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


@dataclasses.dataclass
class BudgetPlan:
    """What to do about a cluster's budgets: objects to create, to update (merge patches by name),
    names to delete, the budgets of others in the way, and the budgets in place once done."""

    creates: list[Manifest] = dataclasses.field(default_factory=list)
    updates: dict[str, Manifest] = dataclasses.field(default_factory=dict)
    deletes: list[str] = dataclasses.field(default_factory=list)
    conflicts: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (their name, why)
    protected: list[str] = dataclasses.field(default_factory=list)  # what the budgets protect


def budget_name(cluster: str, group: str | None) -> str:
    """``<cluster>-pdb-head``, or ``<cluster>-pdb-worker-<group>``: never the same for two sets
    of pods (a group may be called ``head``)."""
    return f"{cluster}-pdb-head" if group is None else f"{cluster}-pdb-worker-{group}"


#: the largest ``minAvailable`` (an int32)
MOST = 2**31 - 1


def most_pods(group: WorkerGroupSpec) -> int:
    """The most pods worker group `group` may have: its most replicas times ``numOfHosts``."""
    return min(MOST, max(group.max_replicas, expected_replicas(group), 0) * num_hosts(group))


def _manifest(meta: ClusterMeta, name: str, selector: Mapping[str, str], least: int) -> Manifest:
    return {
        "apiVersion": API_VERSION,
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": name,
            "namespace": meta.namespace,
            "labels": {
                L.RAY_CLUSTER: meta.name,
                L.APP_NAME: L.APP_NAME_VALUE,
                L.CREATED_BY: L.CREATED_BY_VALUE,
            },
            "ownerReferences": [meta.owner_reference()],
        },
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "minAvailable": least,
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def wanted(meta: ClusterMeta, spec: RayClusterSpec) -> list[Budget]:
    """The head's budget, then one per worker group, in the spec's order; each with the labels
    its pods are created with (`rayscale.controller.pods`, the one builder of them)."""
    head_selector = {L.RAY_CLUSTER: meta.name, L.NODE_TYPE: L.HEAD}
    head_pod = podspec.head_pod(meta, spec)
    out = [
        Budget(
            _manifest(meta, budget_name(meta.name, None), head_selector, 1),
            "the head",
            dict(head_pod["metadata"]["labels"]),
        )
    ]
    for group in spec.workers:
        selector = {L.RAY_CLUSTER: meta.name, L.NODE_TYPE: L.WORKER, L.GROUP: group.group_name}
        pod = podspec.worker_pod(meta, spec, group, replica_index=0)
        out.append(
            Budget(
                _manifest(meta, budget_name(meta.name, group.group_name), selector, most_pods(group)),
                f"worker group {group.group_name}",
                dict(pod["metadata"]["labels"]),
            )
        )
    return out


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a label selector (``matchLabels`` and ``matchExpressions``) selects `labels`, as a
    PodDisruptionBudget's does: a null selector selects nothing, an empty one every pod."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False  # the API server refuses any other; never read as a match
    return True


def owned(pdb: Obj, meta: ClusterMeta) -> bool:
    """Whether rayscale made `pdb` for this RayCluster: its controller owner is the cluster."""
    refs = (pdb.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("controller") and ref.get("uid") == meta.uid for ref in refs)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _drifted(have: Obj, want: Manifest) -> Manifest | None:
    """A merge patch that makes `have` (one of ours) `want` again, or None when it is."""
    spec = have.get("spec") or {}
    patch: dict[str, Any] = {}
    if any(spec.get(k) != want["spec"].get(k) for k in _SPEC_KEYS):
        patch["spec"] = {k: want["spec"].get(k) for k in _SPEC_KEYS}
    labels = (have.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in want["metadata"]["labels"].items()):
        patch["metadata"] = {"labels": want["metadata"]["labels"]}
    return patch or None


def plan_budgets(
    meta: ClusterMeta,
    spec: RayClusterSpec,
    enabled: bool,
    pdbs: Sequence[Obj],
    pods: Sequence[Obj],
) -> BudgetPlan:
    """What to create, update and delete, from the namespace's PodDisruptionBudgets `pdbs` and the
    cluster's `pods`. A budget of another writer that selects a pod of one of ours (or the labels
    its pods will carry) is a conflict: none of ours there."""
    plan = BudgetPlan()
    ours = {_name(p): p for p in pdbs if owned(p, meta)}
    theirs = [p for p in pdbs if not owned(p, meta)]
    wanted_by_name: dict[str, Budget] = {b.name: b for b in wanted(meta, spec)} if enabled else {}
    for name, budget in wanted_by_name.items():
        mine = [budget.pod_labels] + [
            (p.get("metadata") or {}).get("labels") or {}
            for p in pods
            if selects(budget.manifest["spec"]["selector"], (p.get("metadata") or {}).get("labels") or {})
        ]
        blocking = [
            (_name(t), f"selects pods of {budget.what}")
            for t in theirs
            if any(selects((t.get("spec") or {}).get("selector"), m) for m in mine)
        ]
        if name in (_name(t) for t in theirs) and name not in (b[0] for b in blocking):
            blocking.append((name, f"has the name of the budget of {budget.what}"))
        if blocking:
            plan.conflicts.extend(sorted(blocking))
            if name in ours:
                plan.deletes.append(name)
            continue
        plan.protected.append(budget.what)
        if name not in ours:
            plan.creates.append(budget.manifest)
        elif (patch := _drifted(ours[name], budget.manifest)) is not None:
            plan.updates[name] = patch
    plan.deletes.extend(sorted(n for n in ours if n not in wanted_by_name))
    return plan


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The condition to set (None: remove it) and the Warning Event to post with it, if any."""

    status: bool
    reason: str
    message: str
    warning: str | None = None  # the Event's reason


def conflict_message(meta: ClusterMeta, conflicts: Sequence[tuple[str, str]]) -> str:
    """What the budgets of others in the way are, and what to do about them."""
    named = "; ".join(f"PodDisruptionBudget {meta.namespace}/{n} {why}" for n, why in conflicts)
    return (
        f"{named}: rayscale did not make it and makes no second budget over the same pods (the"
        " eviction API refuses every pod that two budgets select); delete it, or remove the"
        f" annotation {DISRUPTION_BUDGET_ANNOTATION}"
    )


def verdict(meta: ClusterMeta, enabled: bool, plan: BudgetPlan | None, error: str | None) -> Verdict | None:
    """The condition after applying `plan` (None when the budgets could not even be listed),
    `error` the failed call's message, if one failed."""
    if error is not None:
        return Verdict(False, "ApplyFailed", error, "FailedToApplyPodDisruptionBudget")
    if not enabled or plan is None:
        return None
    if plan.conflicts:
        return Verdict(
            False, "ConflictingBudget", conflict_message(meta, plan.conflicts), "ConflictingDisruptionBudget"
        )
    message = "PodDisruptionBudgets that allow no eviction protect " + ", ".join(plan.protected)
    return Verdict(True, "BudgetsInPlace", message)


def forbidden_verdict(meta: ClusterMeta, error: str, chart_value: str) -> Verdict:
    """The condition when the API server answers 403: the operator may not manage budgets."""
    message = (
        f"rayscale may not manage PodDisruptionBudgets in namespace {meta.namespace} ({error}): install"
        f" the chart with {chart_value}=true, or grant its ServiceAccount get, list, create, patch and"
        " delete on poddisruptionbudgets.policy"
    )
    return Verdict(False, "Forbidden", message, "DisruptionBudgetForbidden")
