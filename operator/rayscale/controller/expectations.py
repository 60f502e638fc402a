"""Per-group scale expectations, with a fix for KubeRay #4078.

After the controller creates or deletes a pod, its watch cache may not show the change yet.
Until every recorded action of a group is visible, the group is not reconciled again, so a
stale cache never causes a second create or delete.

- create: met when the pod is visible, or `create_timeout` (30 s) after it was recorded;
- delete: met when the pod is gone. Unlike KubeRay, also met when the pod has been
  terminating for longer than `stuck_after` past its deletion deadline (a node that died
  keeps its pods Terminating forever); such pods are also no longer counted (`is_stuck`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from datetime import UTC
from typing import Any, Literal

from rayscale.common.pods import deletion_time

GroupKey = tuple[str, str, str]  # (namespace, cluster, group); the head group is ""
Action = Literal["create", "delete"]
Clock = Callable[[], float]

CREATE_TIMEOUT = 30.0
STUCK_TERMINATING_AFTER = 600.0


@dataclasses.dataclass(frozen=True)
class Expectation:
    pod: str
    action: Action
    recorded: float


class ScaleExpectations:
    def __init__(
        self,
        *,
        clock: Clock = time.time,
        create_timeout: float = CREATE_TIMEOUT,
        stuck_after: float = STUCK_TERMINATING_AFTER,
    ) -> None:
        self.clock = clock
        self.create_timeout = create_timeout
        self.stuck_after = stuck_after
        self._items: dict[GroupKey, dict[str, Expectation]] = {}

    def expect(self, key: GroupKey, pod: str, action: Action) -> None:
        self._items.setdefault(key, {})[pod] = Expectation(pod, action, self.clock())

    def is_stuck(self, pod: Mapping[str, Any]) -> bool:
        """Terminating for longer than `stuck_after` past its deletion deadline."""
        deadline = deletion_time(pod)
        if deadline is None:
            return False
        return self.clock() - deadline.astimezone(UTC).timestamp() > self.stuck_after

    def satisfied(self, key: GroupKey, pods: Mapping[str, Mapping[str, Any]]) -> bool:
        """Drop every met expectation of the group; True when none is left.

        `pods` maps name -> pod for the pods of the group the controller sees now.
        """
        items = self._items.get(key)
        if not items:
            return True
        now = self.clock()
        for name, item in list(items.items()):
            pod = pods.get(name)
            if item.action == "create":
                met = pod is not None or now - item.recorded >= self.create_timeout
            else:
                met = pod is None or self.is_stuck(pod)
            if met:
                del items[name]
        if not items:
            del self._items[key]
            return True
        return False

    def next_deadline(self, key: GroupKey) -> float | None:
        """Seconds until a pending create expectation times out (for a delayed requeue)."""
        creates = [i.recorded for i in self._items.get(key, {}).values() if i.action == "create"]
        if not creates:
            return None
        return max(0.0, min(creates) + self.create_timeout - self.clock())

    def pending(self, key: GroupKey) -> int:
        return len(self._items.get(key, {}))

    def forget_cluster(self, namespace: str, cluster: str) -> None:
        for key in [k for k in self._items if k[0] == namespace and k[1] == cluster]:
            del self._items[key]
