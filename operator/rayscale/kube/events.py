"""Kubernetes Events about RayClusters, posted in the background so reconciles never wait on them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

log = logging.getLogger(__name__)
COMPONENT = "rayscale"
MAX_PENDING = 10_000


class EventRecorder:
    def __init__(self, api: client.ApiClient, *, workers: int = 4) -> None:
        self._api = api
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(MAX_PENDING)
        self._workers = workers
        self._tasks: list[asyncio.Task[None]] = []
        self._instance = os.environ.get("POD_NAME") or socket.gethostname()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._run()) for _ in range(self._workers)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def post(
        self, obj: Mapping[str, Any], type_: str, reason: str, message: str, action: str = "Reconcile"
    ) -> None:
        meta = obj.get("metadata") or {}
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "metadata": {"generateName": f"{meta.get('name')}.", "namespace": meta.get("namespace")},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", "ray.io/v1"),
                "kind": obj.get("kind", "RayCluster"),
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
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        log.log(logging.WARNING if type_ == "Warning" else logging.INFO, "%s %s/%s: %s", reason,
                meta.get("namespace"), meta.get("name"), message)  # fmt: skip
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            log.warning("event queue full, dropped %s event", reason)

    async def _run(self) -> None:
        core: Any = client.CoreV1Api(self._api)
        while True:
            event = await self._queue.get()
            try:
                resp = await core.create_namespaced_event(
                    event["metadata"]["namespace"], event, _preload_content=False
                )
                resp.release()
            except (TimeoutError, ApiException, OSError) as exc:
                log.debug("could not post event %s: %s", event["reason"], exc)
