"""The scheduler's Snapshot of one live cluster: spec, pods, Ray's GCS state and RayResourceRequests.

Groups come from the RayCluster spec (the code `rayscale simulate` uses). Nodes are the worker
pods joined with the GCS node states by pod name (a Ray node's ``instance_id``):

- terminating: the pod has a deletionTimestamp, is listed in its group's ``workersToDelete``,
  or has failed (the controller replaces it);
- running: the pod runs and its Ray node is alive; idle time and free resources from Ray (a
  draining node has none free);
- pending: the pod is not running yet, or runs without a live Ray node; aged from creation.

Replicas the spec asks for whose pods do not exist yet are pending "unborn" nodes (named so no pod
can be), so the scheduler neither launches them again nor reads them as removals.

Without the GCS (``state`` None) a running pod counts as running and busy: it is never idle-removed
and never launch-failed because Ray could not be asked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from rayscale.api.raycluster import WorkerGroupSpec
from rayscale.autoscaler.demand import gcs_constraints, gcs_demands, gcs_gangs, request_constraints
from rayscale.autoscaler.scenario import from_raycluster
from rayscale.autoscaler.scheduling.model import (
    Group,
    Node,
    NodeState,
    Snapshot,
)
from rayscale.controller import labels as L
from rayscale.controller.snapshot import (
    creation_time,
    is_terminating,
    is_unhealthy,
    is_worker,
    parse_time,
    phase,
    pod_group,
    pod_labels,
    pod_name,
)
from rayscale.controller.workers import expected_replicas
from rayscale.ray import model as ray

__all__ = [
    "MAX_NODE_PROVISION_ANNOTATION",
    "UNBORN_PREFIX",
    "build_snapshot",
    "is_unborn",
    "short_groups",
]

Obj = Mapping[str, Any]

MAX_NODE_PROVISION_ANNOTATION = "rayscale.io/max-node-provision-seconds"
UNBORN_PREFIX = "unborn:"  # ':' never appears in a pod name


def is_unborn(name: str) -> bool:
    """A node that stands for a replica the spec asks for but whose pod does not exist yet."""
    return name.startswith(UNBORN_PREFIX)


def build_snapshot(
    cluster: Obj,
    pods: Sequence[Obj],
    state: ray.ClusterState | None,
    requests: Sequence[Obj],
    backing_off: Collection[str],
    now: datetime,
    *,
    max_node_provision_seconds: float = 900.0,
    short_since: Mapping[str, datetime] | None = None,
) -> Snapshot:
    """The Snapshot of `cluster`; `pods` are its pods, `requests` the RayResourceRequests in its namespace.

    `short_since`: group -> since when it has had fewer pods than its replicas ask for (see
    `short_groups`); its missing replicas are pending that long, so replicas whose pods are never
    created (a quota or an admission webhook refuses them) fail to launch like unscheduled pods.

    Raises ScenarioError or pydantic's ValidationError when the spec cannot be read.
    """
    groups, options = from_raycluster(cluster)
    groups = tuple(dataclasses.replace(g, backoff=g.name in backing_off) for g in groups)
    options = dataclasses.replace(
        options, max_node_provision_seconds=_provision_seconds(cluster, max_node_provision_seconds)
    )
    constraints = gcs_constraints(state) + request_constraints(cluster, requests)
    return Snapshot(
        groups=groups,
        nodes=_nodes(cluster, groups, pods, state, now, short_since or {}),
        demands=gcs_demands(state),
        gangs=gcs_gangs(state),
        constraints=constraints,
        options=options,
    )


def _provision_seconds(cluster: Obj, default: float) -> float:
    annotations = (cluster.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(MAX_NODE_PROVISION_ANNOTATION)
    try:
        value = float(text) if text is not None else default
    except ValueError:
        return default
    return value if value >= 0 else default


# ----------------------------------------------------------------------------- nodes


def _listed(cluster: Obj) -> dict[str, set[str]]:
    """Group name -> the pod names in its scaleStrategy.workersToDelete."""
    out: dict[str, set[str]] = {}
    for spec in (cluster.get("spec") or {}).get("workerGroupSpecs") or []:
        names = ((spec.get("scaleStrategy") or {}).get("workersToDelete")) or []
        out[str(spec.get("groupName"))] = {str(n) for n in names}
    return out


def _spec_replicas(cluster: Obj) -> dict[str, int]:
    """Group name -> the replicas the controller is bringing up (its own rule)."""
    specs = (cluster.get("spec") or {}).get("workerGroupSpecs") or []
    parsed = (WorkerGroupSpec.model_validate(s) for s in specs)
    return {g.group_name: expected_replicas(g) for g in parsed}


def _age(pod: Obj, now: datetime) -> float:
    created = parse_time(creation_time(pod))
    return 0.0 if created is None else max((now - created).total_seconds(), 0.0)


def _node(pod: Obj, group: Group, listed: set[str], state: ray.ClusterState | None, now: datetime) -> Node:
    name = pod_name(pod)
    replica = pod_labels(pod).get(L.REPLICA_NAME) if group.num_of_hosts > 1 else None
    base = Node(name=name, group=group.name, replica=replica)
    if is_terminating(pod) or name in listed or is_unhealthy(pod):
        return dataclasses.replace(base, state=NodeState.TERMINATING)
    running = phase(pod) == "Running"
    if state is None:
        if running:  # Ray cannot be asked: busy, never idle-removed
            return base
        return dataclasses.replace(base, state=NodeState.PENDING, pending_seconds=_age(pod, now))
    found = state.node_by_instance(name)
    if not running or found is None or not found.alive:
        return dataclasses.replace(base, state=NodeState.PENDING, pending_seconds=_age(pod, now))
    if found.status is ray.NodeStatus.DRAINING:
        # Accepted a drain whose patch has not landed yet: it takes no work, and stays the
        # first to go, so the next decision names it again.
        return dataclasses.replace(base, available={}, idle_seconds=found.idle_duration_ms / 1000)
    return dataclasses.replace(
        base, available=dict(found.available_resources), idle_seconds=found.idle_seconds
    )


def short_groups(snapshot: Snapshot) -> frozenset[str]:
    """The groups with replicas that no pod holds yet (unborn nodes in the snapshot)."""
    return frozenset(n.group for n in snapshot.nodes if is_unborn(n.name))


def _unborn(group: Group, count: int, pending_seconds: float) -> list[Node]:
    """`count` replicas of `group` that the spec asks for and no pod holds yet."""
    out = []
    for r in range(count):
        replica = f"{UNBORN_PREFIX}{group.name}:{r}"
        for h in range(group.num_of_hosts):
            name = replica if group.num_of_hosts == 1 else f"{replica}:{h}"
            out.append(
                Node(
                    name=name,
                    group=group.name,
                    state=NodeState.PENDING,
                    replica=replica if group.num_of_hosts > 1 else None,
                    pending_seconds=pending_seconds,
                )
            )
    return out


def _nodes(
    cluster: Obj,
    groups: Sequence[Group],
    pods: Sequence[Obj],
    state: ray.ClusterState | None,
    now: datetime,
    short_since: Mapping[str, datetime],
) -> tuple[Node, ...]:
    by_name = {g.name: g for g in groups}
    listed = _listed(cluster)
    nodes: list[Node] = []
    for pod in sorted(pods, key=pod_name):
        group = by_name.get(pod_group(pod))
        if group is not None and is_worker(pod):
            nodes.append(_node(pod, group, listed.get(group.name, set()), state, now))
    wanted = _spec_replicas(cluster)
    for group in groups:
        live = {
            n.replica or n.name
            for n in nodes
            if n.group == group.name and n.state is not NodeState.TERMINATING
        }
        since = short_since.get(group.name)
        short_for = 0.0 if since is None else max((now - since).total_seconds(), 0.0)
        nodes += _unborn(group, wanted.get(group.name, 0) - len(live), short_for)
    return tuple(nodes)
