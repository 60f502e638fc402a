"""Worker reconcile planning for one group, pure.

Single-host groups count pods; multi-host groups (numOfHosts > 1) count whole replicas of
`numOfHosts` pods sharing a replica name. Terminating pods count as existing (they are not
replaced until gone) unless they are stuck far past their deletion deadline.
"""

from __future__ import annotations

import dataclasses
import secrets
import string
from collections import defaultdict
from collections.abc import Callable, Sequence

from rayscale.api.raycluster import RayClusterSpec, WorkerGroupSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.replicas import expected_replicas, num_hosts
from rayscale.common import labels as L
from rayscale.common.pods import (
    condition,
    is_terminating,
    is_unhealthy,
    phase,
    pod_labels,
    pod_name,
    replica_index,
)
from rayscale.common.types import Obj
from rayscale.controller import pods as podspec
from rayscale.controller.plan import CreatePod, DeletePod, DeleteWhy, NodeKind

_ALPHABET = string.ascii_lowercase + string.digits


def random_suffix() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(5))


@dataclasses.dataclass
class GroupPlan:
    deletes: list[DeletePod] = dataclasses.field(default_factory=list)
    creates: list[CreatePod] = dataclasses.field(default_factory=list)
    #: no creates this round and reconcile again soon (KubeRay returns an error here)
    requeue: bool = False


def _delete(pod: Obj, group: str, why: DeleteWhy) -> DeletePod:
    return DeletePod(name=pod_name(pod), group=group, kind=NodeKind.WORKER, why=why)


def _scale_down_order(pod: Obj) -> tuple[int, str]:
    """Which surplus pod goes first: those already terminating (nothing more to delete), then
    pending or unready ones, then by name. Among pods alike that is KubeRay v1.6.2's own choice:
    its reconcilePods deletes the first surplus pods as the API server lists them, by name."""
    ready = condition(pod, "Ready")
    healthy = phase(pod) == "Running" and ready is not None and ready.get("status") == "True"
    rank = 0 if is_terminating(pod) else (2 if healthy else 1)
    return rank, pod_name(pod)


