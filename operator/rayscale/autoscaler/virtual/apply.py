"""Carry out a VC plan: pod labels, the Ray nodes' VC resources, statuses, finalizers, Events.

Kubernetes is the source of truth: a pod's labels say which VC (and job cluster) holds it; the
Ray side is made to match on every round (so a raylet that restarted, or a head that came back,
gets its resources again). Label writes not yet seen in the pod cache are kept in an overlay so
the next round does not hand the same pod out twice.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rayscale.api.names import RAYVIRTUALCLUSTER
from rayscale.api.raycluster import RayClusterSpec
from rayscale.api.virtualcluster_names import FINALIZER, JOB_LABEL, VC_LABEL
from rayscale.autoscaler.scheduling.model import Snapshot
from rayscale.autoscaler.virtual.model import Member, VcPlan
from rayscale.autoscaler.virtual.raylets import busy_of, leave, resize_members
from rayscale.autoscaler.virtual.read import Reading, members_of, read, vc_meta
from rayscale.autoscaler.virtual.report import status_of, status_patch
from rayscale.common.types import ClusterKey, Obj
from rayscale.kube import ops
from rayscale.kube.events import EventSink
from rayscale.ray import model as ray

if TYPE_CHECKING:  # gRPC is loaded when a cluster first needs a GCS connection
    from rayscale.ray.client import GcsClient

__all__ = ["VirtualClusters"]

log = logging.getLogger(__name__)


class VirtualClusters:
    """The I/O of virtual clusters for the autoscaler loop, one instance for every cluster."""

    def __init__(self, api: Any, events: EventSink) -> None:
        self.api = api
        self.events = events
        self._overlay: dict[ClusterKey, dict[str, Member | None]] = {}
        self._warned: dict[tuple[str, str], str] = {}  # (namespace, vc) -> the message last posted

    # ---- reading ----

    def read(
        self, key: ClusterKey, cluster: RayClusterSpec, objects: Sequence[Obj], pods: Sequence[Obj]
    ) -> Reading:
        overlay = self._overlay.get(key, {})
        seen = members_of(pods)
        for pod in [p for p, m in overlay.items() if seen.get(p) == m]:
            del overlay[pod]  # the cache shows it now
        return read(cluster, objects, pods, overlay)

    # ---- applying ----

    async def apply(
        self,
        key: ClusterKey,
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
        for pod in await leave(reading.members, assign, state, gcs, token):
            del assign[pod]  # its raylet still runs work of the VC: it stays
        await self._labels(key, assign)
        members = dict(reading.members)
        for pod, member in assign.items():
            if member is None:
                members.pop(pod, None)
            else:
                members[pod] = member
        if state is not None and gcs is not None:
            await resize_members(members, state, gcs, token)
        busy = await busy_of(reading, members, state, gcs)
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

    async def not_taken(self, key: ClusterKey, objects: Sequence[Obj], why: str, now: datetime) -> None:
        """The RayCluster is gone or not autoscaled by rayscale: its VCs say so; deleting them
        is not held up (no node is assigned by anyone)."""
        for obj in objects:
            status = status_of(obj, errors=(why,), now=now)
            await self._write(key[0], obj, status)
            self._warn(key[0], obj, (why,))
            await self._finalizer(key[0], obj, release=True)

    def forget(self, key: ClusterKey) -> None:
        self._overlay.pop(key, None)

    async def _labels(self, key: ClusterKey, assign: Mapping[str, Member | None]) -> None:
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

    async def _write(self, namespace: str, obj: Obj, status: Mapping[str, Any]) -> None:
        patch = status_patch(obj, status)
        if patch is None:
            return
        name = vc_meta(obj).name
        try:
            await ops.patch_rayvirtualcluster(self.api, namespace, name, patch, status=True)
        except ops.KubeError as exc:
            log.warning("status of rayvirtualclusters %s/%s not written: %s", namespace, name, exc)

    def _warn(self, namespace: str, obj: Obj, errors: Sequence[str]) -> None:
        name = vc_meta(obj).name
        message = "; ".join(errors)
        if not message:
            self._warned.pop((namespace, name), None)
            return
        if self._warned.get((namespace, name)) != message:
            self._warned[(namespace, name)] = message
            self.events.post(
                {**RAYVIRTUALCLUSTER.type_meta(), **obj}, "Warning", "InvalidSpec", message[:1000]
            )

    async def _finalizer(self, namespace: str, obj: Obj, *, release: bool) -> None:
        meta = vc_meta(obj)
        finalizers = list(meta.finalizers or [])
        deleting = bool(meta.deletion_timestamp)
        if deleting and release and FINALIZER in finalizers:
            finalizers.remove(FINALIZER)
        elif not deleting and FINALIZER not in finalizers:
            finalizers.append(FINALIZER)
        else:
            return
        patch = {"metadata": {"finalizers": finalizers}}
        try:
            await ops.patch_rayvirtualcluster(self.api, namespace, meta.name, patch)
        except ops.KubeError as exc:
            log.info("finalizer of rayvirtualclusters %s/%s not written: %s", namespace, meta.name, exc)
