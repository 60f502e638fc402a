"""Every version of one RayCluster, as a watch shows them: for checks over a whole test."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from kubernetes_asyncio import watch
from kubernetes_asyncio.client import ApiException

from tests.integration.controller.helpers import GROUP, PLURAL, VERSION, Kube

RETRY = (410, 429, 500, 503)  # gone (too old), too many requests, server errors
RETRY_SECONDS = 0.5


@contextlib.asynccontextmanager
async def versions(kube: Kube, name: str) -> AsyncIterator[list[dict[str, Any]]]:
    """The RayCluster `name` (raw objects) of every ADDED or MODIFIED event from now on, in order."""
    seen: list[dict[str, Any]] = []
    events = watch.Watch()
    lister = kube.objects.list_namespaced_custom_object

    async def record() -> None:
        selector = f"metadata.name={name}"
        while True:  # a watch ends (timeout) or is refused for a while (429 while a new CRD's
            try:  # storage initialises): watch again; a version seen twice does no harm
                async for event in events.stream(
                    lister, GROUP, VERSION, kube.ns, PLURAL, field_selector=selector
                ):
                    if event["type"] in ("ADDED", "MODIFIED"):
                        seen.append(event["raw_object"])
            except ApiException as exc:
                if exc.status not in RETRY:
                    raise
                await asyncio.sleep(RETRY_SECONDS)  # back off, then watch again

    task = asyncio.create_task(record())
    try:
        yield seen
    finally:
        events.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await events.close()
