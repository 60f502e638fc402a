"""The soak part of the fault suite: a bounded long run, off CI (`make soak`).

    .venv/bin/python -m e2e.chaos.soak --minutes 30 --clusters 20
    ... -m e2e.chaos.soak --minutes 4 --clusters 8 --faults 3          # a short run
    ... -m e2e.chaos.soak --write-docs                                  # and the figures into docs

One private local control plane (its API server audit-logs every write), the fault proxy of
`e2e.chaos.faultproxy` in front of it, and two `rayscale run --leader-elect` replicas talking
through the proxy, as in `e2e.chaos.controlplane`. Tens of RayClusters (kwok pods, no Ray) in one
namespace converge first; then, for `--minutes`:

- a user makes random events, one at a time, 0.5-2 s apart: scale edits (a group's `replicas`,
  0 to 6), label edits (which must survive), suspend and resume (`spec.suspend`), and delete +
  re-create under the same name (the new cluster while the old one's pods are still going);
- `--faults` faults of `controlplane.FAULTS` (each kind in turn, in a random order) are injected
  at random moments (5-85 % of the run; one that no longer fits before 90 % is skipped), while
  the user goes on. When one ends, the user pauses, every cluster gets one more scale edit, two
  replicas are made to run again (a Deployment's restarts: a leader that lost its Lease exits)
  and the time until every cluster has exactly what was asked is measured (at most
  `CONVERGE_SECONDS`, else a violation);
- every pod event goes to `SoakLedger` (`invariants.PodLedger`, extended for suspend and
  delete/re-create): no worker pod created twice, no healthy worker removed, never two live head
  pods of one cluster;
- every `SAMPLE_SECONDS` the acting replica's (and the standby's) RSS (/proc/<pid>/status
  VmRSS), open file descriptors (/proc/<pid>/fd) and established TCP connections (its socket
  inodes in /proc/<pid>/net/tcp{,6}) are sampled.

At the end (after one more scale edit of every cluster): every cluster converges to what was
asked (pods, the spec and labels as the user left them, the status: `ready` with the workers
asked, or `suspended`), the audit log shows no write by a replica that did not hold the Lease,
and RSS, fds and connections are flat: the acting replica's median in the last quarter of the
run exceeds its median in the second quarter by less than `RSS_FLAT_MIB` MiB or
`RSS_FLAT_RATIO` (RSS), `FD_FLAT` fds, `TCP_FLAT` connections. Samples of a replica's first
`WARMUP_SECONDS` as the acting one are left out: one that just took over opens tens of
connections at once (its first LISTs and reconciles), idle again within about 30 s; a quarter
with no other sample makes the verdict "not measured", which does not fail the run. The figures
(and every sample) go to e2e/.results/soak/ and, with `--write-docs`, to the section "## Soak"
of docs/reliability.md. Exit status 1 on any invariant violation, unconverged cluster, lost
edit, wrong status, or growth.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import itertools
import json
import os
import platform
import random
import re
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
from e2e.chaos.controlplane import (
    BECAME,
    CONVERGE_SECONDS,
    CRDS,
    FAULTS,
    MAX_REPLICAS,
    Run,
    raycluster,
    until,
)
from e2e.chaos.faultproxy import FaultProxy
from e2e.chaos.invariants import PID, ClusterLedger, PodLedger, audit_events, leader_violations
from hack.localk8s import testcluster
from kubernetes_asyncio import client, config, watch
from tests.support.operators import Operator
from tests.support.watching import end_watch

from rayscale.api.names import RAYCLUSTER
from rayscale.common.tasks import cancel_and_wait

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "e2e" / ".results" / "soak"
DOCS = ROOT / "docs" / "reliability.md"
TITLE = "## Soak"
LABEL = "chaos.rayscale.io/edit"
SAMPLE_SECONDS = 10.0
PAUSE = (0.5, 2.0)  # seconds between two user events
WEIGHTS = {"scale": 0.55, "label": 0.2, "suspend": 0.15, "recreate": 0.1}
REPLICAS = 2  # operator replicas kept running (leader + standby)
RSS_FLAT_MIB = 20.0  # "flat": last-quarter median minus second-quarter median under this ...
RSS_FLAT_RATIO = 0.10  # ... or under this fraction of the second quarter's median
FD_FLAT = 10  # open file descriptors
TCP_FLAT = 5  # established TCP connections
WARMUP_SECONDS = 40.0  # samples of a replica that took over less than this ago are not compared
STATUS_SECONDS = 120.0  # for the operator's status to show the converged clusters
# The soak's replicas run mode all, and its clusters do not autoscale.
FAULTS_SOAK = [k for k, f in FAULTS.items() if f.mode == "all" and not f.autoscaling]
NETWORK_ERRORS = (TimeoutError, client.ApiException, OSError, aiohttp.ClientError)


# ---- the ledger, extended ----


def owner_uid(meta: dict[str, Any]) -> str:
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "RayCluster":
            return str(ref.get("uid", ""))
    return ""


class SoakLedger(PodLedger):
    """`PodLedger` plus what the soak's user does besides scaling.

    - Suspend asks 0 workers of the cluster, resume the replicas the user set (scale edits made
      while suspended only change those); both count as the decrease and increase they are.
    - A deleted cluster's ledger is retired under its uid: its pods (told apart by their owner
      reference's uid) may all go, none may be created beyond its bound; the cluster re-created
      under the same name starts a new ledger.
    - Head pods: never two live (not terminating, not finished) head pods of one cluster.
    - Converged also means one Running head per cluster that is not suspended, none for one
      that is, and no pod left of a deleted cluster.
    """

    def __init__(self) -> None:
        super().__init__()
        self.user: dict[str, int] = {}  # cluster -> the replicas the user set
        self.suspended: dict[str, bool] = {}
        self.uids: dict[str, str] = {}  # cluster -> uid of the current incarnation
        self.retired: dict[str, tuple[str, ClusterLedger]] = {}  # uid -> (name, ledger)
        self.heads: dict[str, dict[str, str]] = {}  # owner uid -> head pod -> phase
        self.events_seen = 0

    def created_cluster(self, name: str, replicas: int) -> None:
        super().created_cluster(name, replicas)
        self.user[name] = replicas
        self.suspended[name] = False

    def registered(self, name: str, uid: str) -> None:
        self.uids[name] = uid

    def scale(self, name: str, replicas: int) -> None:
        self.user[name] = replicas
        self.asked(name, 0 if self.suspended[name] else replicas)

    def suspend(self, name: str, suspended: bool) -> None:
        self.suspended[name] = suspended
        self.asked(name, 0 if suspended else self.user[name])

    def retire(self, name: str) -> None:
        uid = self.uids.pop(name)
        self.retired[uid] = (name, self.clusters.pop(name))
        del self.user[name], self.suspended[name]

    def event(self, kind: str, pod: dict[str, Any]) -> None:
        self.events_seen += 1
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        uid, name = owner_uid(meta), str(meta.get("name", ""))
        gone = kind == "DELETED" or bool(meta.get("deletionTimestamp"))
        phase = str((pod.get("status") or {}).get("phase", ""))
        if labels.get("ray.io/node-type") == "head":
            heads = self.heads.setdefault(uid, {})
            before = sum(p not in ("Failed", "Succeeded") for p in heads.values())
            if gone:
                heads.pop(name, None)
            else:
                heads[name] = phase
            now = sum(p not in ("Failed", "Succeeded") for p in heads.values())
            if now > 1 >= before:
                self.violations.append(
                    f"two head pods: {labels.get('ray.io/cluster')} (uid {uid[:8]}) has {sorted(heads)} live"
                )
            return
        if uid in self.retired:
            cluster, c = self.retired[uid]
            new = name not in c.created
            c.created.add(name)
            if gone:
                c.deleted.add(name)
                c.live.pop(name, None)
            else:
                c.live[name] = phase
            allowed = c.start + c.increases + len(c.killed)
            if new and len(c.created) > allowed:
                self.violations.append(
                    f"pod created twice: deleted {cluster} (uid {uid[:8]}) has had {len(c.created)} worker "
                    f"pods, at most {allowed} were needed; last: {name}"
                )
            return
        super().event(kind, pod)

    def converged(self) -> bool:
        if not super().converged():
            return False
        for name in self.clusters:
            uid = self.uids.get(name)
            if uid is None:
                return False
            heads = self.heads.get(uid, {})
            if len(heads) != (0 if self.suspended[name] else 1):
                return False
            if any(p != "Running" for p in heads.values()):
                return False
        return all(not c.live and not self.heads.get(uid) for uid, (_, c) in self.retired.items())

    def describe(self) -> str:
        out = []
        for n, c in self.clusters.items():
            heads = self.heads.get(self.uids.get(n, ""), {})
            running = sum(p == "Running" for p in c.live.values())
            mark = " (suspended)" if self.suspended[n] else ""
            out.append(f"{n}: {running}/{len(c.live)} running, {c.last} asked, {len(heads)} head{mark}")
        left = [
            f"deleted {n} ({uid[:8]}): {len(c.live)} workers, {len(self.heads.get(uid, {}))} heads"
            for uid, (n, c) in self.retired.items()
            if c.live or self.heads.get(uid)
        ]
        return ", ".join(out + left)


def replica_write(event: dict[str, Any], namespace: str) -> bool:
    """An audit event of a successful write by a rayscale replica in `namespace` (what
    `leader_violations` checks)."""
    return (
        event.get("stage") == "ResponseComplete"
        and PID.match(event.get("userAgent") or "") is not None
        and 200 <= (event.get("responseStatus") or {}).get("code", 0) < 300
        and (event.get("objectRef") or {}).get("namespace") == namespace
    )


# ---- the operator replicas ----


@dataclasses.dataclass
class SoakRun(Run):
    """`controlplane.Run` whose `leader()` reads each replica's log once (the logs grow for the
    whole run) instead of from the start at every call."""

    became: dict[str, tuple[int, str]] = dataclasses.field(default_factory=dict)  # log -> (offset, stamp)

    def leader(self) -> Operator | None:
        best: tuple[str, Operator] | None = None
        for op in self.live():
            offset, stamp = self.became.get(str(op.log), (0, ""))
            with op.log.open("rb") as f:
                f.seek(offset)
                chunk = f.read()
            end = chunk.rfind(b"\n") + 1  # whole lines only
            for line in chunk[:end].decode(errors="replace").splitlines():
                if BECAME.search(line):
                    stamp = max(stamp, line[:23])  # the log line's timestamp
            self.became[str(op.log)] = (offset + end, stamp)
            if stamp and (best is None or stamp > best[0]):
                best = (stamp, op)
        return best[1] if best else None

    def live(self) -> list[Operator]:
        return [op for op in self.replicas if op.proc is not None and op.proc.poll() is None]


# ---- what /proc says about a process ----


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def proc_stats(pid: int) -> dict[str, int] | None:
    """RSS (KiB), open fds and established TCP connections of `pid`; None if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        inodes = _socket_inodes(pid)
        tcp = 0
        for table in ("tcp", "tcp6"):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and fields[3] == "01" and fields[9] in inodes:  # 01: ESTABLISHED
                    tcp += 1
    except OSError:
        return None
    found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    return {"rss_kib": int(found.group(1)) if found else 0, "fds": fds, "tcp": tcp}


