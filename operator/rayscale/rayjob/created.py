"""What the RayJob controller created that its watches do not show yet.

A reconcile that runs before the watch delivers a RayCluster or head Service this controller has
just created would plan to create it again: the API server refuses the second create
(AlreadyExists), and the reconcile fails with a Warning Event and a backoff, which delays the
RayJob's next status. Until the watch shows the object, or `TIMEOUT` seconds passed (a watch
that never delivers must not stall the RayJob), such a reconcile waits for the watch instead.
KubeRay's operator has the same gap; its expectations cover pods only.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["TIMEOUT", "Created"]

TIMEOUT = 30.0

Key = tuple[str, str, str]  # (kind, namespace, name)


class Created:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._at: OrderedDict[Key, float] = OrderedDict()  # oldest first

    def add(self, kind: str, namespace: str, name: str) -> None:
        """`kind` `namespace`/`name` was created now."""
        now = self.clock()
        while self._at and now - next(iter(self._at.values())) > TIMEOUT:
            self._at.popitem(last=False)  # the ones no reconcile asked about again
        self._at.pop((kind, namespace, name), None)
        self._at[(kind, namespace, name)] = now

    def unseen(self, kind: str, namespace: str, name: str, *, seen: bool) -> bool:
        """Whether `kind` `namespace`/`name` was created less than `TIMEOUT` seconds ago and the
        watch (`seen`: it shows the object) does not show it yet."""
        key = (kind, namespace, name)
        at = self._at.get(key)
        if at is None:
            return False
        if seen or self.clock() - at > TIMEOUT:
            del self._at[key]
            return False
        return True

    def __len__(self) -> int:
        return len(self._at)
