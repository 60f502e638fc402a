"""What rayscale tells Ray's GCS after each decision (``ReportAutoscalingState``). Pure.

Ray's own autoscaler reports its view every round, and ``ray status``, the dashboard and the
drivers' "Adding N node(s)" lines read it back from the GCS. rayscale fills it the same way:

- pending instance requests: the replicas the spec asks for whose pods do not exist yet, and this
  decision's launches, one entry per host (``count`` 1) stamped with when it was asked for; ``ray
  status`` prints "<group>, N launching" by counting entries, so one per host keeps N right;
- pending instances: pods that exist without a live Ray node, with what they wait for
  ("pod pending: unschedulable", "pod running: waiting for its Ray node", ...);
- failed instance requests: the recent launch failures the caller keeps (see ``remember``);
- infeasible requests: demand no scaling can place (NO_MATCHING_GROUP, MAX_REPLICAS,
  MAX_WORKERS; never BACKOFF or UPSCALING_LIMIT, which pass), echoed as the GCS sent it. With
  ``RAY_enable_infeasible_task_early_exit`` the GCS fails the queued tasks whose resource shape
  matches one of them, by shape alone (not label selectors), so a shape is reported only when no
  demand of that shape is placed or merely waiting: a task rayscale is launching a node for is
  never failed because another task of the same shape cannot be served.

Versions: the GCS keeps the report with the highest ``autoscaler_state_version`` and drops older
ones, and it forgets nothing when rayscale restarts, so ``next_version`` never goes back: it is at
least the wall clock in milliseconds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from rayscale.autoscaler.demand import gcs_gangs
from rayscale.autoscaler.scheduling.model import (
    RAY_REQUEST_UNIT,
    Decision,
    DemandKind,
    Node,
    NodeState,
    RemovalCause,
    Snapshot,
    Unmet,
    UnmetReason,
)
from rayscale.autoscaler.snapshot import is_unborn
from rayscale.common.pods import condition
from rayscale.common.types import Obj
from rayscale.ray import model as ray

__all__ = [
    "FAILURE_MEMORY_SECONDS",
    "INFEASIBLE",
    "LaunchFailure",
    "autoscaling_state",
    "failure_reason",
    "launch_failures",
    "next_version",
    "pending_details",
    "remember",
]

Shape = tuple[tuple[str, float], ...]

FAILURE_MEMORY_SECONDS = 600.0  # how long a launch failure stays under "Recent failures"
INFEASIBLE = frozenset({UnmetReason.NO_MATCHING_GROUP, UnmetReason.MAX_REPLICAS, UnmetReason.MAX_WORKERS})
MAX_COPIES = 100  # infeasible requests echoed per GCS request (Ray sends one per task; a cap bounds the size)
MAX_FAILURES = 100  # failed-instance entries per report (`ray status` shows 20)


@dataclass(frozen=True, slots=True)
class LaunchFailure:
    """`count` hosts of `group` that were asked for at `started` and given up at `failed`."""

    group: str
    count: int
    reason: str
    started: datetime
    failed: datetime


# ----------------------------------------------------------------------------- versions


def next_version(previous: int | None, state: ray.ClusterState, now: datetime) -> int:
    """The ``autoscaler_state_version`` of the next report.

    Above the previous one, above what the GCS says it has seen, and at least the wall clock in
    milliseconds, so a restarted rayscale (which remembers nothing) is not ignored by a GCS that
    still holds the reports of the one before it.
    """
    return max((previous or 0) + 1, state.last_seen_autoscaler_state_version + 1, int(now.timestamp() * 1000))


# ----------------------------------------------------------------------------- launch failures


def failure_reason(node: Node | None, snapshot: Snapshot) -> str:
    """Why the host `node` (None: unknown) failed to launch, as Ray's "Recent failures" say it."""
    options = snapshot.options
    if node is not None and node.refused:
        return "pod refused by a ResourceQuota or the group's scaleGate"
    if node is None or is_unborn(node.name):
        return f"pod not created within {options.max_node_provision_seconds:g}s"
    if node.booting:
        return f"pod scheduled but no Ray node within {options.max_node_boot_seconds:g}s"
    return f"pod not scheduled within {options.max_node_provision_seconds:g}s"


