"""What the parts of one Ray bridge share: its events (what it did, for tests to read), its delayed
starts (timers, cancelled when it closes) and whether it is closing.

`RayBridge` (bridge.py) hands one `BridgeContext` to its head keeper (headkeeper.py) and its
worker keeper (workerkeeper.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BridgeContext", "BridgeEvent"]

log = logging.getLogger("e2e.raybridge.bridge")


@dataclass(frozen=True)
class BridgeEvent:
    """Something the bridge did, with `time.monotonic()` and wall-clock `wall` times."""

    # "init" | "started" | "stopped" | "exited" | "restart" | "head-stopped" | "head-started" | "error"
    kind: str
    pod: str
    at: float
    wall: float
    detail: str = ""


class BridgeContext:
    """The events, timers and closing flag of the bridge of RayCluster `cluster` in `namespace`."""

    def __init__(
        self,
        namespace: str,
        cluster: str,
        *,
        log_dir: Path | None,
        stop_grace: float,
        restart_delay: float,
    ) -> None:
        self.namespace = namespace
        self.cluster = cluster
        self.log_dir = log_dir
        self.stop_grace = stop_grace
        self.restart_delay = restart_delay
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._events: list[BridgeEvent] = []
        self._delays: list[threading.Timer] = []  # starts waiting (init containers, restarts)

    def record(self, kind: str, pod: str, detail: str = "") -> None:
        event = BridgeEvent(kind, pod, time.monotonic(), time.time(), detail)
        with self._lock:
            self._events.append(event)
        log.info("raybridge %s/%s: %s %s %s", self.namespace, self.cluster, kind, pod, detail)

    def history(self, kind: str | None = None, pod: str | None = None) -> list[BridgeEvent]:
        with self._lock:
            return [
                e for e in self._events if (kind is None or e.kind == kind) and (pod is None or e.pod == pod)
            ]

    def later(self, seconds: float, function: Callable[..., Any], *args: Any) -> None:
        """Call `function(*args)` on a timer thread after `seconds`, unless the bridge closes first."""
        timer = threading.Timer(seconds, function, args)
        timer.daemon = True
        with self._lock:
            if self.closing.is_set():
                return
            self._delays = [t for t in self._delays if t.is_alive()] + [timer]
        timer.start()

    def close(self) -> None:
        """Closing from now on: no more timers, and the waiting ones are cancelled."""
        self.closing.set()
        with self._lock:
            delays, self._delays = self._delays, []
        for timer in delays:
            timer.cancel()
