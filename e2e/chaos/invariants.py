"""What must hold while faults are injected, checked on every event as it arrives.

`PodLedger` follows one namespace's worker pods (a watch on the real API server) against what the
user asked of each RayCluster (`asked`) and the pods the chaos itself deleted (`killed`):

- **no pod created twice**: the pods created for a cluster never exceed the replicas it started
  with, plus every increase the user made since, plus the pods the chaos deleted (each one may
  be replaced once);
- **no healthy worker removed**: the pods deleted never exceed every decrease the user made plus
  the pods the chaos deleted.

Both are bounds that any correct controller stays inside however it interleaves its work with
the edits; a duplicate create or a needless delete crosses one at the event that does it.

`leader_violations` reads the API server's audit log after a run: every write rayscale made was
made by the replica that held the Lease at that moment (the last replica that wrote the Lease
successfully before the write was received).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

WORKER = "worker"
PID = re.compile(r"^rayscale/\S+ \(.*, pid (\d+)\)$")


@dataclasses.dataclass
class ClusterLedger:
    start: int
    increases: int = 0
    decreases: int = 0
    last: int = 0
    created: set[str] = dataclasses.field(default_factory=set)
    deleted: set[str] = dataclasses.field(default_factory=set)
    killed: set[str] = dataclasses.field(default_factory=set)
    live: dict[str, str] = dataclasses.field(default_factory=dict)  # name -> phase, not terminating

    def ask(self, replicas: int) -> None:
        change = replicas - self.last
        self.increases += max(0, change)
        self.decreases += max(0, -change)
        self.last = replicas


class PodLedger:
    def __init__(self) -> None:
        self.clusters: dict[str, ClusterLedger] = {}
        self.violations: list[str] = []

    def created_cluster(self, name: str, replicas: int) -> None:
        self.clusters[name] = ClusterLedger(start=replicas, last=replicas)

    def asked(self, cluster: str, replicas: int) -> None:
        self.clusters[cluster].ask(replicas)

    def killed(self, cluster: str, pod: str) -> None:
        self.clusters[cluster].killed.add(pod)

    def event(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        c = self.clusters.get(labels.get("ray.io/cluster", ""))
        if c is None or labels.get("ray.io/node-type") != WORKER:
            return
        name = meta["name"]
        c.created.add(name)  # a pod first seen as MODIFIED was created too
        if kind == "DELETED" or meta.get("deletionTimestamp"):
            c.deleted.add(name)
            c.live.pop(name, None)
        else:
            c.live[name] = (pod.get("status") or {}).get("phase", "")
        cluster = labels["ray.io/cluster"]
        allowed = c.start + c.increases + len(c.killed)
        if len(c.created) > allowed:
            self.violations.append(
                f"pod created twice: {cluster} has had {len(c.created)} worker pods, at most {allowed} "
                f"were needed ({c.start} at first, +{c.increases} asked, {len(c.killed)} deleted by chaos)"
            )
        removable = c.decreases + len(c.killed)
        if len(c.deleted) > removable:
            self.violations.append(
                f"healthy worker removed: {cluster} lost {len(c.deleted)} worker pods, at most {removable} "
                f"could go (-{c.decreases} asked, {len(c.killed)} deleted by the chaos); last: {name}"
            )

    def resync(self, pods: Iterable[dict[str, Any]]) -> None:
        """A fresh list of the namespace's worker pods (after the watch had to start over): those
        the ledger still has but the list lacks were deleted meanwhile; the rest are events."""
        listed = list(pods)
        names = {(p.get("metadata") or {}).get("name") for p in listed}
        for cluster, c in self.clusters.items():
            for name in [n for n in c.live if n not in names]:
                labels = {"ray.io/cluster": cluster, "ray.io/node-type": WORKER}
                self.event("DELETED", {"metadata": {"name": name, "labels": labels}})
        for pod in listed:
            self.event("MODIFIED", pod)

    def converged(self) -> bool:
        """Every cluster has exactly the workers asked, all Running, none terminating."""
        return all(
            len(c.live) == c.last and all(phase == "Running" for phase in c.live.values())
            for c in self.clusters.values()
        )

    def describe(self) -> str:
        return ", ".join(
            f"{n}: {sum(p == 'Running' for p in c.live.values())}/{len(c.live)} running, {c.last} asked"
            for n, c in self.clusters.items()
        )


def _when(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def audit_events(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.strip():
            out.append(json.loads(line))
    return out


def leader_violations(events: Iterable[dict[str, Any]], namespace: str, lease: str = "rayscale") -> list[str]:
    """Writes by a rayscale replica (told apart by the pid in its user agent) received while
    another replica held the Lease."""
    writes = []
    for e in events:
        if e.get("stage") != "ResponseComplete":
            continue
        found = PID.match(e.get("userAgent") or "")
        code = (e.get("responseStatus") or {}).get("code", 0)
        ref = e.get("objectRef") or {}
        if not found or not 200 <= code < 300 or ref.get("namespace") != namespace:
            continue
        writes.append((_when(e["requestReceivedTimestamp"]), found.group(1), ref))
    writes.sort(key=lambda w: w[0])
    holder = ""
    out = []
    for when, pid, ref in writes:
        if ref.get("resource") == "leases" and ref.get("name") == lease:
            holder = pid
            continue
        if pid != holder:
            what = f"{ref.get('resource')}/{ref.get('name') or ''}"
            out.append(
                f"two leaders acting: pid {pid} wrote {what} at {when.time()} while pid {holder or '-'} "
                "held the Lease"
            )
    return out