def _bounded(replicas: int, hosts: int, max_creates: int | None) -> int:
    """How many of `replicas` missing replicas of `hosts` pods to create under `max_creates` pods:
    at least one while any room is left."""
    if max_creates is None:
        return replicas
    if max_creates <= 0:
        return 0
    return min(replicas, max(max_creates // hosts, 1))


def _lowest_free(used: set[int], count: int) -> list[int]:
    out: list[int] = []
    i = 0
    while len(out) < count:
        if i not in used:
            out.append(i)
        i += 1
    return out


def plan_group(
    meta: ClusterMeta,
    spec: RayClusterSpec,
    group: WorkerGroupSpec,
    pods: Sequence[Obj],
    *,
    random_delete: bool = False,
    suffix: Callable[[], str] = random_suffix,
    max_creates: int | None = None,
) -> GroupPlan:
    """Plan one group. `pods` are the group's pods to count (stuck terminating ones left out).

    `max_creates` bounds the pods created (None: no bound): the rest wait for a later reconcile
    (`requeue`). A multi-host group with any room left creates at least one whole replica.
    """
    name = group.group_name
    plan = GroupPlan()
    if group.suspend:
        plan.deletes = [_delete(p, name, DeleteWhy.SUSPEND_GROUP) for p in pods if not is_terminating(p)]
        return plan
    may_scale_down = not spec.autoscaling or random_delete
    if num_hosts(group) > 1:
        return _plan_multi_host(meta, spec, group, pods, may_scale_down, suffix, max_creates)

    unhealthy = [p for p in pods if is_unhealthy(p)]
    if unhealthy:
        plan.deletes = [_delete(p, name, DeleteWhy.UNHEALTHY) for p in unhealthy]
        plan.requeue = True
        return plan
    named = set((group.scale_strategy.workers_to_delete if group.scale_strategy else None) or [])
    listed = [p for p in pods if pod_name(p) in named]
    plan.deletes = [_delete(p, name, DeleteWhy.WORKERS_TO_DELETE) for p in listed if not is_terminating(p)]
    running = [p for p in pods if pod_name(p) not in named]
    diff = expected_replicas(group) - len(running)
    if diff > 0:
        used = {i for p in running if (i := replica_index(p)) is not None}
        count = _bounded(diff, 1, max_creates)
        plan.requeue = count < diff
        manifests = podspec.worker_pods(meta, spec, group, _lowest_free(used, count))
        plan.creates = [CreatePod(group=name, kind=NodeKind.WORKER, manifest=m) for m in manifests]
    elif diff < 0 and may_scale_down:
        victims = sorted(running, key=_scale_down_order)[:-diff]
        plan.deletes += [_delete(p, name, DeleteWhy.SCALE_DOWN) for p in victims if not is_terminating(p)]
    return plan


def _plan_multi_host(
    meta: ClusterMeta,
    spec: RayClusterSpec,
    group: WorkerGroupSpec,
    pods: Sequence[Obj],
    may_scale_down: bool,
    suffix: Callable[[], str],
    max_creates: int | None = None,
) -> GroupPlan:
    """Whole replicas of `numOfHosts` pods sharing `ray.io/worker-group-replica-name`.

    Pods without that label were created by KubeRay without its RayMultiHostIndexing feature
    (the default before v1.6), one by one: nothing says which of them form a replica. They are
    adopted, never deleted for lacking the label: they count as ceil(n / numOfHosts) replicas
    (so no replica is created beside them), a named or unhealthy one is deleted alone (as KubeRay
    deletes them), and a scale-down removes them `numOfHosts` at a time, an incomplete remainder
    first, then not ready ones, then by name (`_scale_down_order`). New replicas always get the labels.
    """
    name = group.group_name
    hosts = num_hosts(group)
    plan = GroupPlan()
    replicas: dict[str, list[Obj]] = defaultdict(list)
    unlabelled: list[Obj] = []
    for pod in pods:
        replica = pod_labels(pod).get(L.REPLICA_NAME)
        if replica:
            replicas[replica].append(pod)
        else:
            unlabelled.append(pod)

    doomed: dict[str, DeleteWhy] = {}
    for replica, members in replicas.items():
        if len(members) < hosts:
            doomed[replica] = DeleteWhy.INCOMPLETE_REPLICA
        elif any(is_unhealthy(p) for p in members):
            doomed[replica] = DeleteWhy.UNHEALTHY
    named = set((group.scale_strategy.workers_to_delete if group.scale_strategy else None) or [])
    for replica, members in replicas.items():
        if replica not in doomed and any(pod_name(p) in named for p in members):
            doomed[replica] = DeleteWhy.WORKERS_TO_DELETE
    for replica, why in doomed.items():
        plan.deletes += [_delete(p, name, why) for p in replicas[replica] if not is_terminating(p)]
    for pod in unlabelled:
        alone = (
            DeleteWhy.UNHEALTHY
            if is_unhealthy(pod)
            else DeleteWhy.WORKERS_TO_DELETE
            if pod_name(pod) in named
            else None
        )
        if alone is not None and not is_terminating(pod):
            plan.deletes.append(_delete(pod, name, alone))
    if doomed or plan.deletes:
        plan.requeue = True
        return plan

    ordered = sorted(unlabelled, key=_scale_down_order)
    units = list(replicas.values()) + [ordered[i : i + hosts] for i in range(0, len(ordered), hosts)]
    diff = expected_replicas(group) - len(units)
    if diff > 0:
        used = {i for p in pods if (i := replica_index(p)) is not None}
        count = _bounded(diff, hosts, max_creates)
        plan.requeue = count < diff
        for index in _lowest_free(used, count):
            replica_name = f"{name}-{suffix()}"
            for host in range(hosts):
                manifest = podspec.worker_pod(
                    meta, spec, group, replica_index=index, replica_name=replica_name, host_index=host
                )
                plan.creates.append(CreatePod(group=name, kind=NodeKind.WORKER, manifest=manifest))
    elif diff < 0 and may_scale_down:
        # an incomplete run of unlabelled pods first, then as `_scale_down_order`
        units.sort(key=lambda ms: (len(ms) >= hosts, min(_scale_down_order(p) for p in ms)))
        for members in units[:-diff]:
            plan.deletes += [_delete(p, name, DeleteWhy.SCALE_DOWN) for p in members if not is_terminating(p)]
    return plan
