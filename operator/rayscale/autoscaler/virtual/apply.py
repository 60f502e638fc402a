"""Carry out a VC plan: pod labels, the Ray nodes' VC resources, statuses, finalizers, Events.

Kubernetes is the source of truth: a pod's labels say which VC (and job cluster) holds it; the
Ray side is made to match on every round (so a raylet that restarted, or a head that came back,
gets its resources again). Label writes not yet seen in the pod cache are kept in an overlay so
the next round does not hand the same pod out twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rayscale.api.virtualcluster_names import FINALIZER, JOB_LABEL, VC_LABEL
from rayscale.autoscaler.scheduling.model import Snapshot
from rayscale.autoscaler.virtual.model import Member, VcPlan
from rayscale.autoscaler.virtual.raysync import VC_AMOUNT, resizes, wanted
from rayscale.autoscaler.virtual.read import Reading, members_of, read
from rayscale.autoscaler.virtual.report import Busy, status_of, status_patch
from rayscale.kube import ops
from rayscale.kube.events import EventSink
from rayscale.ray import model as ray
from rayscale.ray.client import GcsClient, GcsError
from rayscale.ray.raylet import RayletClient

__all__ = ["VirtualClusters"]

log = logging.getLogger(__name__)
Obj = Mapping[str, Any]
Key = tuple[str, str]
RVC_API = {"apiVersion": "rayscale.io/v1alpha1", "kind": "RayVirtualCluster"}
FINISHED = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})


class VirtualClusters:
    """The I/O of virtual clusters for the autoscaler loop, one instance for every cluster."""

    def __init__(self, api: Any, events: EventSink) -> None:
        self.api = api
        self.events = events
        self._overlay: dict[Key, dict[str, Member | None]] = {}
        self._warned: dict[tuple[str, str], str] = {}  # (namespace, vc) -> the message last posted

    # ---- reading ----

    def read(self, key: Key, cluster: Obj, objects: Sequence[Obj], pods: Sequence[Obj]) -> Reading:
        overlay = self._overlay.get(key, {})
        seen = members_of(pods)
        for pod in [p for p, m in overlay.items() if seen.get(p) == m]:
            del overlay[pod]  # the cache shows it now
        return read(cluster, objects, pods, overlay)

    async def finished_jobs(self, reading: Reading, gcs: GcsClient | None) -> frozenset[str]:
        """Submission ids of Ray jobs that ended; asked only when a divisible VC exists."""
        if gcs is None or not any(v.divisible for v in reading.vcs):
            return frozenset()
        try:
            jobs = await gcs.get_all_job_info()
        except GcsError as exc:
            log.info("Ray jobs not read (%s); job clusters wait", exc)
            return frozenset()
        return frozenset(
            j.submission_id
            for j in jobs
            if j.submission_id and (j.status in FINISHED or (j.status is None and j.is_dead))
        )

    # ---- applying ----

    async def apply(
        self,
        key: Key,
        reading: Reading,
        plan: VcPlan | None,
        snapshot: Snapshot,
        state: ray.ClusterState | None,
        gcs: GcsClient | None,
        token: str | None,
        now: datetime,
    ) -> None:
        namespace = key[0]
        assign = dict(plan.assign) if plan is not None else {}
        for pod in await self._leave(reading.members, assign, state, gcs, token):
            del assign[pod]  # its raylet still runs work of the VC: it stays
        await self._labels(key, assign)
        members = dict(reading.members)
        for pod, member in assign.items():
            if member is None:
                members.pop(pod, None)
            else:
                members[pod] = member
        if state is not None and gcs is not None:
            await self._ray(members, state, gcs, token)
        busy = await self._busy(reading, members, state, gcs)
        nodes = {n.name: n for n in snapshot.nodes}
        ids = {n.instance_id: n.node_id for n in state.nodes} if state is not None else {}
        by_name = {v.name: v for v in reading.vcs}
        for name, obj in reading.objects.items():
            errors = reading.errors.get(name, ())
            status = status_of(
                obj,
                errors=errors,
                vc=by_name.get(name),
                plan=plan,
                members=members,
                nodes=nodes,
                node_ids=ids,
                busy=busy.get(name),
                gcs=state is not None,
                now=now,
            )
            await self._write(namespace, obj, status)
            self._warn(namespace, obj, errors)
            holding = any(m.vc == name for m in members.values())
            removed = plan is not None and name in plan.removed
            await self._finalizer(namespace, obj, release=(removed or bool(errors)) and not holding)

    async def not_taken(self, key: Key, objects: Sequence[Obj], why: str, now: datetime) -> None:
        """The RayCluster is gone or not autoscaled by rayscale: its VCs say so; deleting them
        is not held up (no node is assigned by anyone)."""
        for obj in objects:
            status = status_of(obj, errors=(why,), now=now)
            await self._write(key[0], obj, status)
            self._warn(key[0], obj, (why,))
            await self._finalizer(key[0], obj, release=True)

    def forget(self, key: Key) -> None:
        self._overlay.pop(key, None)

    async def _labels(self, key: Key, assign: Mapping[str, Member | None]) -> None:
        overlay = self._overlay.setdefault(key, {})
        for pod, member in sorted(assign.items()):
            labels: dict[str, str | None] = {VC_LABEL: None, JOB_LABEL: None}
            if member is not None:
                labels[VC_LABEL] = member.vc
                labels[JOB_LABEL] = member.job
            try:
                if await ops.patch_pod_labels(self.api, key[0], pod, labels):
                    overlay[pod] = member
                    log.info("pod %s/%s: virtual cluster %s", key[0], pod, member.part if member else "none")
            except ops.KubeError as exc:
                log.warning("labels of pod %s/%s not written: %s", key[0], pod, exc)

    async def _leave(
        self,
        members: Mapping[str, Member],
        assign: Mapping[str, Member | None],
        state: ray.ClusterState | None,
        gcs: GcsClient | None,
        token: str | None,
    ) -> set[str]:
        """Take the VC resource away from each Ray node leaving its VC (or job cluster) before
        its label changes. The raylet keeps what running work holds (the GCS's idle view can lag
        a second behind), so a node whose resource does not drop to 0 is busy: it gets its
        resource back and stays. Returns those pods. Without the GCS nothing leaves."""
        leaving = {
            pod: [k for k in wanted(members[pod]) if k not in wanted(new)]
            for pod, new in assign.items()
            if pod in members and members[pod] != new
        }
        leaving = {p: keys for p, keys in leaving.items() if keys}
        if not leaving:
            return set()
        if state is None or gcs is None:
            return set(leaving)
        live = {n.instance_id for n in state.nodes if n.alive}
        infos = await self._addresses(gcs) if live & set(leaving) else {}
        refused: set[str] = set()
        for pod, keys in sorted(leaving.items()):
            if pod not in live:
                continue  # no Ray node: nothing can run there
            info = infos.get(pod)
            if info is None:
                refused.add(pod)
                continue
            try:
                async with RayletClient(info.raylet_address, token=token) as raylet:
                    totals = await raylet.resize_local_resources(dict.fromkeys(keys, 0.0))
                    if any(totals.get(k, 0.0) > 0 for k in keys):
                        await raylet.resize_local_resources(dict.fromkeys(keys, VC_AMOUNT))
                        refused.add(pod)
                        log.info(
                            "pod %s stays in its virtual cluster: its Ray node still runs work there", pod
                        )
            except GcsError as exc:
                log.warning("VC resources of pod %s not released: %s", pod, exc)
                refused.add(pod)
        return refused

    async def _addresses(self, gcs: GcsClient) -> dict[str, ray.NodeInfo]:
        try:
            return {i.instance_id: i for i in await gcs.get_all_node_info(alive_only=True) if i.instance_id}
        except GcsError as exc:
            log.info("Ray nodes not read (%s); VC resources wait", exc)
            return {}

    async def _ray(
        self, members: Mapping[str, Member], state: ray.ClusterState, gcs: GcsClient, token: str | None
    ) -> None:
        wanted = resizes(members, state.nodes)
        if not wanted:
            return
        infos = await self._addresses(gcs)

        async def resize(pod: str, change: Mapping[str, float]) -> None:
            info = infos.get(pod)
            if info is None:
                return
            try:
                async with RayletClient(info.raylet_address, token=token) as raylet:
                    await raylet.resize_local_resources(change)
            except GcsError as exc:
                log.warning("VC resources of Ray node %s (pod %s) not set: %s", info.node_id, pod, exc)

        await asyncio.gather(*(resize(p, c) for p, c in sorted(wanted.items())))

    async def _busy(
        self,
        reading: Reading,
        members: Mapping[str, Member],
        state: ray.ClusterState | None,
        gcs: GcsClient | None,
    ) -> dict[str, Busy]:
        """For VCs being removed: what still runs on their hosts."""
        removing = {v.name for v in reading.vcs if v.removing}
        if not removing or state is None or gcs is None:
            return {}
        node_vc = {
            n.node_id: members[n.instance_id].vc
            for n in state.nodes
            if n.instance_id in members and members[n.instance_id].vc in removing
        }
        try:
            actors = await gcs.get_all_actor_info(state="ALIVE")
            groups = await gcs.get_all_placement_groups()
            jobs = await gcs.get_all_job_info()
        except GcsError as exc:
            log.info("Ray actors/placement groups/jobs not read (%s)", exc)
            return {}
        out: dict[str, Busy] = {}
        for vc in removing:
            on = {n for n, v in node_vc.items() if v == vc}
            out[vc] = Busy(
                jobs=sum(1 for j in jobs if not j.is_dead and j.driver_node_id in on),
                actors=sum(1 for a in actors if a.node_id in on),
                placement_groups=sum(1 for g in groups if g.state != "REMOVED" and on & set(g.node_ids)),
                tasks=sum(1 for n in state.nodes if n.node_id in on and n.status is ray.NodeStatus.RUNNING),
            )
        return out

    async def _write(self, namespace: str, obj: Obj, status: Mapping[str, Any]) -> None:
        patch = status_patch(obj, status)
        if patch is None:
            return
        name = str((obj.get("metadata") or {}).get("name"))
        try:
            await ops.patch_rayvirtualcluster(self.api, namespace, name, patch, status=True)
        except ops.KubeError as exc:
            log.warning("status of rayvirtualclusters %s/%s not written: %s", namespace, name, exc)

    def _warn(self, namespace: str, obj: Obj, errors: Sequence[str]) -> None:
        name = str((obj.get("metadata") or {}).get("name"))
        message = "; ".join(errors)
        if not message:
            self._warned.pop((namespace, name), None)
            return
        if self._warned.get((namespace, name)) != message:
            self._warned[(namespace, name)] = message
            self.events.post({**RVC_API, **obj}, "Warning", "InvalidSpec", message[:1000])

    async def _finalizer(self, namespace: str, obj: Obj, *, release: bool) -> None:
        meta = obj.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        deleting = bool(meta.get("deletionTimestamp"))
        if deleting and release and FINALIZER in finalizers:
            finalizers.remove(FINALIZER)
        elif not deleting and FINALIZER not in finalizers:
            finalizers.append(FINALIZER)
        else:
            return
        patch = {"metadata": {"finalizers": finalizers}}
        try:
            await ops.patch_rayvirtualcluster(self.api, namespace, str(meta.get("name")), patch)
        except ops.KubeError as exc:
            log.info(
                "finalizer of rayvirtualclusters %s/%s not written: %s", namespace, meta.get("name"), exc
            )
