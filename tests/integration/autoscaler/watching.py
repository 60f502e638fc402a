"""Every version of one RayCluster, as a watch shows them: for checks over a whole test."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from kubernetes_asyncio import watch

from tests.integration.controller.helpers import GROUP, PLURAL, VERSION, Kube


@contextlib.asynccontextmanager
async def versions(kube: Kube, name: str) -> AsyncIterator[list[dict[str, Any]]]:
    """The RayCluster `name` (raw objects) of every ADDED or MODIFIED event from now on, in order."""
    seen: list[dict[str, Any]] = []
    events = watch.Watch()
    lister = kube.objects.list_namespaced_custom_object

    async def record() -> None:
        selector = f"metadata.name={name}"
        async for event in events.stream(lister, GROUP, VERSION, kube.ns, PLURAL, field_selector=selector):
            if event["type"] in ("ADDED", "MODIFIED"):
                seen.append(event["raw_object"])

    task = asyncio.create_task(record())
    try:
        yield seen
    finally:
        events.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await events.close()
