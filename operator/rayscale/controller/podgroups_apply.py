"""Makes the PodGroup of a RayCluster's batch scheduler (`rayscale.batch`, ``--batch-scheduler``)
before its pods, as KubeRay's plugins do: created when missing (one that exists already is
kept), resized when the scheduler resizes (Volcano: ``minMember`` and ``minResources`` follow the
spec). Events: ``CreatedPodGroup`` and ``UpdatedPodGroup``, or ``FailedToCreatePodGroup`` and
``FailedToUpdatePodGroup`` (Warning) with what to do.

A PodGroup is read from the API server when its cluster's wanted PodGroup changed, and otherwise
at most once per `recheck` seconds (the resync period), which is when one deleted by hand is made
again: KubeRay watches the PodGroups it owns; rayscale does not, so as not to watch them all.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kubernetes_asyncio import client

from rayscale.batch.model import PodGroupWant, resized
from rayscale.cluster.meta import ClusterMeta
from rayscale.common.types import ClusterKey, Manifest
from rayscale.controller.status import ReconcileError
from rayscale.kube import ops
from rayscale.kube.events import EventSink

__all__ = ["PodGroupKeeper"]


def _hint(exc: ops.KubeError, want: PodGroupWant) -> str:
    if exc.status == 403:
        return (
            f" (rayscale may not use {want.plural}.{want.group}: install the chart with"
            " batchScheduler.name set, or grant it get, create and update on them)"
        )
    if exc.status == 404:
        return f" (is the PodGroup CRD {want.plural}.{want.group} installed?)"
    return ""


class PodGroupKeeper:
    def __init__(self, api: client.ApiClient, events: EventSink, *, recheck: float) -> None:
        self.api, self.events, self.recheck = api, events, recheck
        #: by RayCluster: the PodGroup last made or found as wanted (its owner's uid in it), and when
        self._kept: dict[ClusterKey, tuple[str, float]] = {}

    def forget(self, key: ClusterKey) -> None:
        self._kept.pop(key, None)

    async def keep(self, meta: ClusterMeta, want: PodGroupWant) -> ReconcileError | None:
        """Create or resize `want`'s PodGroup; the error that stops the pods, if any."""
        now = asyncio.get_running_loop().time()
        wanted = json.dumps(want.manifest, sort_keys=True)
        key = (meta.namespace, meta.name)
        seen = self._kept.get(key)
        if seen is not None and seen[0] == wanted and now - seen[1] < self.recheck:
            return None
        try:
            await self._sync(meta, want)
        except ops.KubeError as exc:
            self._kept.pop(key, None)
            return ReconcileError(f"{exc}{_hint(exc, want)}", retry_after=exc.retry_after)
        self._kept[key] = (wanted, now)
        return None

    async def _sync(self, meta: ClusterMeta, want: PodGroupWant) -> None:
        objects: Any = client.CustomObjectsApi(self.api)
        at = (want.group, want.version, want.namespace, want.plural)
        kind = f"PodGroup {want.namespace}/{want.name}"
        try:
            existing: Manifest | None = await ops.send(
                objects.get_namespaced_custom_object(*at, want.name, _preload_content=False),
                f"get {kind}",
                body=True,
            )
        except ops.KubeError as exc:
            if exc.status != 404:
                raise
            existing = None
        if existing is None:
            call = objects.create_namespaced_custom_object(*at, want.manifest, _preload_content=False)
            await self._call(meta, want, call, "Create", tolerated=409)
            return
        update = resized(existing, want)
        if update is not None:
            call = objects.replace_namespaced_custom_object(*at, want.name, update, _preload_content=False)
            await self._call(meta, want, call, "Update")

    async def _call(
        self, meta: ClusterMeta, want: PodGroupWant, call: Any, verb: str, tolerated: int = 0
    ) -> None:
        kind = f"PodGroup {want.namespace}/{want.name}"
        try:
            await ops.send(call, f"{verb.lower()} {kind}")
        except ops.KubeError as exc:
            if exc.status == tolerated:
                return
            self.events.post(meta.subject(), "Warning", f"FailedTo{verb}PodGroup", f"{exc}{_hint(exc, want)}")
            raise
        spec = want.manifest["spec"]
        message = f"{verb}d {kind} (minMember {spec['minMember']}, minResources {spec['minResources']})"
        self.events.post(meta.subject(), "Normal", f"{verb}dPodGroup", message)
