"""Every version of one RayCluster, as a watch shows them: for checks over a whole test."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from kubernetes_asyncio import watch
from kubernetes_asyncio.client import ApiException

from rayscale.api.names import RAYCLUSTER
from rayscale.common.tasks import cancel_and_wait
from tests.support.kube import Kube

RETRY = (410, 429, 500, 503)  # gone (too old), too many requests, server errors
RETRY_SECONDS = 0.5


@contextlib.asynccontextmanager
async def watched(
    lister: Any, *args: Any, keep: Callable[[dict[str, Any]], Any], **kwargs: Any
) -> AsyncIterator[list[Any]]:
    """``keep(event)`` of every event of a watch of ``lister(*args, **kwargs)`` from now on, in
    order, where it is not None."""
    seen: list[Any] = []
    events = watch.Watch()

    async def record() -> None:
        while True:  # a watch ends (timeout) or is refused for a while (429 while a new CRD's
            try:  # storage initialises): watch again; an event seen twice does no harm
                async for event in events.stream(lister, *args, **kwargs):
                    if (item := keep(event)) is not None:
                        seen.append(item)
            except ApiException as exc:
                if exc.status not in RETRY:
                    raise
                await asyncio.sleep(RETRY_SECONDS)  # back off, then watch again

    task = asyncio.create_task(record())
    try:
        yield seen
    finally:
        await end_watch(events, task)


async def end_watch(events: watch.Watch, task: asyncio.Task[None]) -> None:
    """Stop a watch and the task that follows it."""
    events.stop()
    await cancel_and_wait([task])
    await events.close()


def _version(event: dict[str, Any]) -> dict[str, Any] | None:
    return event["raw_object"] if event["type"] in ("ADDED", "MODIFIED") else None


def versions(kube: Kube, name: str) -> contextlib.AbstractAsyncContextManager[list[dict[str, Any]]]:
    """The RayCluster `name` (raw objects) of every ADDED or MODIFIED event from now on, in order."""
    lister = kube.objects.list_namespaced_custom_object
    selector = f"metadata.name={name}"
    return watched(lister, *RAYCLUSTER.at(kube.ns), field_selector=selector, keep=_version)
