"""Kubernetes Events about RayClusters (and rayscale's other objects), posted in the background so
reconciles never wait on them.

`post` logs the Event and passes it through the correlator (correlator.py, client-go's rules):
identical Events become one Event with a growing ``count`` (a PATCH, not a new object), similar
ones beyond 10 in 10 min one "(combined from similar events)" Event, and each object may post 25
at once, then one per 5 min; the excess is dropped with a debug log. What is left waits in a queue
of its own object (fairqueue.py: at most `per_object` Events, the oldest dropped first, updates of
one Event merged) and `workers` tasks send the objects' Events round-robin, one object's at a time
each: a cluster posting many Events never delays another's.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Mapping
from typing import Any, Protocol

from kubernetes_asyncio import client

from rayscale.api.names import RAYCLUSTER
from rayscale.common.tasks import cancel_and_wait
from rayscale.kube import ops
from rayscale.kube.correlator import Correlated, EventCorrelator, object_key
from rayscale.kube.fairqueue import FairQueue
from rayscale.kube.flow import EVENTS, working_for

log = logging.getLogger(__name__)
COMPONENT = "rayscale"
PER_OBJECT = 32  # Events waiting to be sent, per object
SEND_TIMEOUT = 10.0  # seconds for one create or patch


class EventSink(Protocol):
    """Where the controller and the autoscaler post Events (an `EventRecorder` in the operator)."""

    def post(
        self, obj: Mapping[str, Any], type_: str, reason: str, message: str, action: str = "Reconcile"
    ) -> None: ...


class EventWriter(Protocol):
    """Where Events go (the API server in production). Both raise ops.KubeError when refused."""

    async def create(self, event: dict[str, Any]) -> bool: ...
    async def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        """False when the Event is gone (it expired): it is created again."""


class ApiWriter:
    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    async def create(self, event: dict[str, Any]) -> bool:
        return await ops.create_event(self._api, event)

    async def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        return await ops.patch_event(self._api, namespace, name, patch)


def _merge(queued: Correlated, newer: Correlated) -> Correlated:
    """A newer state of an Event still queued: its create (when not sent yet) carries the new count."""
    return Correlated(newer.event, None if queued.patch is None else newer.patch)


class EventRecorder:
    def __init__(
        self,
        api: client.ApiClient | None = None,
        *,
        workers: int = 4,
        writer: EventWriter | None = None,
        correlator: EventCorrelator | None = None,
        per_object: int = PER_OBJECT,
    ) -> None:
        if writer is None:
            if api is None:
                raise ValueError("an EventRecorder needs an api client or a writer")
            writer = ApiWriter(api)
        self._writer = writer
        self._correlator = correlator if correlator is not None else EventCorrelator()
        self._queue: FairQueue[tuple[str, ...], Correlated] = FairQueue(per_object)
        self._workers = workers
        self._tasks: list[asyncio.Task[None]] = []
        self._instance = os.environ.get("POD_NAME") or socket.gethostname()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._run()) for _ in range(self._workers)]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)

    def post(
        self, obj: Mapping[str, Any], type_: str, reason: str, message: str, action: str = "Reconcile"
    ) -> None:
        meta = obj.get("metadata") or {}
        event = {
            "metadata": {"namespace": meta.get("namespace")},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", RAYCLUSTER.api_version),
                "kind": obj.get("kind", RAYCLUSTER.kind),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "action": action,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
        }
        where = f"{meta.get('namespace')}/{meta.get('name')}"
        correlated = self._correlator.correlate(event)
        if correlated is None:
            log.debug("%s %s: %s (not posted: too many Events about it, at most 25 then 1 per 5 min)",
                      reason, where, message)  # fmt: skip
            return
        count = correlated.event["count"]
        log.log(logging.WARNING if type_ == "Warning" else logging.INFO, "%s %s: %s%s", reason, where,
                message, f" (x{count})" if count > 1 else "")  # fmt: skip
        dropped = self._queue.put(object_key(event), correlated.name, correlated, _merge)
        if dropped is not None:
            log.debug("event %s about %s dropped: %d Events of it wait already", dropped.event["reason"],
                      where, self._queue.pending(object_key(event)))  # fmt: skip

    async def _run(self) -> None:
        with working_for(EVENTS):  # the API client's own bucket for Events
            await self._serve()

    async def _serve(self) -> None:
        while True:
            key, item = await self._queue.get()
            try:
                await self._send(item)
            except (TimeoutError, ops.KubeError, OSError) as exc:
                log.debug("could not post event %s: %s", item.event["reason"], exc)
            except Exception:  # a worker never dies of one Event: the others would wait forever
                log.warning("could not post event %s", item.event["reason"], exc_info=True)
            finally:
                self._queue.done(key)

    async def _send(self, item: Correlated) -> None:
        namespace = item.event["metadata"]["namespace"]
        async with asyncio.timeout(SEND_TIMEOUT):
            if item.patch is not None and await self._writer.patch(namespace, item.name, item.patch):
                return
            await self._writer.create(item.event)  # new, or expired since: created again
