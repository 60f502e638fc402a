"""How late the operator's event loop runs what is ready: `watch_lag`. I/O (a clock).

Everything rayscale does runs on one asyncio event loop. When the work ready at once takes more
than the CPU the process gets, each piece waits its turn: a RayJob status Ray changed is written
later, an autoscaling round starts later. The lag is measured every `EVERY` seconds as how much
later than asked a short sleep wakes up, into the histogram ``rayscale_event_loop_lag_seconds``,
and a lag of `WARN_SECONDS` or more is logged (at most once a minute, with the worst since the
last line), so a saturated operator shows in its log as well as in its metrics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from prometheus_client import Histogram

__all__ = ["EVERY", "WARN_SECONDS", "LagLog", "watch_lag"]

log = logging.getLogger(__name__)

EVERY = 0.25  # seconds between two measurements
WARN_SECONDS = 1.0  # a lag this long or longer is logged
LOG_EVERY = 60.0  # seconds: at most one log line this often


class LagLog:
    """Logs the worst lag of `WARN_SECONDS` or more at most once every `LOG_EVERY` seconds. Pure
    but for the log line (time passed in)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.late = 0  # measurements at or above WARN_SECONDS since the last line
        self.logged_at: float | None = None

    def saw(self, lag: float, now: float) -> str | None:
        """The line to log after a measurement of `lag` at `now`, or None."""
        if lag < WARN_SECONDS and not self.late:
            return None
        if lag >= WARN_SECONDS:
            self.late += 1
            self.worst = max(self.worst, lag)
        if self.logged_at is not None and now - self.logged_at < LOG_EVERY:
            return None
        line = (
            f"the event loop ran {self.late} measurement(s) {WARN_SECONDS:g} s or more late, the worst"
            f" {self.worst:.1f} s: the operator needs more CPU than it gets"
            " (see rayscale_event_loop_lag_seconds)"
        )
        self.logged_at, self.worst, self.late = now, 0.0, 0
        return line


async def watch_lag(
    histogram: Histogram,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Measure the loop's lag every `EVERY` seconds until cancelled."""
    lines = LagLog()
    while True:
        asked = clock()
        await sleep(EVERY)
        now = clock()
        lag = max(0.0, now - asked - EVERY)
        histogram.observe(lag)
        line = lines.saw(lag, now)
        if line is not None:
            log.warning("%s", line)
