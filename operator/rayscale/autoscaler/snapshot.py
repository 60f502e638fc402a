"""The scheduler's Snapshot of one live cluster: spec, pods, Ray's GCS state and RayResourceRequests.

Groups come from the RayCluster spec as `spec_reader` reads it (as `rayscale simulate` does).
Nodes are the worker pods joined with the GCS node states by pod name (a Ray node's ``instance_id``):

- terminating: the pod has a deletionTimestamp, is listed in its group's ``workersToDelete``,
  or has failed (the controller replaces it);
- draining: its Ray node accepted a drain (rayscale's own, accepted and its removal not written
  yet; or anyone's, once the node is idle), or a disruption notice deletes it this round
  (``draining`` too): it takes no work and always goes (DRAINED);
- leaving for a disruption notice, not deleted yet (``leaving``: its Ray node is asked to drain
  for preemption, and still works, or has not shown the drain yet): draining as if drained by
  someone else while it works (below), whatever Ray says, so that it takes no new work and
  its replacement need not wait for it to go;
- drained by someone else (``ray drain-node``, a preemption notice) and still running work (the
  GCS says DRAINING, no idle time, some resources in use): draining with Ray's free resources
  (`drained_while_working`): it stays, as Ray keeps it, takes no new work and does not count
  towards its group's minimum; it goes once idle or dead;
- dead: the pod runs but its Ray node is DEAD: it goes (NODE_DEAD), without backoff;
- running: the pod runs and its Ray node is alive; idle time, free resources and labels from Ray;
- pending, not booting: the pod is not scheduled to a Kubernetes node yet; aged from its creation
  (the provisioning limit applies), or sooner past it when nothing will provision a node for it,
  or booting from its creation while a node is being provisioned for it (provisioning.py);
- pending, booting: the pod is scheduled but not running (aged from its PodScheduled time), or
  runs without any Ray node in the GCS (aged from when rayscale first saw it so, `missing_since`):
  the longer boot limit applies.

The hosts of a multi-host replica are listed host 0 first (`slice_host_rank`: what the running Ray
node reports, else the pod's ``ray.io/replica-host-index``), in the places the replica's pods hold
in name order: the scheduler gives host 0's capacity (a TPU slice's ``TPU-<type>-head``) to the
first host of a replica it reads.

Replicas the spec asks for whose pods do not exist yet are pending "unborn" nodes (named so no pod
can be), so the scheduler neither launches them again nor reads them as removals.

Without the GCS (``state`` None) a running pod counts as running and busy: it is never idle-removed
and never launch-failed because Ray could not be asked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from rayscale.api.raycluster import RayClusterSpec
from rayscale.autoscaler.demand import (
    gcs_constraints,
    gcs_demands,
    gcs_gangs,
    head_node,
    request_constraints,
)
from rayscale.autoscaler.provisioning import Provisioning, unscheduled_clock
from rayscale.autoscaler.refusals import gated_refused
from rayscale.autoscaler.replica_hosts import group_unlabelled, host_order, host_rank
from rayscale.autoscaler.scheduling.model import (
    Group,
    Node,
    NodeState,
    Snapshot,
)
from rayscale.autoscaler.spec_reader import ScalingSpec, read_spec
from rayscale.cluster.replicas import expected_replicas
from rayscale.common import labels as L
from rayscale.common.pods import (
    condition,
    creation_time,
    is_scheduling_gated,
    is_terminating,
    is_unhealthy,
    is_worker,
    phase,
    pod_group,
    pod_labels,
    pod_name,
)
from rayscale.common.timefmt import parse_time
from rayscale.common.types import Obj
from rayscale.ray import model as ray

__all__ = [
    "MAX_NODE_BOOT_ANNOTATION",
    "MAX_NODE_PROVISION_ANNOTATION",
    "UNBORN_PREFIX",
    "UNPROVISIONED_GRACE_ANNOTATION",
    "build_snapshot",
    "is_unborn",
    "ray_missing_since",
    "short_groups",
    "still_working",
]


MAX_NODE_PROVISION_ANNOTATION = "rayscale.io/max-node-provision-seconds"
MAX_NODE_BOOT_ANNOTATION = "rayscale.io/max-node-boot-seconds"
UNPROVISIONED_GRACE_ANNOTATION = "rayscale.io/unprovisioned-grace-seconds"
UNBORN_PREFIX = "unborn:"  # ':' never appears in a pod name


def is_unborn(name: str) -> bool:
    """A node that stands for a replica the spec asks for but whose pod does not exist yet."""
    return name.startswith(UNBORN_PREFIX)


def build_snapshot(
    cluster: ScalingSpec | Obj,
    pods: Sequence[Obj],
    state: ray.ClusterState | None,
    requests: Sequence[Obj],
    backing_off: Collection[str],
    now: datetime,
    *,
    max_node_provision_seconds: float = 900.0,
    max_node_boot_seconds: float = 3600.0,
    short_since: Mapping[str, datetime] | None = None,
    missing_since: Mapping[str, datetime] | None = None,
    draining: Collection[str] = (),
    leaving: Collection[str] = (),
    max_pods: int | None = None,
    provisioning: Mapping[str, Provisioning] | None = None,
    unprovisioned_grace_seconds: float = 120.0,
    refused: Collection[str] = (),
) -> Snapshot:
    """The Snapshot of `cluster`; `pods` are its pods, `requests` the RayResourceRequests in its namespace.

    `cluster`: the RayCluster as `spec_reader.read_spec` read it (what the live round passes: the
    manifest is read there, once), or its manifest, read here (only the CRD's shape is required).
    Raises SpecError when a manifest cannot be read.

    `short_since`: group -> since when it has had fewer pods than its replicas ask for (see
    `short_groups`); its missing replicas are pending that long, so replicas whose pods are never
    created (a quota or an admission webhook refuses them) fail to launch like unscheduled pods.

    `missing_since`: pod -> since when it has run without a Ray node in the GCS (see
    `ray_missing_since`); a running pod not in it has just been seen so.

    `draining`: pods whose Ray node accepted rayscale's drain while their removal is not written
    yet, and the pods a disruption notice deletes this round; they are draining whatever the
    GCS says, and go (DRAINED).

    `leaving`: the pods a disruption notice takes, waiting for their Ray node's work to end or for
    the notice's deadline (rayscale.disruption.plan); they stay, held (`drained_while_working`),
    whatever the GCS says.

    `max_pods`: the worker pods the cluster may have (``--max-pods-per-cluster``; None: no limit),
    applied when a manifest is read here (`read_spec` applies it otherwise). A spec asking for more
    is refused (SpecError) before any per-replica work, and the decision never goes past it
    (``max_workers``, only set when the groups' maxima could).

    `provisioning`: what node provisioners said about unscheduled pods (provisioning.py; None: the
    Events could not be read, and unscheduled pods age from their creation only);
    `unprovisioned_grace_seconds` (or the cluster's annotation): how long an unschedulable pod no
    provisioner is scaling up for waits before it fails to launch.

    `refused`: the groups a quota refuses or a scale gate holds (refusals.py): they launch nothing,
    and their replicas that no pod holds, beyond the group's minReplicas, fail to launch now, as do
    their pods a scheduling gate holds (Kueue's, until the slice it cannot admit is admitted).
    """
    scaling = cluster
    if not isinstance(scaling, ScalingSpec):
        scaling = read_spec(scaling, check=False, max_pods=max_pods)
    annotations = scaling.meta.annotations
    groups, options = scaling.groups, scaling.options
    groups = tuple(
        dataclasses.replace(g, backoff=g.name in backing_off, refused=g.name in refused) for g in groups
    )
    options = dataclasses.replace(
        options,
        max_node_provision_seconds=_seconds(
            annotations, MAX_NODE_PROVISION_ANNOTATION, max_node_provision_seconds
        ),
        max_node_boot_seconds=_seconds(annotations, MAX_NODE_BOOT_ANNOTATION, max_node_boot_seconds),
    )
    constraints = gcs_constraints(state) + request_constraints(scaling.meta, requests)
    grace = _seconds(annotations, UNPROVISIONED_GRACE_ANNOTATION, unprovisioned_grace_seconds)
    clocks = _Clocks(
        now,
        missing_since or {},
        frozenset(draining),
        provisioning,
        options.max_node_provision_seconds,
        grace,
        frozenset(leaving),
    )
    return Snapshot(
        groups=groups,
        nodes=_nodes(scaling.spec, groups, pods, state, clocks, short_since or {}),
        demands=gcs_demands(state),
        gangs=gcs_gangs(state),
        constraints=constraints,
        options=options,
        head=head_node(state),
    )


def _seconds(annotations: Mapping[str, str], annotation: str, default: float) -> float:
    """A non-negative number of seconds from the cluster's `annotation`, else `default`."""
    text = annotations.get(annotation)
    try:
        value = float(text) if text is not None else default
    except ValueError:
        return default
    return value if value >= 0 else default


def ray_missing_since(
    pods: Sequence[Obj], state: ray.ClusterState | None, previous: Mapping[str, datetime], now: datetime
) -> dict[str, datetime]:
    """Pod -> since when it has been running without any Ray node in the GCS.

    A running worker pod the GCS does not know keeps its time from `previous`, else starts now;
    a pod whose Ray node appeared (alive or dead), that stopped running or that is gone is
    dropped. Without the GCS nothing can be told: `previous` stays, minus the pods that are gone.
    """
    if state is None:
        names = {pod_name(p) for p in pods}
        return {name: since for name, since in previous.items() if name in names}
    out: dict[str, datetime] = {}
    for pod in pods:
        name = pod_name(pod)
        if not is_worker(pod) or phase(pod) != "Running" or is_terminating(pod):
            continue
        if state.node_by_instance(name) is None:
            out[name] = previous.get(name, now)
    return out


# ----------------------------------------------------------------------------- nodes


@dataclasses.dataclass(frozen=True, slots=True)
class _Clocks:
    now: datetime
    missing_since: Mapping[str, datetime]
    draining: frozenset[str]
    provisioning: Mapping[str, Provisioning] | None = None
    provision_seconds: float = 900.0
    grace_seconds: float = 120.0
    leaving: frozenset[str] = frozenset()

    def since(self, moment: datetime | None) -> float:
        return 0.0 if moment is None else max((self.now - moment).total_seconds(), 0.0)


def _listed(spec: RayClusterSpec) -> dict[str, set[str]]:
    """Group name -> the pod names in its scaleStrategy.workersToDelete."""
    return {g.group_name: set(g.to_delete) for g in spec.workers}


def _not_running(pod: Obj, base: Node, clocks: _Clocks) -> Node:
    """A pod not running yet: booting once scheduled (aged from then), else aged from creation."""
    scheduled = condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "True":
        at = parse_time(scheduled.get("lastTransitionTime")) or parse_time(creation_time(pod))
        return dataclasses.replace(
            base, state=NodeState.PENDING, booting=True, pending_seconds=clocks.since(at)
        )
    clock = unscheduled_clock(
        pod,
        clocks.now,
        (clocks.provisioning or {}).get(base.name),
        known=clocks.provisioning is not None,
        provision_seconds=clocks.provision_seconds,
        grace_seconds=clocks.grace_seconds,
    )
    return dataclasses.replace(
        base, state=NodeState.PENDING, booting=clock.booting, pending_seconds=clock.pending_seconds
    )


def _node(pod: Obj, group: Group, listed: set[str], state: ray.ClusterState | None, clocks: _Clocks) -> Node:
    name = pod_name(pod)
    replica = pod_labels(pod).get(L.REPLICA_NAME) if group.num_of_hosts > 1 else None
    base = Node(name=name, group=group.name, replica=replica)
    if is_terminating(pod) or name in listed or is_unhealthy(pod):
        return dataclasses.replace(base, state=NodeState.TERMINATING)
    if name in clocks.draining:  # accepted rayscale's drain: it must go, whatever Ray says now
        return dataclasses.replace(base, state=NodeState.DRAINING)
    if name in clocks.leaving:  # a disruption notice takes it: held, no new work, until it goes
        found = state.node_by_instance(name) if state is not None else None
        free = dict(found.available_resources) if found is not None and found.alive else {}
        return dataclasses.replace(base, state=NodeState.DRAINING, available=free, idle_seconds=0.0)
    if phase(pod) != "Running":
        return _not_running(pod, base, clocks)
    if state is None:  # Ray cannot be asked: busy, never idle-removed
        return base
    found = state.node_by_instance(name)
    if found is None:  # runs, but Ray has no node for it (yet, or any more): still booting
        missing = clocks.missing_since.get(name, clocks.now)
        return dataclasses.replace(
            base, state=NodeState.PENDING, booting=True, pending_seconds=clocks.since(missing)
        )
    if found.status is ray.NodeStatus.DEAD:
        return dataclasses.replace(base, state=NodeState.DEAD, available={})
    if not found.alive:  # a status Ray does not define: treat it like no node at all
        missing = clocks.missing_since.get(name, clocks.now)
        return dataclasses.replace(
            base, state=NodeState.PENDING, booting=True, pending_seconds=clocks.since(missing)
        )
    labels = {**found.labels, **found.dynamic_labels} or None
    if found.status is ray.NodeStatus.DRAINING and still_working(found):
        # Drained by someone else (rayscale's own is in clocks.draining) and still running work:
        # Ray keeps it until it is idle or dead (`drained_while_working`: its free resources given).
        return dataclasses.replace(
            base, state=NodeState.DRAINING, available=dict(found.available_resources), labels=labels
        )
    if found.status is ray.NodeStatus.DRAINING:
        # Accepted a drain and idle: it takes no work and goes (DRAINED).
        return dataclasses.replace(
            base, state=NodeState.DRAINING, idle_seconds=found.idle_duration_ms / 1000, labels=labels
        )
    return dataclasses.replace(
        base, available=dict(found.available_resources), idle_seconds=found.idle_seconds, labels=labels
    )


def still_working(found: ray.RayNodeState) -> bool:
    """Whether a Ray node runs work: Ray reports no idle time and some of its resources in use."""
    if found.idle_duration_ms > 0:
        return False
    free = found.available_resources
    return any(free.get(name, 0.0) < total for name, total in found.total_resources.items())


def short_groups(snapshot: Snapshot) -> frozenset[str]:
    """The groups with replicas that no pod holds yet (unborn nodes in the snapshot)."""
    return frozenset(n.group for n in snapshot.nodes if is_unborn(n.name))


def _unborn(group: Group, count: int, pending_seconds: float, live: int) -> list[Node]:
    """`count` replicas of `group` that the spec asks for and no pod holds yet (`live`: those pods
    hold). A refused group's beyond its minReplicas are refused: they fail now."""
    out = []
    for r in range(count):
        refused = group.refused and live + r >= group.min_replicas
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
                    refused=refused,
                )
            )
    return out


def _nodes(
    spec: RayClusterSpec,
    groups: Sequence[Group],
    pods: Sequence[Obj],
    state: ray.ClusterState | None,
    clocks: _Clocks,
    short_since: Mapping[str, datetime],
) -> tuple[Node, ...]:
    by_name = {g.name: g for g in groups}
    listed = _listed(spec)
    nodes: list[Node] = []
    ranks: dict[str, int] = {}
    for pod in sorted(pods, key=pod_name):
        group = by_name.get(pod_group(pod))
        if group is not None and is_worker(pod):
            nodes.append(_node(pod, group, listed.get(group.name, set()), state, clocks))
            if group.num_of_hosts > 1:
                ranks[pod_name(pod)] = host_rank(pod, state)
    nodes = gated_refused(nodes, by_name, {pod_name(p) for p in pods if is_scheduling_gated(p)})
    nodes = host_order(group_unlabelled(nodes, by_name), ranks)
    wanted = {g.group_name: expected_replicas(g) for g in spec.workers}  # the controller's own rule
    for group in groups:
        live = {
            n.replica or n.name
            for n in nodes
            if n.group == group.name and n.state is not NodeState.TERMINATING
        }
        short_for = clocks.since(short_since.get(group.name))
        nodes += _unborn(group, wanted.get(group.name, 0) - len(live), short_for, len(live))
    return tuple(nodes)
