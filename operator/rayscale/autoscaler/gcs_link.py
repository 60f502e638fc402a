"""`GcsLink`: the autoscaler's link to each cluster's Ray GCS. I/O.

It reads Ray's state (``GetClusterResourceState``; None when unreachable: then nothing running is
removed), drains the hosts of the removals host by host, asks the drains of disruption notices
(``PREEMPTION``, with the notice's message and deadline: `preempt`), and reports each round's
``AutoscalingState`` to Ray (ray_report.py: what ``ray status`` shows). It keeps one client per
cluster (redialed when the address or the token changes, and lent to the RayJob controller for its
reads of job submissions: `lend`), which GCS methods answered (compat.py), and whether the GCS is
reachable (a ``GcsUnreachable`` Event once the head runs, ``GcsReachable`` when it answers again).

The GCS (and with it the cluster's Ray auth token) is the head Service's unless the operator allows
the annotation to override it (``AutoscalerConfig.allow_gcs_address_override``, the flag
``--allow-gcs-address-override``): see ``rayscale.ray.address.gcs_target``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rayscale.autoscaler.compat import CLUSTER_STATE, DRAIN, REPORT, GcsSupport, find_condition
from rayscale.autoscaler.drain import DrainUnit
from rayscale.autoscaler.draining import drain_units
from rayscale.autoscaler.memory import Shared
from rayscale.autoscaler.ray_report import autoscaling_state, next_version, remember
from rayscale.autoscaler.scheduling.model import Decision, Snapshot
from rayscale.autoscaler.spec_reader import ScalingSpec
from rayscale.autoscaler.status import GcsHealth
from rayscale.autoscaler.texts import drain_message, gcs_reachable, gcs_unreachable
from rayscale.cluster.meta import ClusterMeta
from rayscale.common.pods import is_head, phase
from rayscale.common.types import ClusterKey, Obj
from rayscale.disruption.plan import Drain
from rayscale.kube import ops
from rayscale.ray.address import AddressError, auth_token_secret, gcs_target
from rayscale.ray.errors import GcsError
from rayscale.ray.model import ClusterState, DrainReason

if TYPE_CHECKING:  # gRPC is loaded when a cluster first needs a GCS connection
    from rayscale.ray.client import GcsClient

__all__ = ["GcsLink"]

log = logging.getLogger(__name__)


def connect(address: str, *, token: str | None, timeout: float, retries: int) -> GcsClient:
    """A client of the GCS at `address`. gRPC and Ray's protos load here, when a RayCluster first
    needs its GCS (see `rayscale.ray.errors`)."""
    from rayscale.ray.client import GcsClient

    return GcsClient(address, token=token, timeout=timeout, retries=retries)


class GcsLink:
    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.memories = shared.memories

    async def state(self, key: ClusterKey, cluster: ScalingSpec) -> ClusterState | None:
        """Ray's state, None when the GCS cannot be read (or its address worked out)."""
        address: str | None = None
        memory = self.memories.of(key)
        support = self.support(key, cluster.written)
        memory.target = None
        allow = self.shared.config.allow_gcs_address_override
        try:
            target = gcs_target(cluster.meta, cluster.spec, allow_override=allow)
            memory.target = target
            address = target.address
            gcs = await self._client(key, cluster, address)
            state = await self._read(gcs)
        except (AddressError, GcsError, ops.KubeError) as exc:
            if isinstance(exc, GcsError):
                memory.support = support.seen(CLUSTER_STATE, exc.code)
            self._failed(key, cluster.meta, address, str(exc))
            return None
        memory.support = support.for_session(state.session_name).seen(CLUSTER_STATE, None)
        before = memory.gcs_health
        if before is not None and not before.reachable and before.last_contact is not None:
            memory.back_at = self.shared.clock()  # an outage ended: its view settles first (trust.py)
        memory.gcs_health = GcsHealth(address, reachable=True, last_contact=datetime.now(UTC))
        self.shared.metrics.gcs(key, reachable=True)
        if memory.unreachable:
            log.info("GCS of %s/%s reachable again", *key)
            memory.unreachable = False
        if memory.warned:
            memory.warned = False
            self.shared.events.post(cluster.meta.subject(), *gcs_reachable(address))
        return state

    async def poll(self, key: ClusterKey) -> ClusterState | None:
        """Ray's state read on the client the last round dialed (poll.py); None without one or when
        the call fails (the full round that follows reads again and records why)."""
        gcs = self.memories.of(key).client()
        if gcs is None:
            return None
        try:
            return await self._read(gcs)
        except GcsError:
            return None

    async def _read(self, gcs: GcsClient) -> ClusterState:
        """One ``GetClusterResourceState``, timed (`rayscale_autoscaler_gcs_read_seconds`)."""
        started = time.perf_counter()
        try:
            return await gcs.get_cluster_resource_state()
        finally:
            self.shared.metrics.gcs_read.observe(time.perf_counter() - started)

    def support(self, key: ClusterKey, written: Obj | None) -> GcsSupport:
        """What the GCS answered so far; after a restart, what the condition `written` in
        ``status.autoscaler`` says was missing."""
        known = self.memories.of(key).support
        if known is None:
            known = GcsSupport.remembered(find_condition(written))
        return known

    def _seen(self, key: ClusterKey, method: str, code: str | None) -> None:
        """Record how the GCS answered a call of `method` (`code` None: it answered)."""
        memory = self.memories.of(key)
        memory.support = (memory.support or GcsSupport()).seen(method, code)

    def _failed(self, key: ClusterKey, meta: ClusterMeta, address: str | None, error: str) -> None:
        memory = self.memories.of(key)
        previous = memory.gcs_health
        contact = previous.last_contact if previous is not None else None
        memory.gcs_health = GcsHealth(address, reachable=False, last_error=error, last_contact=contact)
        self.shared.metrics.gcs(key, reachable=False)
        if not memory.unreachable:
            log.warning("GCS of %s/%s unreachable, running nodes are kept: %s", *key, error)
            memory.unreachable = True
        # Only once the head runs: a GCS that is still starting is no news.
        if not memory.warned and any(is_head(p) and phase(p) == "Running" for p in self.shared.pods(key)):
            memory.warned = True
            self.shared.events.post(meta.subject(), *gcs_unreachable(address, error))

    async def _client(self, key: ClusterKey, cluster: ScalingSpec, address: str) -> GcsClient:
        token = None
        ref = auth_token_secret(cluster.meta, cluster.spec)
        if ref is not None:
            token = await ops.read_secret_key(self.shared.api, ref.namespace, ref.name, ref.key)
        cached = self.memories.of(key).gcs
        if cached is not None and cached[:2] == (address, token):
            return cached[2]
        await self.close(key)
        gcs = connect(
            address,
            token=token,
            timeout=self.shared.config.gcs_timeout,
            retries=self.shared.config.gcs_retries,
        )
        self.memories.of(key).gcs = (address, token, gcs)
        return gcs

    def lend(self, key: ClusterKey, address: str) -> GcsClient | None:
        """The client the rounds dialed for `key` when it is for `address`, for another reader of
        the same GCS (the RayJob controller's submission reads): one connection per cluster. None
        when the rounds hold none for it (the autoscaler does not take the cluster, has not run
        its first round, or the address moved and the next round redials). The token is the one the
        rounds read from the cluster's Secret."""
        memory = self.memories.get(key)
        cached = None if memory is None else memory.gcs
        if cached is None or cached[0] != address:
            return None
        return cached[2]

    async def drain(self, key: ClusterKey, units: Sequence[DrainUnit], why: str | None = None) -> set[str]:
        """Drain the units host by host; the pods of the units that stay (a host refused or
        could not be asked). Hosts that accepted are remembered as draining. `why`: the drain's
        message when not idleness (texts.drain_message)."""
        memory = self.memories.of(key)
        gcs = memory.client()
        if gcs is None:
            return {pod for unit in units for pod, _ in unit.hosts}

        async def ask(pod: str, node_id: str) -> bool:
            try:
                result = await gcs.drain_node(node_id, message=drain_message(pod, why))
            except GcsError as exc:
                self._seen(key, DRAIN, exc.code)
                log.info("drain of %s in %s/%s failed, keeping it: %s", pod, *key, exc)
                return False
            self._seen(key, DRAIN, None)
            if not result.accepted:
                log.info("node %s in %s/%s refused to drain: %s", pod, *key, result.rejection_reason)
            return result.accepted

        outcome = await drain_units(units, ask)
        memory.draining = memory.draining | outcome.accepted
        return set(outcome.refused)

    async def preempt(self, key: ClusterKey, drains: Sequence[Drain]) -> frozenset[str]:
        """Ask the Ray nodes of a disruption plan's `drains` to drain (side by side); the pods
        whose node accepted. A failed or refused drain is logged; the next round asks it again."""
        gcs = self.memories.of(key).client()
        if gcs is None or not drains:
            return frozenset()

        async def ask(drain: Drain) -> str | None:
            try:
                result = await gcs.drain_node(
                    drain.node_id,
                    reason=DrainReason(drain.reason),
                    message=drain.message,
                    deadline_ms=drain.deadline_ms,
                )
            except GcsError as exc:
                self._seen(key, DRAIN, exc.code)
                log.info("drain of %s in %s/%s for a disruption notice failed: %s", drain.pod, *key, exc)
                return None
            self._seen(key, DRAIN, None)
            if not result.accepted:
                log.info("node %s in %s/%s refused to drain for a disruption notice: %s", drain.pod,
                         *key, result.rejection_reason)  # fmt: skip
                return None
            log.info("the Ray node of %s in %s/%s drains for a disruption notice: %s", drain.pod, *key,
                     drain.message)  # fmt: skip
            return drain.pod

        asked = await asyncio.gather(*(ask(d) for d in drains))
        return frozenset(pod for pod in asked if pod is not None)

    async def tell_ray(
        self,
        key: ClusterKey,
        snapshot: Snapshot,
        decision: Decision,
        state: ClusterState | None,
    ) -> None:
        """Report the round to Ray's GCS (what ``ray status`` shows); failures are logged, never raised."""
        now = self.shared.wall_clock()
        memory = self.memories.of(key)
        failures = remember(memory.failures, (), now)
        memory.failures = failures
        gcs = memory.client()
        support = memory.support or GcsSupport()
        if state is None or gcs is None or support.report is False:
            return
        version = next_version(memory.report_version, state, now)
        report = autoscaling_state(
            snapshot, decision, state, failures, now, version=version, pods=list(self.shared.pods(key))
        )
        # What Ray holds already need not be sent again: the same report (its versions aside) to
        # the same session, sent less than a status refresh ago.
        told = (state.session_name, dataclasses.replace(report, last_seen_cluster_resource_state_version=0,
                                                        autoscaler_state_version=0))  # fmt: skip
        clock, last = self.shared.clock(), memory.told
        refresh = self.shared.config.status_refresh_seconds
        if last is not None and last[:2] == told and clock - last[2] < refresh:
            return
        try:
            await gcs.report_autoscaling_state(report)
        except GcsError as exc:
            self._seen(key, REPORT, exc.code)
            log.info("report to the GCS of %s/%s failed: %s", *key, exc)
            return
        memory.report_version = version
        memory.told = (*told, clock)
        self._seen(key, REPORT, None)

    async def close(self, key: ClusterKey) -> None:
        """Close the cluster's GCS channel, if one is open."""
        memory = self.memories.get(key)
        cached = None if memory is None else memory.gcs
        if memory is not None and cached is not None:
            memory.gcs = None
            await cached[2].close()