@dataclasses.dataclass
class Sample:
    t: float  # seconds since the events began
    pid: int
    acting: bool
    rss_kib: int
    fds: int
    tcp: int


# ---- the soak ----


@dataclasses.dataclass
class FaultRecord:
    key: str
    at: float  # seconds since the events began
    lasted: float  # the fault itself
    converged: float | None  # seconds from its end until every cluster had what was asked


class Soak:
    def __init__(
        self,
        cluster: testcluster.ClusterHandle,
        proxy: FaultProxy,
        api: client.ApiClient,
        *,
        clusters: int,
        minutes: float,
        faults: int,
        kinds: list[str],
        seed: int,
    ) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.namespace = f"soak-{uuid.uuid4().hex[:5]}"
        self.ledger = SoakLedger()
        self.run = SoakRun(cluster, proxy, api, self.namespace, self.rng, ledger=self.ledger)
        self.core: Any = client.CoreV1Api(api)
        self.objects: Any = client.CustomObjectsApi(api)
        self.names = [f"c{i:02d}" for i in range(clusters)]
        self.seconds = minutes * 60
        self.nfaults = faults
        self.kinds = kinds
        self.violations: list[str] = []
        self.findings: list[str] = []  # not invariants, but worth saying
        self.events: Counter[str] = Counter()
        self.faults: list[FaultRecord] = []
        self.skipped = 0
        self.samples: list[Sample] = []
        self.quiet = asyncio.Lock()  # held by the user for each event, by the chaos while recovering
        self.t0 = 0.0
        self.first_converged = 0.0
        self.final_converged: float | None = None
        self.audited = 0  # the replicas' writes the audit log shows
        self.events_seconds = 0.0  # how long the events lasted (a fault may end after `seconds`)
        self.started = time.monotonic()

    def say(self, text: str) -> None:
        t = time.monotonic() - self.t0 if self.t0 else 0.0
        print(f"soak [{t:7.1f}s] {text}", flush=True)

    # ---- the user's writes (straight to the API server, not through the proxy) ----

    async def retry(self, what: str, call: Callable[[], Any]) -> Any:
        """`call()` until it answers; the API server may be stalled or restarting by a fault."""
        for _ in range(200):
            try:
                return await call()
            except client.ApiException as exc:
                if exc.status in (400, 404, 409, 422):  # answers, not faults
                    raise
            except NETWORK_ERRORS:
                pass
            await asyncio.sleep(0.5)  # a backoff before the next attempt
        raise RuntimeError(f"the user could not {what}")

    async def patch(self, name: str, body: list[Any] | dict[str, Any]) -> None:
        """A JSON patch (a list) or a merge patch (a dict: the client would send it as a JSON
        patch, its first content type, unless told)."""
        kind = "json-patch" if isinstance(body, list) else "merge-patch"
        await self.retry(
            f"patch {name}",
            lambda: self.objects.patch_namespaced_custom_object(
                *RAYCLUSTER.at(self.namespace), name, body,
                _content_type=f"application/{kind}+json", _request_timeout=5,
            ),
        )  # fmt: skip

    async def create(self, name: str, replicas: int) -> None:
        self.ledger.created_cluster(name, replicas)
        try:
            made = await self.retry(
                f"create {name}",
                lambda: self.objects.create_namespaced_custom_object(
                    *RAYCLUSTER.at(self.namespace), raycluster(name, replicas), _request_timeout=5
                ),
            )
        except client.ApiException as exc:
            if exc.status != 409:  # made by an attempt whose answer was lost
                raise
            made = await self.retry(f"get {name}", lambda: self.get(name))
        self.ledger.registered(name, made["metadata"]["uid"])
        self.run.labels.pop(name, None)

    async def get(self, name: str) -> dict[str, Any]:
        body: dict[str, Any] = await self.objects.get_namespaced_custom_object(
            *RAYCLUSTER.at(self.namespace), name, _request_timeout=5
        )
        return body

    async def scale(self, name: str) -> None:
        replicas = self.rng.randint(0, MAX_REPLICAS)
        # recorded before it is sent: an answer lost to a stall must not make the operator's
        # reaction look unasked for
        self.ledger.scale(name, replicas)
        patch = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": replicas}]
        await self.patch(name, patch)
        self.events["scale edits"] += 1

    async def label(self, name: str) -> None:
        value = uuid.uuid4().hex[:8]
        await self.patch(name, {"metadata": {"labels": {LABEL: value}}})
        self.run.labels[name] = value
        self.events["label edits"] += 1

    async def toggle_suspend(self) -> None:
        suspended = [n for n in self.names if self.ledger.suspended[n]]
        if suspended and (len(suspended) >= len(self.names) / 4 or self.rng.random() < 0.5):
            name, value = self.rng.choice(suspended), False
        else:
            name, value = self.rng.choice([n for n in self.names if not self.ledger.suspended[n]]), True
        self.ledger.suspend(name, value)
        await self.patch(name, {"spec": {"suspend": value}})
        self.events["suspends" if value else "resumes"] += 1

    async def recreate(self, name: str) -> None:
        uid = self.ledger.uids[name]
        self.ledger.retire(name)
        with contextlib.suppress(client.ApiException):  # 404: already gone
            await self.retry(
                f"delete {name}",
                lambda: self.objects.delete_namespaced_custom_object(
                    *RAYCLUSTER.at(self.namespace), name,
                    body={"preconditions": {"uid": uid}}, _request_timeout=5,
                ),
            )  # fmt: skip

        async def gone() -> bool:
            try:
                await self.get(name)
            except client.ApiException as exc:
                return exc.status == 404
            except NETWORK_ERRORS:
                pass
            return False

        await until(gone, 120, f"{name} is deleted")
        await self.create(name, self.rng.randint(0, MAX_REPLICAS))
        self.events["deletes + re-creates"] += 1

    async def user(self) -> None:
        kinds, weights = list(WEIGHTS), list(WEIGHTS.values())
        while time.monotonic() - self.t0 < self.seconds:
            async with self.quiet:
                kind = self.rng.choices(kinds, weights)[0]
                name = self.rng.choice(self.names)
                if kind == "scale":
                    await self.scale(name)
                elif kind == "label":
                    await self.label(name)
                elif kind == "suspend":
                    await self.toggle_suspend()
                else:
                    await self.recreate(name)
            await asyncio.sleep(self.rng.uniform(*PAUSE))  # the pause between two events

    # ---- faults ----

    def schedule(self) -> list[tuple[float, str]]:
        """`nfaults` random moments in 5-85 % of the run, each kind in turn (shuffled)."""
        order: list[str] = []
        while len(order) < self.nfaults:
            batch = list(self.kinds)
            self.rng.shuffle(batch)
            order += batch
        moments = sorted(self.rng.uniform(0.05, 0.85) * self.seconds for _ in range(self.nfaults))
        return list(zip(moments, order[: self.nfaults], strict=True))

    async def keep_replicas(self) -> None:
        """Two replicas again, one leading: a resumed frozen leader exits once it sees its Lease
        lost (wait for that), a killed one is replaced."""
        try:
            await until(lambda: len(self.run.live()) <= REPLICAS, 60, "")
        except TimeoutError:
            extra = [op for op in self.run.live() if op is not self.run.leader()]
            self.findings.append(
                f"{len(self.run.live())} replicas still running 60 s after a fault (expected {REPLICAS}): "
                "a replica that lost the Lease did not exit"
            )
            for op in extra[: len(self.run.live()) - REPLICAS]:
                op.stop()
        while len(self.run.live()) < REPLICAS:
            self.run.start_replica()
        await until(lambda: self.run.leader() is not None, 120, "a replica leads after the fault")

    async def chaos(self) -> None:
        for at, key in self.schedule():
            wait = self.t0 + at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)  # the fault's random moment
            if time.monotonic() - self.t0 > 0.9 * self.seconds:
                self.skipped += 1  # the faults before it took too long
                continue
            await self.fault(key, time.monotonic() - self.t0)

    async def fault(self, key: str, at: float) -> None:
        self.say(f"fault {key}: {FAULTS[key].title}")
        began = time.monotonic()
        try:
            await FAULTS[key].inject(self.run)
        except (TimeoutError, AssertionError, LookupError, OSError) as exc:
            self.violations.append(f"fault {key} at {at:.0f} s: {type(exc).__name__} {exc}")
        lasted = time.monotonic() - began
        converged: float | None = None
        async with self.quiet:
            for name in self.names:  # the last edits, right as the fault ends: work for the operator
                await self.scale(name)
            ended = time.monotonic()
            try:
                await self.keep_replicas()
                await until(self.ledger.converged, CONVERGE_SECONDS, "converge")
                converged = time.monotonic() - ended
            except TimeoutError as exc:
                self.violations.append(
                    f"not converged {CONVERGE_SECONDS:.0f} s after {key} at {at:.0f} s ({exc}): "
                    f"{self.ledger.describe()}"
                )
        self.faults.append(FaultRecord(key, at, lasted, converged))
        took = f"{converged:.1f} s" if converged is not None else "NOT converged"
        self.say(f"fault {key} lasted {lasted:.1f} s; converged {took} after it and an edit of every cluster")

    # ---- watching and sampling ----

    @contextlib.asynccontextmanager
    async def following(self) -> AsyncIterator[None]:
        """Every pod of the namespace's RayClusters to the ledger, from now on; after an error
        the watch resumes, after a 410 (or the API server's restart) the pods are listed again
        and those that went meanwhile are reported deleted."""
        known: dict[str, dict[str, Any]] = {}
        events = watch.Watch()
        selector = "ray.io/cluster"
        listed = asyncio.Event()

        def feed(kind: str, obj: dict[str, Any]) -> None:
            name = obj["metadata"]["name"]
            if kind == "DELETED":
                known.pop(name, None)
            else:
                known[name] = obj
            self.ledger.event(kind, obj)

        async def relist() -> str:
            raw = await self.core.list_namespaced_pod(
                self.namespace, label_selector=selector, _preload_content=False, _request_timeout=10
            )
            body = json.loads(await raw.read())
            seen = {p["metadata"]["name"]: p for p in body["items"]}
            for name in set(known) - set(seen):
                feed("DELETED", known[name])
            for pod in seen.values():
                feed("MODIFIED", pod)
            return str(body["metadata"]["resourceVersion"])

        async def follow() -> None:
            version = ""
            while True:
                try:
                    if not version:
                        version = await relist()
                        listed.set()
                    async for e in events.stream(
                        self.core.list_namespaced_pod, self.namespace, resource_version=version,
                        label_selector=selector, allow_watch_bookmarks=True, _preload_content=False,
                    ):  # fmt: skip
                        obj = e["raw_object"]
                        version = obj["metadata"].get("resourceVersion", version)
                        if e["type"] != "BOOKMARK":
                            feed(e["type"], obj)
                except client.ApiException as exc:
                    if exc.status == 410:
                        version = ""
                    await asyncio.sleep(0.5)  # a backoff before watching again
                except (TimeoutError, OSError, aiohttp.ClientError, ValueError):
                    await asyncio.sleep(0.5)  # the API server is stalled or restarting

        task = asyncio.create_task(follow())
        try:
            await asyncio.wait_for(listed.wait(), 60)
            yield
        finally:
            await end_watch(events, task)

    async def sampler(self) -> None:
        for n in itertools.count():
            acting = self.run.leader()
            t = time.monotonic() - self.t0
            for op in self.run.live():
                assert op.proc is not None
                stats = proc_stats(op.proc.pid)
                if stats is not None:
                    self.samples.append(Sample(t, op.proc.pid, op is acting, **stats))
                    if op is acting and n % 6 == 0:
                        self.say(
                            f"acting pid {op.proc.pid}: RSS {stats['rss_kib'] / 1024:.0f} MiB, "
                            f"{stats['fds']} fds, {stats['tcp']} TCP; events {dict(self.events)}, "
                            f"{len(self.faults)} faults, {len(self.ledger.violations)} violations"
                        )
            await asyncio.sleep(SAMPLE_SECONDS)  # the sampling period

    # ---- the run ----

    async def main(self) -> None:
        await self.core.create_namespace({"metadata": {"name": self.namespace}})
        self.say(
            f"namespace {self.namespace}, {len(self.names)} clusters, {self.seconds / 60:g} min, "
            f"seed {self.seed}"
        )
        for _ in range(REPLICAS):
            self.run.start_replica()
        await until(lambda: self.run.leader() is not None, 120, "a replica leads")
        async with self.following():
            for name in self.names:
                await self.create(name, self.rng.randint(1, MAX_REPLICAS))
            self.first_converged = await until(
                self.ledger.converged, CONVERGE_SECONDS + 3 * len(self.names), "the clusters converge first"
            )
            self.t0 = time.monotonic()
            self.say(f"{len(self.names)} clusters converged after {self.first_converged:.1f} s; events begin")
            sampling = asyncio.create_task(self.sampler())
            try:
                tasks = [asyncio.create_task(self.user()), asyncio.create_task(self.chaos())]
                try:
                    await asyncio.gather(*tasks)
                finally:  # when one fails, the other stops too (a fault ends on cancellation)
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                self.events_seconds = time.monotonic() - self.t0
                self.say(f"events over: {dict(self.events)}; an edit of every cluster, the last convergence")
                for name in self.names:
                    await self.scale(name)
                ended = time.monotonic()
                try:
                    await until(self.ledger.converged, CONVERGE_SECONDS, "converge")
                    self.final_converged = time.monotonic() - ended
                except TimeoutError:
                    self.violations.append(
                        f"not converged {CONVERGE_SECONDS:.0f} s after the last event: "
                        + self.ledger.describe()
                    )
                await self.check_objects()
            finally:
                await cancel_and_wait([sampling])

    async def check_objects(self) -> None:
        """The spec and labels as the user left them; the status as the operator must write it."""
        bodies: dict[str, dict[str, Any]] = {}
        wrong: dict[str, str] = {}

        async def statuses_match() -> bool:
            wrong.clear()
            for name in self.names:
                try:
                    bodies[name] = await self.get(name)
                except NETWORK_ERRORS as exc:
                    wrong[name] = f"not read: {exc}"
                    continue
                status = bodies[name].get("status") or {}
                asked = self.ledger.clusters[name].last
                # a zero count is not written (KubeRay's omitempty): absent is 0
                seen = (status.get("observedGeneration"), status.get("state"),
                        status.get("availableWorkerReplicas", 0))  # fmt: skip
                if self.ledger.suspended[name]:
                    want: tuple[Any, ...] = (bodies[name]["metadata"]["generation"], "suspended", seen[2])
                else:
                    want = (bodies[name]["metadata"]["generation"], "ready", asked)
                if seen != want:
                    wrong[name] = (
                        f"status (observedGeneration, state, availableWorkerReplicas) {seen}, want {want}"
                    )
            return not wrong

        with contextlib.suppress(TimeoutError):
            await until(statuses_match, STATUS_SECONDS, "")
        self.violations += [
            f"status of {n} wrong {STATUS_SECONDS:.0f} s after converging: {w}" for n, w in wrong.items()
        ]
        for name, body in bodies.items():
            spec = body["spec"]
            replicas = spec["workerGroupSpecs"][0].get("replicas")
            if replicas != self.ledger.user[name]:
                self.violations.append(
                    f"user edit lost: {name} replicas {replicas}, the user set {self.ledger.user[name]}"
                )
            if bool(spec.get("suspend")) != self.ledger.suspended[name]:
                self.violations.append(
                    f"user edit lost: {name} suspend {spec.get('suspend')!r}, "
                    f"the user set {self.ledger.suspended[name]}"
                )
            value = (body["metadata"].get("labels") or {}).get(LABEL)
            if name in self.run.labels and value != self.run.labels[name]:
                self.violations.append(
                    f"user edit lost: {name} label {value!r}, the user set {self.run.labels[name]!r}"
                )

    async def finish(self) -> None:
        """After the replicas stopped: the audit log (who wrote while whom held the Lease), the
        replicas' logs."""
        self.violations[:0] = self.ledger.violations
        state_dir = self.run.cluster.state_dir
        if state_dir is not None:
            audit = state_dir / "audit.log"
            stopped = time.time()
            with contextlib.suppress(TimeoutError):  # the API server writes its batches every second
                await until(lambda: audit.exists() and audit.stat().st_mtime > stopped + 1.5, 15, "")
            if audit.exists():
                events = audit_events(audit)
                self.violations += leader_violations(events, self.namespace)
                self.audited = sum(1 for e in events if replica_write(e, self.namespace))
                if not self.audited:
                    self.violations.append(
                        "no write by a replica in the audit log: the Lease check saw nothing"
                    )
            else:
                self.violations.append("no audit log: the replicas' writes not checked against the Lease")
        for op in self.run.replicas:
            text = op.log.read_text(errors="replace")
            if "Traceback" in text and "Fenced" not in text:
                self.findings.append(f"a Traceback in a replica's log: {op.log}")


