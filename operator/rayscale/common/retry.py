"""Per-key exponential backoff after failed runs (controller-runtime's per-item rate limiter).

A key (a RayCluster) whose run failed waits ``base * 2**(failures - 1)`` seconds, at most `cap`,
before it runs again; each wait is shortened by up to `jitter` (a fraction) at random, so clusters
that failed together do not retry together, and each wait stays longer than the one before. A
server's ``Retry-After`` is honoured: the wait is at least that long. The first run that does not
fail forgets the key's failures (controller-runtime's ``Forget``).

The wait is also never longer than twice the time the key has been failing (`base` at least):
a fault that lasted T seconds costs at most 2T after it ends. Without that bound, runs made at
once for spec edits during a fault (each one more failure) pushed the count up by the second: a
cluster edited every second through 20 s of API errors waited minutes after the errors stopped.
When runs come only after their waits the bound changes nothing (each wait is about the sum of
the ones before).

Keys are independent: one cluster's failures never delay another's runs. Time comes from an
injectable clock and randomness from an injectable source, so tests need no sleeps.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["BASE_SECONDS", "CAP_SECONDS", "JITTER", "Failed", "RetryBackoff", "delay_after", "spec_version"]

K = TypeVar("K", bound=Hashable)
BASE_SECONDS = 1.0
CAP_SECONDS = 300.0
JITTER = 0.2


@dataclass(frozen=True, slots=True)
class Failed:
    """What a run returns when it failed: run the key again after its backoff.

    `retry_after` is the server's ``Retry-After`` (seconds), when it sent one.
    """

    reason: str
    retry_after: float | None = None


def delay_after(failures: int, *, base: float, cap: float, jitter: float, draw: float) -> float:
    """The wait after the `failures`-th failure in a row; `draw` in [0, 1) picks the jitter."""
    nominal = min(cap, base * 2.0 ** min(max(failures, 1) - 1, 64))
    return nominal * (1.0 - jitter * draw)


class RetryBackoff(Generic[K]):
    def __init__(
        self,
        *,
        base: float = BASE_SECONDS,
        cap: float = CAP_SECONDS,
        jitter: float = JITTER,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if not 0 < base <= cap or not 0 <= jitter < 0.5:
            raise ValueError("need 0 < base <= cap and 0 <= jitter < 0.5")
        self.base, self.cap, self.jitter = base, cap, jitter
        self._clock = clock
        self._rng = rng
        self._failures: dict[K, int] = {}
        self._since: dict[K, float] = {}  # when the key's failures in a row began
        self._until: dict[K, float] = {}

    def failed(self, key: K, retry_after: float | None = None) -> float:
        """Record a failed run of `key`; the seconds it must wait before the next run."""
        now = self._clock()
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        since = self._since.setdefault(key, now)
        delay = delay_after(failures, base=self.base, cap=self.cap, jitter=self.jitter, draw=self._rng())
        delay = min(delay, max(self.base, 2.0 * (now - since)))
        if retry_after is not None and retry_after > delay:
            delay = retry_after
        self._until[key] = now + delay
        return delay

    def succeeded(self, key: K) -> int:
        """Forget `key`'s failures; how many there were in a row."""
        self._until.pop(key, None)
        self._since.pop(key, None)
        return self._failures.pop(key, 0)

    def failures(self, key: K) -> int:
        """Failed runs of `key` in a row."""
        return self._failures.get(key, 0)

    def remaining(self, key: K) -> float:
        """Seconds before `key` may run again (0: now)."""
        until = self._until.get(key)
        return 0.0 if until is None else max(until - self._clock(), 0.0)

    def expire(self, key: K) -> None:
        """Let `key` run now, keeping its failure count (a change worth trying at once)."""
        if key in self._until:
            self._until[key] = self._clock()

    def __len__(self) -> int:
        """Keys whose latest run failed."""
        return len(self._failures)


def spec_version(body: Mapping[str, Any] | None) -> Hashable:
    """What, when it changes, makes a failing RayCluster worth retrying at once: its generation
    (a spec edit) and whether it is being deleted; None when it is gone."""
    if body is None:
        return None
    meta = body.get("metadata") or {}
    return (meta.get("generation"), bool(meta.get("deletionTimestamp")))