def launch_failures(
    snapshot: Snapshot, decision: Decision, now: datetime, landed: Iterable[str] | None = None
) -> tuple[LaunchFailure, ...]:
    """The hosts this decision removes as LAUNCH_FAILED, as launch failures per group and reason.

    `landed`: the removed hosts whose removal was written (pod names, unborn names); None: all.
    A host was asked for ``pending_seconds`` ago (its provisioning clock).
    """
    only = None if landed is None else set(landed)
    nodes = {n.name: n for n in snapshot.nodes}
    counts: Counter[tuple[str, str, datetime]] = Counter()
    for removal in decision.terminate:
        if removal.reason is not RemovalCause.LAUNCH_FAILED or (
            only is not None and removal.name not in only
        ):
            continue
        node = nodes.get(removal.name)
        started = now - timedelta(seconds=node.pending_seconds if node is not None else 0.0)
        counts[(removal.group, failure_reason(node, snapshot), started.replace(microsecond=0))] += 1
    return tuple(
        LaunchFailure(group, count, reason, started, now)
        for (group, reason, started), count in sorted(counts.items())
    )


def remember(
    kept: Sequence[LaunchFailure],
    new: Iterable[LaunchFailure],
    now: datetime,
    keep_seconds: float = FAILURE_MEMORY_SECONDS,
) -> tuple[LaunchFailure, ...]:
    """The launch failures to report from now on: `kept` and `new`, less those older than `keep_seconds`."""
    horizon = now - timedelta(seconds=keep_seconds)
    return tuple(f for f in (*kept, *new) if f.failed >= horizon)


def _failed(failures: Sequence[LaunchFailure]) -> tuple[ray.FailedInstanceRequest, ...]:
    """One entry per host, like Ray's reconciler; the newest first, at most MAX_FAILURES."""
    out: list[ray.FailedInstanceRequest] = []
    for f in sorted(failures, key=lambda f: f.failed, reverse=True):
        entry = ray.FailedInstanceRequest(
            ray_node_type_name=f.group,
            count=1,
            reason=f.reason,
            start_ts=_seconds(f.started),
            failed_ts=_seconds(f.failed),
        )
        out += [entry] * max(0, min(f.count, MAX_FAILURES - len(out)))
    return tuple(out)


# ----------------------------------------------------------------------------- pending


def _seconds(when: datetime) -> int:
    return int(when.timestamp())


def _waiting_reason(pod: Obj) -> str:
    """The first reason a container of `pod` gives for waiting (ContainerCreating, ImagePullBackOff...)."""
    status = pod.get("status") or {}
    for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (cs.get("state") or {}).get("waiting")
        if isinstance(waiting, Mapping) and waiting.get("reason"):
            return str(waiting["reason"])
    return ""


def pending_details(node: Node, pod: Obj | None) -> str:
    """What a pod without a live Ray node waits for, in a few words (``ray status`` lowercases it)."""
    if pod is None:
        return "pod being created"
    phase = str((pod.get("status") or {}).get("phase") or "Pending")
    if phase == "Running":
        return "pod running: waiting for its Ray node"
    scheduled = condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False":
        return f"pod {phase.lower()}: {str(scheduled.get('reason') or 'not scheduled').lower()}"
    waiting = _waiting_reason(pod)
    if waiting:
        return f"pod {phase.lower()}: {waiting.lower()}"
    if node.booting or (scheduled is not None and scheduled.get("status") == "True"):
        return f"pod {phase.lower()}: starting"
    return f"pod {phase.lower()}"


def _pod_ip(pod: Obj | None) -> str:
    return str(((pod or {}).get("status") or {}).get("podIP") or "")


def _pending(
    snapshot: Snapshot, decision: Decision, now: datetime, pods: Sequence[Obj]
) -> tuple[tuple[ray.PendingInstanceRequest, ...], tuple[ray.PendingInstance, ...]]:
    removed = {r.name for r in decision.terminate}
    by_name = {str((p.get("metadata") or {}).get("name") or ""): p for p in pods}
    requests: list[ray.PendingInstanceRequest] = []
    instances: list[ray.PendingInstance] = []
    for node in snapshot.nodes:
        if node.state is not NodeState.PENDING or node.name in removed:
            continue
        if is_unborn(node.name):
            asked = now - timedelta(seconds=node.pending_seconds)
            requests.append(ray.PendingInstanceRequest(node.group, 1, _seconds(asked)))
            continue
        pod = by_name.get(node.name)
        instances.append(
            ray.PendingInstance(
                instance_id=node.name,
                ray_node_type_name=node.group,
                details=pending_details(node, pod),
                ip_address=_pod_ip(pod),
            )
        )
    hosts = {g.name: g.num_of_hosts for g in snapshot.groups}
    for name, chosen in decision.groups.items():
        launched = chosen.launch * hosts.get(name, 1)
        requests += [ray.PendingInstanceRequest(name, 1, _seconds(now))] * max(launched, 0)
    return tuple(requests), tuple(instances)