# ---- the figures ----


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def steady(samples: list[Sample]) -> list[Sample]:
    """The acting replica's samples once it has acted `WARMUP_SECONDS`: a replica that just took
    over lists everything at once (tens of connections, idle again within ~30 s)."""
    out: list[Sample] = []
    pid, since = -1, 0.0
    for s in samples:
        if not s.acting:
            continue
        if s.pid != pid:
            pid, since = s.pid, s.t
        if s.t - since >= WARMUP_SECONDS:
            out.append(s)
    return out


def growth(samples: list[Sample], seconds: float) -> dict[str, dict[str, Any]]:
    """Per measure, the acting replica's medians (steady samples) in the second and last quarters,
    and whether the growth is within the limits (None: a quarter has no steady sample)."""
    calm = steady(samples)
    q2 = [s for s in calm if seconds / 4 <= s.t < seconds / 2]
    q4 = [s for s in calm if s.t >= seconds * 3 / 4]
    out: dict[str, dict[str, Any]] = {}
    for measure in ("rss_kib", "fds", "tcp"):
        a = _median([float(getattr(s, measure)) for s in q2])
        b = _median([float(getattr(s, measure)) for s in q4])
        if a is None or b is None:
            out[measure] = {"q2": a, "q4": b, "growth": None, "flat": None, "samples": [len(q2), len(q4)]}
            continue
        delta = b - a
        if measure == "rss_kib":
            flat = delta < RSS_FLAT_MIB * 1024 or delta < RSS_FLAT_RATIO * a
        else:
            flat = delta < (FD_FLAT if measure == "fds" else TCP_FLAT)
        out[measure] = {"q2": a, "q4": b, "growth": delta, "flat": flat, "samples": [len(q2), len(q4)]}
    return out


