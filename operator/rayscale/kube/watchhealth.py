"""Detect a stalled watch: objects the API server has changed that the watch never delivered.

Every `interval` seconds, LIST the RayClusters of the watched namespaces (those that match, when
they are given as patterns: `rayscale.kube.scope`) and compare each resourceVersion with the
one the watch-fed indexes hold. A mismatch that is still there at the next check (the watch had a
whole interval to deliver it) means the watch is stuck; the liveness probe then fails and
Kubernetes restarts the operator.

The other way round, a RayCluster the indexes hold that the LIST does not show, still at the same
resourceVersion at the next check, was deleted while the watch was down: kopf lists again after a
broken stream without telling which objects went meanwhile. It is handed to `gone`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

from kubernetes_asyncio import client

from rayscale.common.types import ClusterKey
from rayscale.kube import ops
from rayscale.kube.scope import is_pattern, namespace_matches

log = logging.getLogger(__name__)


class WatchHealth:
    def __init__(
        self,
        api: client.ApiClient,
        namespaces: list[str] | None,
        seen: Callable[[], Mapping[ClusterKey, str]],
        *,
        gone: Callable[[ClusterKey], None] = lambda key: None,
        interval: float = 60.0,
    ) -> None:
        self.api = api
        self.namespaces = namespaces
        self.seen = seen
        self.gone = gone
        self.interval = interval
        self.stalled: dict[ClusterKey, str] = {}
        self.unlisted: dict[ClusterKey, str] = {}  # in the indexes, not in the last LIST
        self.last_check = time.monotonic()
        self.problem: str | None = None

    async def check_once(self) -> None:
        listed: dict[ClusterKey, str] = {}
        for ns in await watched_namespaces(self.api, self.namespaces):
            for obj in await ops.list_rayclusters(self.api, ns):
                meta = obj["metadata"]
                listed[(meta["namespace"], meta["name"])] = meta["resourceVersion"]
        seen = self.seen()
        behind = {k: rv for k, rv in listed.items() if seen.get(k) != rv}
        # Behind at the same resourceVersion as at the last check: the watch had a whole
        # interval to deliver that version and did not. A newer version gets a fresh interval.
        still = {k: rv for k, rv in behind.items() if self.stalled.get(k) == rv}
        self.problem = f"watch missed updates of {sorted(still)[:5]}" if still else None
        if still:
            log.error("RayCluster watch looks stalled: %s", self.problem)
        self.stalled = behind
        unlisted = {k: rv for k, rv in seen.items() if k not in listed}
        for key in sorted(k for k, rv in unlisted.items() if self.unlisted.get(k) == rv):
            log.warning("RayCluster %s/%s is gone, its deletion never delivered: forgotten", *key)
            self.gone(key)
            del unlisted[key]
        self.unlisted = unlisted
        self.last_check = time.monotonic()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.check_once()
            except Exception as exc:
                log.warning("watch health check failed: %s", exc)

    def verdict(self) -> str | None:
        """None when healthy, else why not."""
        if time.monotonic() - self.last_check > 3 * self.interval:
            return "watch health checks stopped running"
        return self.problem


async def watched_namespaces(api: client.ApiClient, namespaces: list[str] | None) -> list[str | None]:
    """The namespaces to LIST: every one (None), the names given, or those matching the patterns."""
    if not namespaces:
        return [None]
    if not any(is_pattern(n) for n in namespaces):
        return list(namespaces)
    existing = await ops.list_namespaces(api)
    return [ns for ns in existing if any(namespace_matches(ns, p) for p in namespaces)]