# ----------------------------------------------------------------------------- infeasible


def _shape(resources: Mapping[str, float] | None) -> Shape:
    return tuple(sorted((k, float(v)) for k, v in (resources or {}).items() if v))


def _gang_key(strategy: object, bundles: Iterable[Mapping[str, float]]) -> tuple[str, tuple[Shape, ...]]:
    return str(strategy), tuple(_shape(b) for b in bundles)


def _hopeless(decision: Decision, kind: DemandKind, key: Any) -> set[Any]:
    """Keys (see `key`) of `kind` whose every entry is unmet for good: none placed or only waiting."""
    bad: set[Any] = set()
    good: set[Any] = set()
    for u in decision.unmet:
        if u.kind == kind:
            (bad if u.reason in INFEASIBLE else good).add(key(u))
    for p in decision.placements:
        if p.kind == kind:
            good.add(key(p))
    return bad - good


def _infeasible_requests(decision: Decision, state: ray.ClusterState) -> tuple[ray.ResourceRequest, ...]:
    shapes = _hopeless(decision, DemandKind.DEMAND, lambda u: _shape(u.resources))
    out: list[ray.ResourceRequest] = []
    for demand in state.pending_requests:
        if demand.count > 0 and _shape(demand.request.resources) in shapes:
            out += [demand.request] * min(demand.count, MAX_COPIES)
    return tuple(out)


def _infeasible_gangs(decision: Decision, state: ray.ClusterState) -> tuple[ray.GangRequest, ...]:
    keys = _hopeless(decision, DemandKind.GANG, lambda u: _gang_key(u.strategy, u.bundles or ()))
    out = []
    for gang in state.pending_gangs:
        one = ray.ClusterState(version=state.version, session_name="", nodes=(), pending_gangs=(gang,))
        translated = gcs_gangs(one)
        if translated and _gang_key(translated[0].strategy, translated[0].bundles) in keys:
            out.append(gang)
    return tuple(out)


def _ray_unit(unmet: Unmet, ray_shapes: set[Shape]) -> bool:
    """Whether an unmet constraint entry is Ray's request_resources (not a RayResourceRequest)."""
    if unmet.unit is not None:
        return unmet.unit == RAY_REQUEST_UNIT
    return _shape(unmet.resources) in ray_shapes  # a decision that does not name units


def _infeasible_constraints(
    decision: Decision, state: ray.ClusterState
) -> tuple[tuple[ray.ResourceDemand, ...], ...]:
    if not state.constraints:
        return ()
    ray_shapes = {_shape(d.request.resources) for c in state.constraints for d in c}
    asked = [u for u in decision.unmet if u.kind == DemandKind.CONSTRAINT]
    reasons = {u.reason for u in asked if _ray_unit(u, ray_shapes)}
    if reasons and reasons <= INFEASIBLE:
        return state.constraints
    return ()


# ----------------------------------------------------------------------------- the report


def autoscaling_state(
    snapshot: Snapshot,
    decision: Decision,
    state: ray.ClusterState,
    failures: Sequence[LaunchFailure],
    now: datetime,
    *,
    version: int,
    pods: Sequence[Obj] = (),
) -> ray.AutoscalingState:
    """The report after `decision` (made from `snapshot`, read from `state`).

    `failures`: the recent launch failures (``remember``); `version`: ``next_version``; `pods`: the
    cluster's pods, for what the pending ones wait for and their IPs.
    """
    requests, instances = _pending(snapshot, decision, now, pods)
    return ray.AutoscalingState(
        last_seen_cluster_resource_state_version=state.version,
        autoscaler_state_version=version,
        pending_instance_requests=requests,
        pending_instances=instances,
        failed_instance_requests=_failed(failures),
        infeasible_resource_requests=_infeasible_requests(decision, state),
        infeasible_gang_resource_requests=_infeasible_gangs(decision, state),
        infeasible_cluster_resource_constraints=_infeasible_constraints(decision, state),
    )
