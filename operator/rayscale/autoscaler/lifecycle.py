"""The life of every worker replica, round after round (pure).

A replica is what KubeRay creates and deletes as one: a pod of a single-host group, or all the
pods of a multi-host slice (``numOfHosts > 1``, its pods sharing a replica name). Each round
`next_lives` reads the snapshot (its hosts already joined with Ray's nodes, see snapshot.py),
the pods, Ray's state and the removals the round wrote, and gives every replica one state:

- ``requested``: the spec asks for it, no pod exists yet (an "unborn" replica, named
  ``unborn:<group>:<n>``);
- ``scheduling``: a pod exists but no Kubernetes node took it;
- ``booting``: scheduled but not running yet, or running without a Ray node in the GCS;
- ``ready``: its Ray nodes are alive and at least one is busy (while the GCS cannot be read, a
  running replica stays ready or idle as last seen, and one first seen then is ready);
- ``idle``: every Ray node of it is idle (``idle_since``: since when, as Ray counts it);
- ``draining``: a Ray node of it accepted a drain, its removal was written this round, or its
  pods are being deleted (named in ``workersToDelete``, deleted);
- ``failed``: a pod failed (``POD_FAILED``), it was not provisioned or booted in time and was
  removed (``LAUNCH_FAILED``), or its Ray node died (``NODE_DEAD``). Failed is final: the
  replica stays failed until its pods are gone.

The states of a replica's hosts combine into one: failed before draining, before requested,
scheduling, booting, ready, and idle only when every host is idle.

``since`` is when the replica entered its state, carried over from the previous round while the
state stays. A replica seen for the first time (or moving to a state whose start its clocks
know) takes the start its clocks say: a pod's creation (scheduling), its ``PodScheduled`` time or
when rayscale first saw it running without a Ray node (booting), since when its group has been
short of pods (requested), Ray's idle time (idle).

Replicas that disappear are dropped, except failed ones and removed ones (``removed``: gone
after ``draining``), which are kept as ``gone`` for `GONE_SECONDS` (at most `GONE_MAX`), so a
person can still see what failed or went.

`notices` says which Events a round calls for: a Warning ``ReplicaFailed`` when a replica becomes
failed, and a Warning ``ReplicaSlowToStart`` once per replica that has been starting (requested,
scheduling, booting) longer than ``slow_after`` seconds; never one per pod or per transition.
`replica_summary` is the bounded ``status.autoscaler.replicas``: absolute times only, so an
unchanged cluster gives an unchanged summary.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from rayscale.autoscaler.ray_report import failure_reason
from rayscale.autoscaler.replica_host import (
    RANK,
    STARTING,
    FailureCause,
    HostState,
    ReplicaState,
    host_state,
)
from rayscale.autoscaler.scheduling.model import RemovalCause, Snapshot
from rayscale.autoscaler.snapshot import is_unborn
from rayscale.common.pods import creation_time, pod_name
from rayscale.common.timefmt import parse_time, rfc3339
from rayscale.common.types import Obj
from rayscale.ray import model as ray

__all__ = [
    "GONE_MAX",
    "GONE_SECONDS",
    "SLOW_START_SECONDS",
    "FailureCause",
    "Lives",
    "Notice",
    "ReplicaLife",
    "ReplicaState",
    "next_lives",
    "notices",
    "replica_summary",
    "state_counts",
    "unit",
]

SLOW_START_SECONDS = 600.0  # starting longer than this: one ReplicaSlowToStart Event
GONE_MAX = 20  # failed or removed replicas kept after they are gone, per cluster
GONE_SECONDS = 600.0  # ... for this long
SUMMARY_FAILED = 3  # failed replicas in status.autoscaler.replicas


@dataclass(frozen=True, slots=True)
class ReplicaLife:
    """One replica as of the latest round."""

    group: str
    replica: str  # the replica name (multi-host), the pod name, or unborn:<group>:<n>
    pods: tuple[str, ...]
    ray_nodes: tuple[str, ...]  # the Ray node ids (hex) of its pods, when the GCS knows them
    state: ReplicaState
    since: datetime  # when it entered `state`
    started: datetime  # when it began to start (its first pod's creation, or first seen)
    idle_since: datetime | None = None  # idle: since when every Ray node of it has been idle
    cause: str | None = None  # failed: a FailureCause; draining/removed: the removal cause, if known
    message: str | None = None  # failed: what happened, for a person
    slow: bool = False  # reported as slow to start (once)
    gone: bool = False  # its pods are gone: kept for a while to show what failed or went

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.replica)


@dataclass(frozen=True, slots=True)
class Lives:
    current: tuple[ReplicaLife, ...] = ()
    gone: tuple[ReplicaLife, ...] = ()  # newest first

    @property
    def all(self) -> tuple[ReplicaLife, ...]:
        return self.current + self.gone


@dataclass(frozen=True, slots=True)
class Notice:
    """A Warning Event the round calls for."""

    reason: str  # ReplicaFailed | ReplicaSlowToStart
    message: str


def unit(name: str, replica: str | None) -> str:
    """The replica a host (or a removal) belongs to: its replica name, else its own name."""
    return replica or name


def _entered(state: ReplicaState, hosts: Sequence[HostState], now: datetime) -> datetime:
    """When the replica entered `state`, as its clocks tell (now when they do not)."""
    if state in STARTING:
        waited = max((h.node.pending_seconds for h in hosts if h.state is state), default=0.0)
        return now - timedelta(seconds=waited)
    if state is ReplicaState.IDLE:
        return now - timedelta(seconds=min(h.node.idle_seconds for h in hosts))
    return now


def _started(pods: Iterable[Obj], fallback: datetime) -> datetime:
    created = [t for t in (parse_time(creation_time(p)) for p in pods) if t is not None]
    return min([*created, fallback])


def _life(
    group: str,
    replica: str,
    hosts: Sequence[HostState],
    pods: Mapping[str, Obj],
    ray_ids: Mapping[str, str] | None,  # pod -> its Ray node; None: the GCS cannot be read
    removal: RemovalCause | None,
    snapshot: Snapshot,
    previous: ReplicaLife | None,
    now: datetime,
    slow_after: float,
) -> ReplicaLife:
    names = tuple(h.node.name for h in hosts if not is_unborn(h.node.name))
    ray_nodes = tuple(ray_ids[n] for n in names if n in ray_ids) if ray_ids is not None else ()
    if ray_ids is None and previous is not None and previous.pods == names:
        ray_nodes = previous.ray_nodes  # as last known
    if previous is not None and previous.state is ReplicaState.FAILED:  # final until it is gone
        return dataclasses.replace(previous, pods=names, ray_nodes=ray_nodes)
    worst = hosts[0] if len(hosts) == 1 else min(hosts, key=lambda h: RANK[h.state])
    current, cause, message = worst.state, worst.cause, worst.message
    if removal is RemovalCause.LAUNCH_FAILED:
        late = next((h.node for h in hosts if h.state in STARTING), hosts[0].node)
        current, cause = ReplicaState.FAILED, FailureCause.LAUNCH_FAILED
        message = f"{failure_reason(late, snapshot)}: removed, group {group} backs off"
    elif removal is RemovalCause.NODE_DEAD and current is not ReplicaState.FAILED:
        current, cause, message = ReplicaState.FAILED, FailureCause.NODE_DEAD, "its Ray node died"
    elif removal is not None and current is not ReplicaState.FAILED:
        current, cause = ReplicaState.DRAINING, str(removal)
    running = (ReplicaState.READY, ReplicaState.IDLE)
    if (
        ray_ids is None
        and current is ReplicaState.READY
        and previous is not None
        and previous.state in running
    ):
        current = previous.state  # Ray cannot be asked: as last seen
    if previous is not None and previous.state is current:
        since = previous.since
        cause = cause or previous.cause
    else:
        since = _entered(current, hosts, now)
        if previous is not None:
            since = min(max(since, previous.since), now)
        if current is ReplicaState.DRAINING and cause is None and previous is not None:
            cause = previous.cause
    if previous is not None:
        started = previous.started
    else:
        started = _started((pods[n] for n in names if n in pods), since)
    slow = previous.slow if previous is not None else False
    if not slow and current in STARTING and (now - started).total_seconds() >= slow_after:
        slow = True
    return ReplicaLife(
        group=group,
        replica=replica,
        pods=names,
        ray_nodes=ray_nodes,
        state=current,
        since=since,
        started=started,
        idle_since=since if current is ReplicaState.IDLE else None,
        cause=None if cause is None else str(cause),
        message=message if current is ReplicaState.FAILED else None,
        slow=slow,
    )


def next_lives(
    previous: Lives,
    snapshot: Snapshot,
    pods: Sequence[Obj],
    state: ray.ClusterState | None,
    removed: Mapping[str, RemovalCause],
    now: datetime,
    *,
    slow_after: float = SLOW_START_SECONDS,
    gone_max: int = GONE_MAX,
    gone_seconds: float = GONE_SECONDS,
) -> Lives:
    """Every replica's life after this round.

    `snapshot` is the round's own (not the one a hold gives the scheduler), `pods` the cluster's
    pods it was built from, `state` Ray's state (None: the GCS could not be read), `removed` the
    replicas (see `unit`) whose removal the round wrote, with their cause.
    """
    by_name = {pod_name(p): p for p in pods}
    ray_ids = None if state is None else _ray_ids(state)
    replicas: dict[tuple[str, str], list[HostState]] = {}
    for node in snapshot.nodes:
        replicas.setdefault((node.group, unit(node.name, node.replica)), []).append(
            host_state(node, by_name.get(node.name))
        )
    before = {life.key: life for life in previous.current}
    current: list[ReplicaLife] = []
    left: list[ReplicaLife] = []
    for (group, name), hosts in replicas.items():
        was = before.pop((group, name), None)
        if was is not None and not _continues(was, (h.node.name for h in hosts)):  # a new one, same name
            left.append(was)
            was = None
        current.append(
            _life(group, name, hosts, by_name, ray_ids, removed.get(name), snapshot, was, now, slow_after)
        )
    left += before.values()  # gone
    horizon = now - timedelta(seconds=gone_seconds)
    kept = [g for g in (*(_gone(life, now) for life in left), *previous.gone) if g is not None]
    gone = sorted((g for g in kept if g.since >= horizon), key=lambda g: g.since, reverse=True)
    return Lives(tuple(current), tuple(gone[:gone_max]))


def _ray_ids(state: ray.ClusterState) -> dict[str, str]:
    """Pod name -> the id of its Ray node: the live one, else the latest dead (as
    ``ClusterState.node_by_instance`` chooses, for all pods at once)."""
    out: dict[str, ray.RayNodeState] = {}
    for node in state.nodes:
        was = out.get(node.instance_id)
        if node.instance_id and (was is None or not was.alive):
            out[node.instance_id] = node
    return {pod: node.node_id for pod, node in out.items()}


def _continues(previous: ReplicaLife, pods: Iterable[str]) -> bool:
    """Whether a replica of these `pods` (unborn hosts included) is still the one `previous` was:
    a failed or draining replica ends with its pods (an unborn replica's name, or a slice's
    replica name, may be used again)."""
    if previous.state is not ReplicaState.FAILED and previous.state is not ReplicaState.DRAINING:
        return True
    return not set(previous.pods).isdisjoint(pods)


def _gone(life: ReplicaLife, now: datetime) -> ReplicaLife | None:
    """A replica whose pods are gone, as it is kept: failed ones stay failed, draining ones are
    removed (since now); others are not kept."""
    if life.state is ReplicaState.FAILED:
        return dataclasses.replace(life, gone=True)
    if life.state is ReplicaState.DRAINING:
        return dataclasses.replace(life, state=ReplicaState.REMOVED, since=now, gone=True)
    return None


def notices(previous: Lives, lives: Lives, now: datetime) -> list[Notice]:
    """The Events this round calls for: replicas that became failed, replicas slow to start."""
    before = {life.key: life for life in previous.current}
    out = []
    for life in lives.current:
        was = before.get(life.key)
        if was is not None and not _continues(was, life.pods):
            was = None  # another replica under the same name
        what = f"group {life.group}: replica {life.replica}"
        if life.state is ReplicaState.FAILED and (was is None or was.state is not ReplicaState.FAILED):
            out.append(Notice("ReplicaFailed", f"{what} failed ({life.cause}): {life.message}"))
        if life.slow and (was is None or not was.slow):
            waited = (now - life.started).total_seconds()
            since = f"{life.state} since {rfc3339(life.since)}"
            out.append(Notice("ReplicaSlowToStart", f"{what} has been starting for {waited:.0f}s ({since})"))
    return out


def state_counts(lives: Iterable[ReplicaLife]) -> dict[str, dict[str, int]]:
    """Group -> state -> replicas (groups in the order met, states in the order of ReplicaState)."""
    out: dict[str, dict[ReplicaState, int]] = {}
    for life in lives:
        counts = out.setdefault(life.group, {})
        counts[life.state] = counts.get(life.state, 0) + 1
    return {g: {str(s): c[s] for s in ReplicaState if s in c} for g, c in out.items()}


def _brief(life: ReplicaLife, since: datetime) -> dict[str, Any]:
    out: dict[str, Any] = {"group": life.group, "replica": life.replica, "state": str(life.state)}
    out["since"] = rfc3339(since)
    if life.cause is not None:
        out["cause"] = life.cause
    if life.message is not None:
        out["message"] = life.message[:300]
    return out


def replica_summary(lives: Lives, *, failed_max: int = SUMMARY_FAILED) -> dict[str, Any]:
    """``status.autoscaler.replicas``: counts per group and state, the replica starting the longest
    (``since``: when it began to start), the latest failed ones (gone or not). Times are absolute,
    so the summary of an unchanged cluster does not change."""
    out: dict[str, Any] = {"counts": state_counts(lives.current)}
    starting = [life for life in lives.current if life.state in STARTING]
    if starting:
        oldest = min(starting, key=lambda life: (life.started, life.replica))
        out["oldestStarting"] = _brief(oldest, oldest.started)
    failed = sorted(
        (life for life in lives.all if life.state is ReplicaState.FAILED),
        key=lambda life: (life.since, life.replica),
        reverse=True,
    )
    if failed:
        out["failed"] = [_brief(life, life.since) for life in failed[:failed_max]]
    return out
