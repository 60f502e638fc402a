"""Write fencing: with leader election, a replica writes only while it surely holds the Lease.

A leader that is frozen (a long GC pause, a stopped container, a suspended VM) and then resumes
does not know at once that a standby took over meanwhile: its tasks wake up where they were and
would go on creating pods the new leader creates too. The fence closes on the replica's own
monotonic clock: every successful renewal opens it until the renewal's start plus the renew
deadline (10 s), while a standby takes over only a lease duration (15 s) after it saw that renewal.
Every write checks the fence just before it is sent (`check`): Kubernetes writes as their
connection is taken, Ray's mutating RPCs (drain, resize, report) before each attempt. A fenced
write raises `Fenced`; the replica then exits, as it does on losing the Lease.

Without leader election there is one replica and the fence stays open (`WRITE_FENCE` starts open).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


class Fenced(Exception):
    """A write refused because this replica may no longer hold the Lease."""


class WriteFence:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._until = math.inf  # open: no leader election

    def close(self) -> None:
        """Refuse every write until `open_until` (leader election on, the Lease not held)."""
        self._until = -math.inf

    def open_until(self, deadline: float) -> None:
        """Writes are safe until `deadline` (monotonic seconds): the Lease was renewed."""
        self._until = deadline

    @property
    def is_open(self) -> bool:
        return self._clock() < self._until

    def check(self, what: str) -> None:
        """Raise `Fenced` unless writes are safe now."""
        if not self.is_open:
            raise Fenced(f"{what}: not sent, this replica may no longer hold the leader Lease")


WRITE_FENCE = WriteFence()