def figures(soak: Soak, wall: float, events_seconds: float) -> dict[str, Any]:
    acting = [s for s in soak.samples if s.acting]
    calm = steady(soak.samples) or acting
    points: dict[str, Sample | None] = {"start": None, "middle": None, "end": None}
    if calm:
        points = {
            "start": calm[0],
            "middle": min(calm, key=lambda s: abs(s.t - events_seconds / 2)),
            "end": calm[-1],
        }
    times = [f.converged for f in soak.faults if f.converged is not None]
    pids = [s.pid for s in acting]
    by_pid: dict[int, list[Sample]] = {}
    for s in calm:
        by_pid.setdefault(s.pid, []).append(s)
    longest = max(by_pid.values(), key=lambda ss: ss[-1].t - ss[0].t, default=[])
    ledgers = [*soak.ledger.clusters.values(), *(c for _, c in soak.ledger.retired.values())]
    return {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores",
        "seed": soak.seed,
        "minutes": soak.seconds / 60,
        "events_seconds": events_seconds,
        "wall_seconds": wall,
        "clusters": len(soak.names),
        "events": dict(soak.events),
        "faults": [dataclasses.asdict(f) for f in soak.faults],
        "faults_skipped": soak.skipped,
        "replicas_started": len(soak.run.replicas),
        "acting_pid_changes": sum(1 for a, b in itertools.pairwise(pids) if a != b),
        "pod_events": soak.ledger.events_seen,
        "audited_writes": soak.audited,
        "pods_created": sum(len(c.created) for c in ledgers),
        "pods_deleted": sum(len(c.deleted) for c in ledgers),
        "longest_acting": [dataclasses.asdict(longest[0]), dataclasses.asdict(longest[-1])]
        if longest
        else None,
        "violations": soak.violations,
        "findings": soak.findings,
        "first_converged": soak.first_converged,
        "final_converged": soak.final_converged,
        "converged_after_fault": {
            "max": max(times) if times else None,
            "median": _median(times),
            "not": sum(1 for f in soak.faults if f.converged is None),
        },
        "max_rss_kib": max((s.rss_kib for s in soak.samples), default=0),
        "max_fds": max((s.fds for s in soak.samples), default=0),
        "max_tcp": max((s.tcp for s in soak.samples), default=0),
        "points": {k: dataclasses.asdict(v) if v else None for k, v in points.items()},
        "growth": growth(soak.samples, events_seconds),
        "samples": [dataclasses.asdict(s) for s in soak.samples],
    }


