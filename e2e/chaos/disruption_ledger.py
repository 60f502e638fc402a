"""What must hold while Kubernetes disrupts a busy Ray cluster, checked on every event as it arrives.

`DisruptionLedger` follows the worker pods of one RayCluster and the RayCluster itself (the two
watches of `e2e.chaos.rayledger.feeding`) once the test has said which pods a notice disrupts
(`notice`) and while it knows which of them still run a task (`busy`, until it lets the task
end). At each event it checks:

- **no healthy worker removed**: only the disrupted pods are removed (named in
  ``workersToDelete``, marked for deletion or deleted, whichever the watches see first);
- **no busy node removed before its deadline**: a disrupted pod whose task runs is removed only
  once the notice's deadline passed (a notice without one: never while busy);
- **a multi-host replica goes whole**: a ``workersToDelete`` that names a host of a replica
  names every host of it not gone yet;
- **no pod created twice**: at most one new worker pod per disrupted pod (its replacement);
- **no failed launch counted**: no group of the RayCluster shows ``backoffUntil``.

It also times, from the notice (monotonic seconds): the replacements' creation, each disrupted
pod's removal; the test reads them into its outcome (`figures`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from typing import Any

from rayscale.common import labels as L

SLACK = 1.0  # seconds: a deadline is met within one autoscaler round (1 s in the suite)


@dataclasses.dataclass
class Seen:
    created: float
    replica: str | None  # the multi-host replica it is a host of
    removed: float | None = None
    how: str = ""


class DisruptionLedger:
    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.pods: dict[str, Seen] = {}
        self.noticed: float | None = None  # when the notice came (monotonic)
        self.deadline: float | None = None  # seconds after the notice; None: none
        self.disrupted: frozenset[str] = frozenset()
        self.busy: set[str] = set()
        self._found: dict[str, None] = {}  # the violations, in the order seen
        self.events = 0

    # ---- what the test tells ----

    def notice(self, disrupted: Iterable[str], busy: Iterable[str], deadline: float | None) -> None:
        """The notice comes now: it disrupts `disrupted`, of which `busy` run a task."""
        self.noticed, self.deadline = time.monotonic(), deadline
        self.disrupted, self.busy = frozenset(disrupted), set(busy)

    def idle(self, pod: str) -> None:
        """The test lets `pod`'s task end."""
        self.busy.discard(pod)

    # ---- what the watches feed ----

    def _violate(self, text: str) -> None:
        self._found.setdefault(text)

    @property
    def violations(self) -> list[str]:
        return list(self._found)

    def _removing(self, name: str, how: str, now: float) -> None:
        if name not in self.pods or self.pods[name].removed is not None:
            return  # not a worker of the cluster, or its removal was seen already
        self.pods[name].removed, self.pods[name].how = now, how
        if name not in self.disrupted:
            self._violate(f"healthy worker removed: {name} ({how}), no notice of its own nor of its replica")
            return
        if name in self.busy and self.noticed is not None:
            after = now - self.noticed
            if self.deadline is None or after < self.deadline - SLACK:
                due = "no deadline" if self.deadline is None else f"deadline {self.deadline:g}s"
                self._violate(f"busy node removed: {name} ({how}) {after:.1f}s after the notice, {due}")

    def pod_event(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(L.RAY_CLUSTER) != self.cluster or labels.get(L.NODE_TYPE) != L.WORKER:
            return
        self.events += 1
        now = time.monotonic()
        name = str(meta["name"])
        if name not in self.pods:
            self.pods[name] = Seen(now, labels.get(L.REPLICA_NAME) if L.HOST_INDEX in labels else None)
            new = self.replacements()
            if self.noticed is not None and len(new) > len(self.disrupted):
                self._violate(f"pod created twice: {sorted(new)} made for {len(self.disrupted)} leaving pods")
        leaving = (
            "deleted" if kind == "DELETED" else "marked for deletion" if meta.get("deletionTimestamp") else ""
        )
        if leaving:
            self._removing(name, leaving, now)

    def cluster_event(self, kind: str, body: dict[str, Any]) -> None:
        ours = (body.get("metadata") or {}).get("name") == self.cluster
        if kind == "DELETED" or not ours:
            return
        self.events += 1
        now = time.monotonic()
        groups = (body.get("spec") or {}).get("workerGroupSpecs") or []
        for named in (
            {str(n) for n in (g.get("scaleStrategy") or {}).get("workersToDelete") or []} for g in groups
        ):
            for replica in {self.pods[n].replica for n in named if n in self.pods} - {None}:
                hosts = {n for n, s in self.pods.items() if s.replica == replica and s.removed is None}
                if hosts - named:
                    self._violate(
                        f"replica {replica} removed in part: {sorted(named & hosts)} "
                        f"without {sorted(hosts - named)}"
                    )
            for name in sorted(named):
                self._removing(name, "named in workersToDelete", now)
        for group in ((body.get("status") or {}).get("autoscaler") or {}).get("groups") or []:
            if group.get("backoffUntil"):
                self._violate(
                    f"failed launch counted: group {group.get('name')} backs off "
                    f"until {group['backoffUntil']}"
                )

    # ---- what the test reads ----

    def replacements(self) -> list[str]:
        """The worker pods created since the notice."""
        if self.noticed is None:
            return []
        return sorted(
            n for n, s in self.pods.items() if s.created >= self.noticed and n not in self.disrupted
        )

    def figures(self) -> dict[str, Any]:
        """Seconds from the notice: the first replacement made, the first and last disrupted pod
        removed; the pods removed; whether the replacements came before the leaving pods went."""
        assert self.noticed is not None
        since = self.noticed
        made = [self.pods[n].created - since for n in self.replacements()]
        gone = sorted(s.removed - since for n, s in self.pods.items() if n in self.disrupted and s.removed)
        return {
            "pods_deleted": len(gone),
            "replacement_made_s": round(min(made), 1) if made else None,
            "first_removed_s": round(gone[0], 1) if gone else None,
            "drained_s": round(gone[-1], 1) if len(gone) == len(self.disrupted) else None,
            "replaced_before_removed": bool(made and gone and min(made) < gone[0]),
            "removed": {n: s.how for n, s in sorted(self.pods.items()) if s.removed is not None},
            "events_checked": self.events,
        }
