"""Disruption notices of a RayCluster rayscale runs but does not autoscale. I/O.

A RayCluster with ``enableInTreeAutoscaling`` off has the replicas its user wrote: nothing of
rayscale's autoscaler touches it (loop.py: ``_not_taken``). Its pods still go when Kubernetes
takes their node away, and a notice of that (a cordon, a cluster-autoscaler or Karpenter taint, a
spot notice, a pod's ``DisruptionTarget``: rayscale.disruption.notice) is acted on here as for an
autoscaled cluster, with the same pure plan (disruptions.py ``plan_round``: a multi-host replica as
a whole, the earliest deadline of its hosts, hard or soft):

- the Ray nodes of the unit's hosts are asked to drain (``PREEMPTION``, the notice's message and
  deadline; `GcsLink.preempt`), the accepted drains remembered across rounds (``asked``), with the
  notice each was asked for (`NoticesOnly`'s own memory): a drain for preemption cannot be taken
  back, so a unit drained stays leaving until it is gone, even once its node's notice went;
- the unit's pods are deleted, all hosts together, when the plan says so (idle after the drain,
  no live Ray node, or the deadline passed), directly through the operator's fenced client (a Pod
  ``DELETE``, as a removed worker group's pods are: removal_round.py). The replicas are the
  user's: the controller creates the replacement as for any missing pod, so it starts only once
  the pod is gone (an autoscaled cluster starts it at once); the cordoned node takes none;
- the head is never drained nor deleted: a notice of it is a ``DisruptionHead`` Warning, once;
- the Events (``DisruptionDrain``, ``DisruptionDelete``) and the ``Disruption`` condition are an
  autoscaled cluster's (reporter.py, disruptions.py); ``status.autoscaler`` holds that condition
  beside what the loop leaves there (the ``IdleTermination`` one, when opted in), nothing else;
- while Ray's view cannot be trusted (trust.py: the head's raylet not running, the GCS just back
  after an outage, a new GCS session's grace) drains are asked and nothing is deleted.

Only while the cluster is `concerned` (a live pod on a node with a notice, a pod with its own
notice, or a unit drained in an earlier round still there) does the loop read its GCS and come
back every ``--autoscaler-interval``; a fixed cluster without a notice costs no GCS read. Under
``--mode all`` the loop's ``_idle_only`` calls `act` (with the state it reads for the idle clock
too); under ``--mode controller``, where rayscale autoscales no cluster, `alone` is the whole round,
for a fixed cluster and for one whose head runs Ray's own autoscaler alike (that autoscaler's
``replicas`` stand: the pod deleted, the controller makes it again elsewhere). Not beside
KubeRay's operator (``--mode autoscaler``): KubeRay runs those clusters there.

`clusters_on` is what a Node's notice marks: every cluster with a pod on the node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from rayscale.autoscaler.disruptions import CONDITION, disruption_condition, plan_round, remember_asked
from rayscale.autoscaler.gcs_link import GcsLink
from rayscale.autoscaler.idle_apply import status_patch
from rayscale.autoscaler.memory import Shared
from rayscale.autoscaler.reporter import Reporter
from rayscale.autoscaler.spec_reader import ScalingSpec
from rayscale.autoscaler.trust import hold, next_session
from rayscale.common.pods import is_terminating, pod_name
from rayscale.common.types import ClusterKey, Obj
from rayscale.disruption.notice import Notice, pod_notice
from rayscale.disruption.plan import DisruptionPlan
from rayscale.disruption.units import strongest
from rayscale.kube import ops
from rayscale.ray.model import ClusterState

__all__ = ["ClusterListing", "NoticesOnly", "cleared", "clusters_on", "noticed", "own_notices", "status_with"]

log = logging.getLogger(__name__)


@runtime_checkable
class ClusterListing(Protocol):
    """A source that can list every RayCluster it holds (the operator's indexes)."""

    def cluster_keys(self) -> Sequence[ClusterKey]: ...


class _Pods(Protocol):
    def pods(self, key: ClusterKey) -> Sequence[Obj]: ...


def clusters_on(node: str, source: _Pods, remembered: Iterable[ClusterKey], every: bool) -> list[ClusterKey]:
    """The clusters with a pod on `node`: among `remembered` (the autoscaler's memory) and, when
    `every` and `source` can list its clusters, every cluster it holds. No pods-by-node index
    exists: this walks the pods of every cluster once, O(pods rayscale watches), for each change of
    a Node's notice (rare: a cordon, a taint), never per pod event."""
    keys = dict.fromkeys(remembered)
    if every and isinstance(source, ClusterListing):
        keys.update(dict.fromkeys(source.cluster_keys()))
    return [k for k in keys if any((p.get("spec") or {}).get("nodeName") == node for p in source.pods(k))]


def _notice(pod: Obj, nodes: Mapping[str, Notice], now: datetime) -> Notice | None:
    """The strongest notice of `pod`'s node and of the pod itself."""
    node = (pod.get("spec") or {}).get("nodeName")
    return strongest((nodes.get(node) if node else None, pod_notice(pod, now)))


def noticed(
    pods: Sequence[Obj], nodes: Mapping[str, Notice], remembered: Collection[str], now: datetime
) -> bool:
    """Whether a live pod of `pods` has a notice (its node's, its own) or was drained for one
    before (`remembered`)."""
    live = [p for p in pods if not is_terminating(p)]
    return any(pod_name(p) in remembered or _notice(p, nodes, now) is not None for p in live)


def own_notices(
    remembered: Mapping[str, Notice],
    pods: Sequence[Obj],
    nodes: Mapping[str, Notice],
    accepted: Collection[str],
    asked: Collection[str],
    now: datetime,
) -> dict[str, Notice]:
    """Pod -> the notice its accepted drain was asked for, while its drain is remembered
    (`asked`): `remembered` and, for the pods whose drain was `accepted` now, their notice now."""
    out = {pod: notice for pod, notice in remembered.items() if pod in asked}
    for pod in pods:
        name = pod_name(pod)
        found = _notice(pod, nodes, now) if name in accepted else None
        if found is not None:
            out[name] = found
    return out


def status_with(
    written: Mapping[str, Any] | None, idle: Obj | None, disruption: Obj | None
) -> dict[str, Any] | None:
    """The merge patch of a fixed cluster's status that makes ``status.autoscaler.conditions``
    just `idle` and `disruption` (None: nothing to write)."""
    if disruption is None:
        return status_patch(written, idle)
    conditions = [dict(c) for c in (idle, disruption) if c is not None]
    old = dict(written or {})
    if old == {"conditions": conditions}:
        return None
    cleared: dict[str, Any] = {k: None for k in old if k != "conditions"}
    return {"status": {"autoscaler": {**cleared, "conditions": conditions}}}


def cleared(written: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Under ``--mode controller``: the merge patch removing ``status.autoscaler`` when it holds the
    ``Disruption`` condition written here (None: it does not; nothing else writes it there)."""
    found = any(c.get("type") == CONDITION for c in (written or {}).get("conditions") or ())
    return {"status": {"autoscaler": None}} if found else None


class NoticesOnly:
    def __init__(self, shared: Shared, link: GcsLink, reporter: Reporter) -> None:
        self.shared = shared
        self.link = link
        self.reporter = reporter
        self._notices: dict[ClusterKey, dict[str, Notice]] = {}  # pod -> the notice it drained for
        self._deleted: dict[ClusterKey, frozenset[str]] = {}  # pods deleted here, while they exist
        self._conditions: dict[ClusterKey, Obj] = {}  # the Disruption condition written last

    def concerned(self, key: ClusterKey, *, deleting: bool) -> bool:
        """Whether the cluster `key` (one rayscale runs but does not autoscale: in-tree
        autoscaling off, or under ``--mode controller`` Ray's own autoscaler in its head;
        `deleting`: it is being deleted) has a notice to act on now. No I/O: its pods and the
        Nodes' notices as the watches show them."""
        if self.shared.config.beside_kuberay or deleting:
            return False
        remembered = self._notices.get(key, {})
        return noticed(self.shared.pods(key), self.shared.node_notices, remembered, self.shared.wall_clock())

    def forget(self, key: ClusterKey) -> None:
        self._notices.pop(key, None)
        self._deleted.pop(key, None)
        self._conditions.pop(key, None)

    async def act(self, key: ClusterKey, scaling: ScalingSpec, state: ClusterState | None) -> Obj | None:
        """One round of `key`'s notices on Ray's `state` (None: the GCS did not answer): drains
        asked, units deleted, Events posted; the ``Disruption`` condition (None: nothing leaving)."""
        memory = self.shared.memories.of(key)
        pods = list(self.shared.pods(key))
        now, clock = self.shared.wall_clock(), self.shared.clock()
        remembered = self._notices.get(key, {})
        own = {pod: notice for pod, notice in remembered.items() if pod in memory.asked}
        plan = plan_round(scaling.groups, pods, state, self.shared.node_notices, memory.asked, now, own=own)
        accepted = await self.link.preempt(key, plan.drains)
        memory.asked = remember_asked(memory.asked, plan.drains, accepted, pods, now)
        nodes = self.shared.node_notices
        self._notices[key] = own_notices(remembered, pods, nodes, accepted, memory.asked, now)
        memory.disruption = plan
        session = next_session(memory.session, state, clock)
        memory.session = session
        held = hold(state, session, clock, self.shared.config.head_restart_grace_seconds, memory.back_at)
        removed = frozenset() if held is not None else await self._delete(key, plan, pods)
        if held is not None and plan.deletes:
            log.info("%s/%s: disrupted pods not deleted while Ray's view settles (%s)", *key, held.reason)
        self.reporter.disrupted(key, scaling, plan, accepted=accepted, removed=removed)
        return self._condition(key, plan, scaling.written, now)

    async def alone(self, key: ClusterKey, scaling: ScalingSpec) -> float:
        """``--mode controller``, where rayscale autoscales no cluster: a round of the notices of a
        `concerned` cluster and nothing else (its requests and the rest untouched); the seconds to
        the next."""
        self.shared.memories.of(key).dormant = False
        disrupted = await self.act(key, scaling, await self.link.state(key, scaling))
        await self.reporter.write_cluster_status(key, status_with(scaling.written, None, disrupted))
        return self.shared.config.interval

    async def _delete(self, key: ClusterKey, plan: DisruptionPlan, pods: Sequence[Obj]) -> frozenset[str]:
        """Delete the pods `plan` deletes (each once while it exists; a failed DELETE is tried again
        the next round); the ones deleted now."""
        existing = {pod_name(p) for p in pods}
        before = self._deleted.get(key, frozenset()) & existing
        todo = [d.pod for d in plan.deletes if d.pod not in before]
        sent = (ops.delete_pod(self.shared.api, key[0], pod) for pod in todo)
        results = await asyncio.gather(*sent, return_exceptions=True)
        deleted = set()
        for pod, result in zip(todo, results, strict=True):
            if isinstance(result, ops.KubeError):
                log.warning("deleting pod %s of %s/%s for a disruption notice failed: %s", pod, *key, result)
            elif isinstance(result, BaseException):
                raise result
            else:
                log.info("deleted pod %s of %s/%s for a disruption notice (the controller replaces it)",
                         pod, *key)  # fmt: skip
                deleted.add(pod)
        self._deleted[key] = before | deleted
        return frozenset(deleted)

    def _condition(
        self, key: ClusterKey, plan: DisruptionPlan, written: Obj | None, now: datetime
    ) -> Obj | None:
        """The ``Disruption`` condition now, keeping its time from the one written last (the watch
        may not show that write yet)."""
        last = self._conditions.get(key)
        has = any(c.get("type") == CONDITION for c in (written or {}).get("conditions") or ())
        old = written if has or last is None else {"conditions": [last]}
        found = disruption_condition(plan, now, old)
        if found is None:
            self._conditions.pop(key, None)
            return None
        self._conditions[key] = found
        return found