def failed(fig: dict[str, Any]) -> bool:
    """A violation, or growth (not: too few steady samples to tell)."""
    return bool(fig["violations"]) or any(g["flat"] is False for g in fig["growth"].values())


def section(fig: dict[str, Any]) -> str:
    def point(measure: str, scale: float = 1.0) -> str:
        values = [
            fig["points"][k][measure] / scale if fig["points"][k] else None
            for k in ("start", "middle", "end")
        ]
        return " / ".join("-" if v is None else f"{v:.0f}" for v in values)

    def grew(measure: str, unit: str, scale: float = 1.0) -> str:
        g = fig["growth"][measure]
        if g["growth"] is None:
            return f"{unit}: no replica acted {WARMUP_SECONDS:g} s in the quarter"
        text = f"{unit} {g['growth'] / scale:+.1f}"
        if measure == "rss_kib":
            text += f" MiB ({g['growth'] / g['q2']:+.1%})"
        return text

    longest = "-"
    if fig["longest_acting"]:
        a, b = fig["longest_acting"]
        longest = (
            f"pid {a['pid']}, acted {(b['t'] - a['t']) / 60:.1f} min: RSS {a['rss_kib'] / 1024:.0f} / "
            f"{b['rss_kib'] / 1024:.0f} MiB, fds {a['fds']} / {b['fds']}, TCP {a['tcp']} / {b['tcp']}"
        )
    events = fig["events"]
    faults = Counter(f["key"] for f in fig["faults"])
    conv = fig["converged_after_fault"]
    verdicts = {g["flat"] for g in fig["growth"].values()}
    verdict = "**not flat**" if False in verdicts else "not measured" if None in verdicts else "flat"
    final = fig["final_converged"]
    lines = [
        TITLE,
        "",
        f"`make soak` (`e2e/chaos/soak.py`) on {fig['date']} ({fig['machine']}): {fig['minutes']:g} min of "
        f"random events on {fig['clusters']} RayClusters (kwok pods, no Ray) in one namespace of a private "
        "control plane, two `rayscale run --leader-elect` replicas (mode `all`) talking through the fault "
        f"proxy, seed {fig['seed']}. The invariants (no worker pod created twice, no healthy worker "
        "removed, never two head pods of one cluster, only the Lease holder writes) are checked on every "
        "pod event and in the API server's audit log. \"Flat\" means the acting replica's median in the "
        "last quarter of the run exceeds its median in the second quarter by less than "
        f"{RSS_FLAT_MIB:g} MiB or {RSS_FLAT_RATIO:.0%} (RSS), {FD_FLAT} (open fds), {TCP_FLAT} (established "
        f"TCP connections), sampled every {SAMPLE_SECONDS:g} s; a replica's first {WARMUP_SECONDS:g} s as "
        "the acting one are left out (one that just took over lists everything at once: tens of "
        "connections, idle again within about 30 s), and so are the start / middle / end figures.",
        "",
        "| what | figure |",
        "|---|---|",
        f"| duration | {fig['events_seconds'] / 60:.1f} min of events; "
        f"{fig['wall_seconds'] / 60:.1f} min in all "
        "(start, first convergence, last convergence, checks) |",
        f"| clusters | {fig['clusters']} (1-{MAX_REPLICAS} workers at first, 0-{MAX_REPLICAS} asked later); "
        f"{fig['pods_created']} worker pods created, {fig['pods_deleted']} deleted, {fig['pod_events']} pod "
        "events seen |",
        "| events | " + ", ".join(f"{n} {k}" for k, n in sorted(events.items())) + " |",
        f"| faults injected | {sum(faults.values())}: "
        + ", ".join(f"{k} {n}" for k, n in sorted(faults.items()))
        + (f" ({fig['faults_skipped']} skipped: no time left)" if fig["faults_skipped"] else "")
        + " |",
        f"| operator replicas started | {fig['replicas_started']} (acting replica changed "
        f"{fig['acting_pid_changes']} times) |",
        f"| invariant violations | {len(fig['violations'])} ({fig['audited_writes']} writes of the replicas "
        "checked against the Lease in the audit log) |",
        f"| converged after a fault (s) | max {conv['max'] or 0:.1f}, median {conv['median'] or 0:.1f}"
        + (f"; {conv['not']} not within {CONVERGE_SECONDS:.0f} s" if conv["not"] else "")
        + " |",
        f"| converged after the last events (an edit of every cluster) (s) | "
        f"{'not' if final is None else f'{final:.1f}'} |",
        f"| acting replica RSS, start / middle / end (MiB) | {point('rss_kib', 1024)} "
        f"(max of any replica {fig['max_rss_kib'] / 1024:.0f}) |",
        f"| acting replica open fds, start / middle / end | {point('fds')} (max {fig['max_fds']}) |",
        f"| acting replica TCP connections, start / middle / end | {point('tcp')} (max {fig['max_tcp']}) |",
        f"| the longest-acting replica, first / last steady sample | {longest} |",
        f"| growth, last quarter vs second (medians) | {grew('rss_kib', 'RSS', 1024)}, {grew('fds', 'fds')}, "
        f"{grew('tcp', 'connections')}: {verdict} |",
        "",
    ]
    if fig["violations"]:
        lines += ["Violations:", "", *[f"- {v}" for v in fig["violations"][:50]], ""]
    if fig["findings"]:
        lines += ["Findings:", "", *[f"- {v}" for v in fig["findings"]], ""]
    return "\n".join(lines)


