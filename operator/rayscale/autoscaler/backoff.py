"""Per-group exponential backoff after failed launches (cluster-autoscaler's rule).

A group whose pods could not be provisioned in time backs off: 5 minutes after the first
failure, doubling with each failure while it is still unhealthy, at most 30 minutes. Three
hours without a failure after the last backoff ended ("healthy") start it over at 5 minutes.

Time comes from an injectable clock (seconds, monotonic by default) so tests run in virtual time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Backoff", "BackoffEntry"]

INITIAL_SECONDS = 300.0
MAX_SECONDS = 1800.0
RESET_AFTER_SECONDS = 3 * 3600.0


@dataclass(frozen=True, slots=True)
class BackoffEntry:
    duration: float  # length of the latest backoff, in seconds
    until: float  # clock time when it ends


class Backoff:
    """Backoff state of the groups of one cluster."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        *,
        initial: float = INITIAL_SECONDS,
        maximum: float = MAX_SECONDS,
        reset_after: float = RESET_AFTER_SECONDS,
    ) -> None:
        self._clock = clock
        self._initial = initial
        self._maximum = maximum
        self._reset_after = reset_after
        self._entries: dict[str, BackoffEntry] = {}

    def failed(self, group: str) -> BackoffEntry:
        """Record a failed launch in `group`; returns the backoff it now serves."""
        now = self._clock()
        previous = self._live(group, now)
        duration = self._initial if previous is None else min(previous.duration * 2, self._maximum)
        entry = BackoffEntry(duration, now + duration)
        self._entries[group] = entry
        return entry

    def remaining(self, group: str) -> float:
        """Seconds of backoff left for `group` (0 when it may launch)."""
        entry = self._live(group, self._clock())
        return 0.0 if entry is None else max(entry.until - self._clock(), 0.0)

    def backing_off(self, group: str) -> bool:
        return self.remaining(group) > 0

    def active(self) -> frozenset[str]:
        """The groups backing off now."""
        return frozenset(g for g in list(self._entries) if self.backing_off(g))

    def forget(self, group: str) -> None:
        """Drop a group's history (the group was removed from the spec)."""
        self._entries.pop(group, None)

    def _live(self, group: str, now: float) -> BackoffEntry | None:
        """The group's entry, unless it has been healthy long enough to start over."""
        entry = self._entries.get(group)
        if entry is not None and now - entry.until >= self._reset_after:
            del self._entries[group]
            return None
        return entry
