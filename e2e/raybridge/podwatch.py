"""The pods of one RayCluster as the Ray bridge sees them: listed, then watched from the list's
resourceVersion (any error or an expired resourceVersion lists again), on a thread of the watch's
own with its own event loop, so the bridge works under sync and async tests alike.

After the list and after every event, `on_change` gets every pod (name -> pod, plain JSON); every
0.5 s `tick` runs (the bridge looks for Ray processes that exited on their own). Both run on the
watch's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes_asyncio import client, config, watch

__all__ = ["PodWatch"]

log = logging.getLogger("e2e.raybridge.bridge")

RELIST_DELAY = 0.5
WATCH_SECONDS = 60  # server-side timeout of one watch request; then it is simply renewed
TICK_SECONDS = 0.5

Pods = Mapping[str, Mapping[str, Any]]


class PodWatch:
    """The pods of `namespace` that `selector` selects, followed on a thread named `name`."""

    def __init__(
        self,
        kubeconfig: str,
        namespace: str,
        selector: str,
        *,
        name: str,
        on_change: Callable[[Pods], None],
        tick: Callable[[], None],
    ) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.selector = selector
        self.name = name
        self.on_change = on_change
        self.tick = tick
        self._pods: dict[str, Mapping[str, Any]] = {}
        self._synced = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self, timeout: float) -> bool:
        """Start the thread; whether the first list came within `timeout` seconds."""
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self._synced.wait(timeout)

    def close(self) -> None:
        """Stop watching (waits for the thread). Idempotent."""
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._task = loop.create_task(self._watch_forever())
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(self._task)
        finally:
            loop.close()

    async def _watch_forever(self) -> None:
        cfg = client.Configuration()
        await config.load_kube_config(config_file=self.kubeconfig, client_configuration=cfg)
        async with client.ApiClient(configuration=cfg) as api:
            core = client.CoreV1Api(api)
            ticker = asyncio.create_task(self._tick_forever())
            try:
                while True:
                    try:
                        await self._list_and_watch(core)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # API errors, 410 Gone, dropped connections: list again
                        log.debug("raybridge watch of %s restarts: %s", self.selector, exc)
                    await asyncio.sleep(RELIST_DELAY)
            finally:
                ticker.cancel()

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            self.tick()

    async def _list_and_watch(self, core: Any) -> None:
        listed = await core.list_namespaced_pod(
            self.namespace, label_selector=self.selector, _preload_content=False
        )
        body = await listed.json()
        self._pods = {p["metadata"]["name"]: p for p in body.get("items") or []}
        self.on_change(self._pods)
        self._synced.set()
        version = body["metadata"]["resourceVersion"]
        events = watch.Watch()
        try:
            async for event in events.stream(
                core.list_namespaced_pod,
                self.namespace,
                label_selector=self.selector,
                resource_version=version,
                timeout_seconds=WATCH_SECONDS,
                allow_watch_bookmarks=True,
            ):
                kind, pod = event["type"], event["raw_object"]
                if kind == "ERROR":  # e.g. 410 Gone: the resourceVersion is too old
                    raise RuntimeError(f"watch error: {pod}")
                if kind == "BOOKMARK":
                    continue
                name = pod["metadata"]["name"]
                if kind == "DELETED":
                    self._pods.pop(name, None)
                else:
                    self._pods[name] = pod
                self.on_change(self._pods)
        finally:
            await events.close()