def write_docs(text: str, docs: Path = DOCS) -> None:
    """Replace the section `TITLE` of `docs` (or add it at the end); the rest stays as it is."""
    old = docs.read_text() if docs.exists() else "# Reliability\n"
    found = re.search(rf"^{re.escape(TITLE)}[ \t]*$", old, re.MULTILINE)
    if found is None:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", found.end())
        new = old[: found.start()] + text + ("\n" + old[end + 1 :] if end >= 0 else "")
    docs.write_text(new.rstrip("\n") + "\n")


# ---- main ----


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    began = time.monotonic()
    cluster = testcluster.start_private(audit=True)
    try:
        cluster.kubectl_run("apply", "--server-side", "-f", str(CRDS))
        cluster.kubectl_run(
            "wait", "--for=condition=Established", "--timeout=60s", f"crd/{RAYCLUSTER.crd_name}"
        )
        cfg = client.Configuration()
        await config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
        with FaultProxy.running(cluster.kubeconfig, seed=args.seed) as proxy:
            async with client.ApiClient(configuration=cfg) as api:
                soak = Soak(
                    cluster, proxy, api, clusters=args.clusters, minutes=args.minutes,
                    faults=args.faults if args.faults is not None else max(1, round(args.minutes / 2)),
                    kinds=args.fault or FAULTS_SOAK, seed=args.seed,
                )  # fmt: skip
                try:
                    await soak.main()
                except (TimeoutError, RuntimeError, client.ApiException) as exc:
                    soak.violations.append(f"the soak stopped: {type(exc).__name__} {exc}")
                    soak.say(f"STOPPED: {type(exc).__name__} {exc}: {soak.ledger.describe()}")
                finally:
                    if soak.t0 and not soak.events_seconds:
                        soak.events_seconds = time.monotonic() - soak.t0
                    soak.run.stop()
                await soak.finish()
                soak.say(f"proxy: {proxy.counts()}")
    finally:
        cluster.stop()
    fig = figures(soak, time.monotonic() - began, soak.events_seconds)
    if not failed(fig):
        for op in soak.run.replicas:
            op.log.unlink(missing_ok=True)
    else:
        print("replica logs: " + " ".join(str(op.log) for op in soak.run.replicas), flush=True)
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "30")),
                        help="how long the random events last (default 30)")  # fmt: skip
    parser.add_argument("--clusters", type=int, default=int(os.environ.get("SOAK_CLUSTERS", "20")))
    parser.add_argument("--faults", type=int, help="how many faults (default: one per 2 minutes)")
    parser.add_argument("--fault", action="append", choices=FAULTS_SOAK, help="only these kinds (repeatable)")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", "1")))
    parser.add_argument(
        "--write-docs", action="store_true", help="replace the section in docs/reliability.md"
    )
    args = parser.parse_args(argv)
    fig = asyncio.run(main_async(args))
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"soak-{datetime.datetime.now(datetime.UTC):%Y%m%dT%H%M%SZ}.json"
    out.write_text(json.dumps(fig, indent=1) + "\n")
    text = section(fig)
    if args.write_docs:
        write_docs(text)
    print(text)
    print(f"figures and samples: {out}")
    for v in fig["violations"]:
        print(f"VIOLATION: {v}", flush=True)
    return 1 if failed(fig) else 0


if __name__ == "__main__":
    sys.exit(main())
