"""Fuzzed RayClusters and RayResourceRequests against a real API server, `rayscale run --mode all`
running (the strategies are tests/fuzz_specs.py).

Hypothesis draws the objects (a fixed seed: the same objects every run); they are applied in
batches, then every outcome is polled for with one deadline per batch. For every object the API
server admits, rayscale's own code (`plan_cluster`, `bundle_problem`) says what must happen:

- an invalid RayCluster gets SpecValid=False and a Warning Event, both with exactly the message the
  validation gives, naming a field of the object, and no pod or Service is ever created for it (one
  made invalid by an update of a running one keeps exactly the pods and Services it had);
- an invalid RayResourceRequest gets phase Unsatisfiable, reason InvalidBundles and a Warning Event
  with the validation's message;
- a valid RayCluster gets its head pod (or a ReplicaFailure saying why not), a valid request a phase;
- the operator never dies and never logs a traceback;
- a canary RayCluster created after each batch gets its head and worker pods within RATIO times the
  time it took before any fuzzed object existed;
- invalid RayClusters given a valid spec again (`repair`) lose SpecValid=False and have their pods.

Objects the API server refuses are counted, not checked. FUZZ_EXAMPLES (default 60) and FUZZ_SEED
(default 0) select the objects: `make fuzz-api` runs 400.

A second test applies very large objects (hundreds of worker groups, replicas and numOfHosts near
2^31-1, a request of thousands of bundles): refused with a clear message, nothing created, one
Event each, and the operator's RSS grows by less than RSS_BOUND.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hack.localk8s import testcluster
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from rayscale.api import names as crd
from tests.support.builders import resource_request
from tests.support.fuzz_specs import (
    BASES,
    RAYCLUSTER,
    REQUEST,
    TARGET,
    Expected,
    FuzzObject,
    draw_objects,
    expected,
    named_field,
    unforeseen,
)
from tests.support.invalid_specs import MAX_INT32
from tests.support.kube import Kube
from tests.support.operators import Operator, running
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "60"))
FUZZ_SEED = int(os.environ.get("FUZZ_SEED", "0"))
BATCH = 30  # objects applied before their outcomes are polled for
OUTCOME_TIMEOUT = 120  # seconds for every outcome of one batch (generous: the machine is shared)
RATIO = 10  # how much slower than without fuzz load the canary may get its pods
RSS_BOUND = 150 * 2**20  # bytes the operator's RSS may grow by for the very large objects
LIMIT = "is over the limit of 10000 worker pods per RayCluster (--max-pods-per-cluster)"
FAILED_REASONS = re.compile(r"^(FailedToCreate|FailedCreate|ReconcileError)")


@dataclasses.dataclass
class Applied:
    name: str
    obj: FuzzObject
    stored: dict[str, Any]  # as the API server returned it: defaults applied, unknown fields pruned
    expect: Expected
    before: frozenset[str] | None = None  # an update: the cluster's pods and Services before it

    @property
    def kind(self) -> str:
        return self.obj.kind


@dataclasses.dataclass
class Tally:
    refused: dict[str, int] = dataclasses.field(default_factory=lambda: {RAYCLUSTER: 0, REQUEST: 0})
    valid: dict[str, int] = dataclasses.field(default_factory=lambda: {RAYCLUSTER: 0, REQUEST: 0})
    invalid: dict[str, int] = dataclasses.field(default_factory=lambda: {RAYCLUSTER: 0, REQUEST: 0})
    skipped: int = 0
    updates: int = 0  # of the accepted RayClusters, updates of a running one
    repaired: int = 0  # invalid RayClusters given a valid spec again
    canary: list[float] = dataclasses.field(default_factory=list)
    refusals: list[str] = dataclasses.field(default_factory=list)  # what the API server said, for -s

    def count(self, applied: Applied) -> None:
        self.updates += applied.before is not None
        if applied.expect.skipped:
            self.skipped += 1
        elif applied.expect.invalid is None:
            self.valid[applied.kind] += 1
        else:
            self.invalid[applied.kind] += 1

    def summary(self) -> str:
        tried = (
            sum(self.refused.values()) + sum(self.valid.values()) + sum(self.invalid.values()) + self.skipped
        )
        return (
            f"{tried} objects: refused by the API server {self.refused}; accepted and valid {self.valid},"
            f" invalid {self.invalid}, left alone (managedBy) {self.skipped}; {self.updates} of the"
            f" RayClusters updates of a running one; {self.repaired} invalid ones repaired; canary seconds"
            f" {self.canary}"
        )


# ---- the operator ----


def operator_problem(op: Operator) -> str | None:
    """Why the operator is not healthy: it exited, or its log has a traceback."""
    assert op.proc is not None
    if op.proc.poll() is not None:
        return f"the operator exited with {op.proc.returncode}:\n{op.output()}"
    log = op.log.read_text(errors="replace")
    if "Traceback" in log:
        at = log.index("Traceback")
        return f"the operator logged a traceback:\n{log[max(0, at - 2000) : at + 4000]}"
    return None


def rss(op: Operator) -> int:
    """The operator's resident set size in bytes (VmRSS)."""
    assert op.proc is not None
    for line in Path(f"/proc/{op.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


# ---- objects ----


def small_cluster(name: str, *, autoscaling: bool = False) -> dict[str, Any]:
    body = copy.deepcopy(BASES["raycluster-basic.yaml"])
    body["metadata"] = {"name": name}
    body["spec"]["enableInTreeAutoscaling"] = autoscaling
    worker = body["spec"]["workerGroupSpecs"][0]
    worker.update(replicas=0 if autoscaling else 1, minReplicas=0, maxReplicas=2)
    for group in (body["spec"]["headGroupSpec"], worker):  # fits anywhere, whatever else runs
        group["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "100m", "memory": "128Mi"}
        }
    return body


async def create(kube: Kube, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    api = crd.RAYRESOURCEREQUEST if kind == REQUEST else crd.RAYCLUSTER
    stored: dict[str, Any] = await kube.objects.create_namespaced_custom_object(*api.at(kube.ns), body)
    return stored


def pods_asked(spec: dict[str, Any]) -> int:
    """The pods a valid, not suspended RayCluster spec asks for: the head and every worker."""
    workers: int = sum(
        min(max(g.get("replicas", 0), g.get("minReplicas", 0)), g.get("maxReplicas", 2**31 - 1))
        * g.get("numOfHosts", 1)
        for g in spec.get("workerGroupSpecs") or []
    )
    return 1 + workers


async def owned(kube: Kube) -> dict[str, set[str]]:
    """cluster -> the names of its pods and Services (`pod/NAME`, `service/NAME`)."""
    out: dict[str, set[str]] = {}
    for kind, lister in (
        ("pod", kube.core.list_namespaced_pod),
        ("service", kube.core.list_namespaced_service),
    ):
        for item in (await lister(kube.ns, label_selector="ray.io/cluster")).items:
            cluster = item.metadata.labels["ray.io/cluster"]
            out.setdefault(cluster, set()).add(f"{kind}/{item.metadata.name}")
    return out


async def start_originals(kube: Kube, prefix: str, batch: Sequence[FuzzObject]) -> dict[int, frozenset[str]]:
    """Create the valid RayCluster each update in `batch` edits, and wait until each has every pod
    it asks for; index -> its pods and Services then."""
    originals = {i: obj.original for i, obj in enumerate(batch) if obj.original is not None}
    for i, original in originals.items():
        await kube.create({**original, "metadata": {"name": f"{prefix}-{i}"}})

    async def running() -> dict[int, frozenset[str]]:
        now = await owned(kube)
        out = {i: frozenset(now.get(f"{prefix}-{i}", ())) for i in originals}
        for i, names in out.items():
            pods = [n for n in names if n.startswith("pod/")]
            assert len(pods) == pods_asked(originals[i]["spec"]), (f"{prefix}-{i}", sorted(names))
        return out

    ready: dict[int, frozenset[str]] = await eventually(
        running, timeout=OUTCOME_TIMEOUT, message="the originals of the updates running"
    )
    return ready


async def apply_batch(kube: Kube, prefix: str, batch: Sequence[FuzzObject], tally: Tally) -> list[Applied]:
    """Create every object of `batch` (8 at a time), or update its running original to it; the
    ones the API server admitted."""
    limit = asyncio.Semaphore(8)
    before = await start_originals(kube, prefix, batch)

    async def one(i: int, obj: FuzzObject) -> Applied | None:
        body = obj.named(f"{prefix}-{i}")
        async with limit:
            try:
                if obj.original is None:
                    stored = await create(kube, obj.kind, body)
                else:  # the whole spec replaced: no resourceVersion to race the operator's status writes
                    stored = await kube.objects.patch_namespaced_custom_object(
                        *crd.RAYCLUSTER.at(kube.ns), body["metadata"]["name"],
                        [{"op": "replace", "path": "/spec", "value": body["spec"]}],
                        _content_type="application/json-patch+json",
                    )  # fmt: skip
            except ApiException as exc:
                if exc.status in (400, 413, 422):
                    tally.refused[obj.kind] += 1
                    tally.refusals.append(f"{obj.describe()} -> {exc.status} {str(exc.body)[:300]}")
                    return None
                raise AssertionError(
                    f"{obj.describe()}: the API server answered {exc.status}: {exc.body!s}"
                ) from exc
            except ValueError:  # not even JSON (NaN): the client refuses it, as the server would
                tally.refused[obj.kind] += 1
                return None
        expect = expected(obj.kind, stored)
        assert not unforeseen(expect), f"{obj.describe()}: planning failed unforeseen: {expect.invalid}"
        applied = Applied(stored["metadata"]["name"], obj, stored, expect, before.get(i))
        tally.count(applied)
        return applied

    done = await asyncio.gather(*(one(i, obj) for i, obj in enumerate(batch)))
    return [a for a in done if a is not None]


# ---- what the API server shows ----


@dataclasses.dataclass
class View:
    clusters: dict[str, dict[str, Any]]
    requests: dict[str, dict[str, Any]]
    events: list[Any]
    heads: set[str]  # clusters with a head pod

    def warnings(self, kind: str, name: str) -> list[Any]:
        return [
            e
            for e in self.events
            if e.type == "Warning" and e.involved_object.kind == kind and e.involved_object.name == name
        ]

    def condition(self, name: str, kind: str) -> dict[str, Any]:
        for cond in ((self.clusters.get(name) or {}).get("status") or {}).get("conditions") or []:
            if cond.get("type") == kind:
                found: dict[str, Any] = cond
                return found
        return {}


async def view(kube: Kube) -> View:
    clusters = await kube.objects.list_namespaced_custom_object(*crd.RAYCLUSTER.at(kube.ns))
    requests = await kube.objects.list_namespaced_custom_object(*crd.RAYRESOURCEREQUEST.at(kube.ns))
    events = (await kube.core.list_namespaced_event(kube.ns)).items
    pods = (await kube.core.list_namespaced_pod(kube.ns, label_selector="ray.io/node-type=head")).items
    return View(
        {c["metadata"]["name"]: c for c in clusters["items"]},
        {r["metadata"]["name"]: r for r in requests["items"]},
        events,
        {p.metadata.labels.get("ray.io/cluster", "") for p in pods},
    )


def outcome(v: View, a: Applied) -> str | None:
    """What is still missing for `a` (None: its outcome is all there). Raises AssertionError for an
    outcome that contradicts what rayscale's code says."""
    if a.expect.skipped:
        return None
    if a.kind == REQUEST:
        status = (v.requests.get(a.name) or {}).get("status") or {}
        if a.expect.invalid is None:
            assert status.get("reason") != "InvalidBundles", f"a valid request refused: {status}"
            return None if status.get("phase") else "a phase"
        return _refused(v, a, status, ("phase", "Unsatisfiable"), "status Unsatisfiable")
    cond = v.condition(a.name, "SpecValid")
    if a.expect.invalid is None:
        assert cond.get("status") != "False", f"a valid cluster refused: {cond}"
        if a.name in v.heads:
            return None
        replica_failure = v.condition(a.name, "ReplicaFailure").get("status") == "True"
        suspended = any(
            v.condition(a.name, c).get("status") == "True"
            for c in ("RayClusterSuspended", "RayClusterSuspending")
        )
        failed = any(FAILED_REASONS.match(e.reason or "") for e in v.warnings(RAYCLUSTER, a.name))
        return None if replica_failure or suspended or failed else "a head pod (or a ReplicaFailure)"
    return _refused(v, a, cond, ("status", "False"), "SpecValid=False")


def _refused(v: View, a: Applied, said: Mapping[str, Any], first: tuple[str, str], what: str) -> str | None:
    """What is still missing of `a`'s refusal (its expected reason and message): `said` (its status
    or condition) has `first` (a field and the refusal's value of it), the reason and the message;
    a Warning Event has the reason and the message."""
    assert a.expect.invalid is not None
    reason, message = a.expect.invalid
    field, value = first
    got = (said.get(field), said.get("reason"), said.get("message"))
    if got != (value, reason, message):
        return f"{what} {reason}: {message!r} (is {got})"
    if not any((e.reason, e.message) == (reason, message) for e in v.warnings(a.kind, a.name)):
        return f"a Warning Event {reason}: {message!r}"
    return None


async def outcomes(kube: Kube, op: Operator, applied: Sequence[Applied], within: float) -> None:
    """Poll until every object in `applied` shows its outcome (one deadline for all)."""
    waiting = list(applied)

    async def all_there() -> bool:
        if problem := operator_problem(op):
            raise RuntimeError(problem)  # not an AssertionError: eventually must not retry it
        v = await view(kube)
        still = []
        for a in waiting:
            try:
                missing = outcome(v, a)
            except AssertionError as exc:
                raise RuntimeError(f"{a.name} ({a.obj.describe()}): {exc}") from exc
            if missing is not None:
                still.append((a, missing))
        waiting[:] = [a for a, _ in still]
        assert not still, "; ".join(f"{a.name} ({a.obj.describe()}) waits for {m}" for a, m in still[:5])
        return True

    await eventually(
        all_there, timeout=within, interval=0.5, message=f"the outcomes of {len(applied)} objects"
    )


async def canary(kube: Kube, name: str) -> float:
    """Seconds from creating a small valid RayCluster to its head and worker pods existing."""
    started = time.monotonic()
    await kube.create(small_cluster(name))

    async def pods() -> bool:
        kinds = sorted(p.metadata.labels.get("ray.io/node-type") for p in await kube.pods(name))
        return kinds == ["head", "worker"]

    await eventually(pods, timeout=180, interval=0.1, message=f"the head and worker pods of {name}")
    return time.monotonic() - started


async def watch_created(kube: Kube, created: dict[str, set[str]]) -> None:
    """Record every pod and Service added in the namespace: cluster -> `pod/NAME`, `service/NAME`."""

    async def one(kind: str, lister: Any) -> None:
        while True:
            async with watch.Watch().stream(
                lister, kube.ns, label_selector="ray.io/cluster", timeout_seconds=60
            ) as stream:
                async for event in stream:
                    if event["type"] == "ADDED":
                        meta = event["object"].metadata
                        cluster = meta.labels.get("ray.io/cluster", "")
                        created.setdefault(cluster, set()).add(f"{kind}/{meta.name}")

    await asyncio.gather(
        one("pod", kube.core.list_namespaced_pod), one("service", kube.core.list_namespaced_service)
    )


@contextlib.contextmanager
def background(task: asyncio.Task[None]) -> Iterator[None]:
    try:
        yield
    finally:
        task.cancel()


def batches(items: Sequence[FuzzObject], size: int) -> Iterator[Sequence[FuzzObject]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


async def assert_nothing_created(
    kube: Kube, applied: Sequence[Applied], created: dict[str, set[str]]
) -> None:
    """No pod or Service was ever added for an invalid RayCluster (or one rayscale leaves alone);
    one that became invalid by an update has exactly the pods and Services it had before."""
    now = await owned(kube)
    for a in applied:
        if a.kind == RAYCLUSTER and (a.expect.invalid is not None or a.expect.skipped):
            before = a.before or frozenset()
            made = created.get(a.name, set()) - before
            assert not made, f"{a.name} ({a.obj.describe()}, {a.expect}): {sorted(made)} created"
            if a.before is not None:
                gone = before - now.get(a.name, set())
                assert not gone, f"{a.name} ({a.obj.describe()}, {a.expect}): {sorted(gone)} deleted"


async def repair(kube: Kube, op: Operator, applied: Sequence[Applied], creates: int = 3) -> int:
    """Give valid specs back to the invalid RayClusters of a batch: every update its original (its
    pods stay as they are), and the first `creates` others a small valid spec (they get their pods).
    Each must lose SpecValid=False and have its head pod: refusing a spec leaves nothing stuck."""
    fixed: list[Applied] = []
    for a in applied:
        if a.kind != RAYCLUSTER or a.expect.invalid is None or a.expect.invalid[0] != "InvalidRayClusterSpec":
            continue  # (a bad metadata.name cannot be repaired)
        if a.obj.original is None:
            if creates == 0:
                continue
            creates -= 1
        spec = (a.obj.original or small_cluster(a.name))["spec"]
        await kube.patch_json(a.name, [{"op": "replace", "path": "/spec", "value": spec}])
        fixed.append(a)

    async def all_repaired() -> bool:
        if problem := operator_problem(op):
            raise RuntimeError(problem)
        v, now = await view(kube), await owned(kube)
        for a in fixed:
            assert not v.condition(a.name, "SpecValid"), f"{a.name}: {v.condition(a.name, 'SpecValid')}"
            assert a.name in v.heads, f"{a.name}: no head pod after the repair"
            if a.before is not None:
                assert now.get(a.name, set()) == a.before, f"{a.name}: {sorted(now.get(a.name, ()))}"
        return True

    await eventually(all_repaired, timeout=OUTCOME_TIMEOUT, interval=0.5, message=f"{len(fixed)} repaired")
    return len(fixed)


def assert_fields_named(applied: Sequence[Applied]) -> None:
    for a in applied:
        if a.expect.invalid is not None:
            message = a.expect.invalid[1]
            assert named_field(a.stored, message), f"{a.name} ({a.obj.describe()}): no field named: {message}"


async def test_fuzzed_objects_are_explained_and_slow_no_other_cluster(
    api: client.ApiClient, cluster: testcluster.ClusterHandle, namespace: str, raycluster_crd: None,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    objects = draw_objects(FUZZ_EXAMPLES, FUZZ_SEED)
    op = Operator(cluster, namespace, mode="all", extra=("--autoscaler-interval", "1"))
    kube = Kube(api, namespace)
    tally = Tally()
    created: dict[str, set[str]] = {}
    every: list[Applied] = []
    with (
        contextlib.contextmanager(running)(op, request),
        background(asyncio.create_task(watch_created(kube, created))),
    ):
        # Without fuzz load: the best of two canaries (the first also waits for the operator's start).
        await canary(kube, "canary-warmup")
        baseline = max(await canary(kube, "canary-base"), 1.0)
        tally.canary.append(round(baseline, 2))
        await kube.create(small_cluster(TARGET, autoscaling=True))
        for b, batch in enumerate(batches(objects, BATCH)):
            applied = await apply_batch(kube, f"fz{b}", batch, tally)
            took = await canary(kube, f"canary-{b}")
            tally.canary.append(round(took, 2))
            assert took <= RATIO * baseline, (
                f"the canary after batch {b} took {took:.1f}s, over {RATIO} x {baseline:.1f}s;"
                f" {tally.summary()}"
            )
            await outcomes(kube, op, applied, OUTCOME_TIMEOUT)
            await assert_nothing_created(kube, applied, created)
            tally.repaired += await repair(kube, op, applied)
            every += applied
        assert_fields_named(every)
        assert operator_problem(op) is None
    print("\n".join(tally.refusals))
    print(tally.summary())
    assert sum(tally.invalid.values()) >= len(objects) // 3, tally.summary()


def many_groups(name: str, groups: int, **fields: Any) -> dict[str, Any]:
    body = small_cluster(name)
    first = body["spec"]["workerGroupSpecs"][0]
    body["spec"]["workerGroupSpecs"] = [
        {**copy.deepcopy(first), "groupName": f"g{i}", **fields} for i in range(groups)
    ]
    return body


def duplicate_last(body: dict[str, Any]) -> dict[str, Any]:
    body["spec"]["workerGroupSpecs"][-1]["groupName"] = "g0"
    return body


def counts(name: str, **fields: Any) -> dict[str, Any]:
    body = small_cluster(name)
    body["spec"]["workerGroupSpecs"][0].update(fields)
    return body


def big_request(name: str, bundles: int, count: int) -> dict[str, Any]:
    return resource_request(name, TARGET, *[({"CPU": 1}, count)] * bundles)


def over(field: str, replicas: int, hosts: int) -> str:
    pods = f"{replicas} replicas x {hosts} hosts = {replicas * hosts} pods"
    return f"spec.workerGroupSpecs[0].{field}: {pods} {LIMIT}"


def too_many_bundles(index: int, total: int) -> str:
    return (
        f"a bundle cannot be read: spec.bundles[{index}].count: {total} bundles in all is over the limit of"
        " 100000 per RayResourceRequest"
    )


I32 = MAX_INT32
HOSTS_OVER = f"spec.workerGroupSpecs[0].numOfHosts: {I32} hosts per replica {LIMIT}"
DUPLICATE = "spec.workerGroupSpecs[999].groupName: 'g0' is also the name of spec.workerGroupSpecs[0]"
LARGE: dict[str, tuple[str, dict[str, Any], str]] = {
    "groups-500-x-21": (
        RAYCLUSTER,
        many_groups("groups-500-x-21", 500, replicas=21, maxReplicas=21),
        f"spec.workerGroupSpecs: 10500 worker pods in all {LIMIT}",
    ),
    "groups-300-int32": (
        RAYCLUSTER,
        many_groups("groups-300-int32", 300, replicas=I32, maxReplicas=I32),
        over("replicas", I32, 1),
    ),
    "groups-1000-dup": (
        RAYCLUSTER,
        duplicate_last(many_groups("groups-1000-dup", 1000, replicas=0)),
        DUPLICATE,
    ),
    "replicas-int32": (
        RAYCLUSTER,
        counts("replicas-int32", replicas=I32, maxReplicas=I32),
        over("replicas", I32, 1),
    ),
    "min-replicas-int32": (
        RAYCLUSTER,
        counts("min-replicas-int32", minReplicas=I32, maxReplicas=I32),
        over("minReplicas", I32, 1),
    ),
    "hosts-int32": (RAYCLUSTER, counts("hosts-int32", numOfHosts=I32), HOSTS_OVER),
    "both-int32": (
        RAYCLUSTER,
        counts("both-int32", replicas=I32, maxReplicas=I32, numOfHosts=I32),
        HOSTS_OVER,
    ),
    "hosts-5000-x-3": (
        RAYCLUSTER,
        counts("hosts-5000-x-3", replicas=3, maxReplicas=3, numOfHosts=5000),
        over("replicas", 3, 5000),
    ),
    "bundles-6000": (REQUEST, big_request("bundles-6000", 6000, 20), too_many_bundles(5000, 100_020)),
    "bundles-int32": (REQUEST, big_request("bundles-int32", 2, I32), too_many_bundles(0, I32)),
}


async def test_very_large_objects_are_refused_with_bounded_memory_and_nothing_created(
    api: client.ApiClient, cluster: testcluster.ClusterHandle, namespace: str, raycluster_crd: None,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    op = Operator(cluster, namespace, mode="all", extra=("--autoscaler-interval", "1"))
    kube = Kube(api, namespace)
    created: dict[str, set[str]] = {}
    with (
        contextlib.contextmanager(running)(op, request),
        background(asyncio.create_task(watch_created(kube, created))),
    ):
        await canary(kube, "canary-warmup")  # the operator runs and has reconciled once
        await kube.create(small_cluster(TARGET, autoscaling=True))
        before = rss(op)
        applied = []
        for name, (kind, body, message) in LARGE.items():
            size = len(json.dumps(body))
            local = {**body, "metadata": {**body["metadata"], "namespace": namespace, "uid": "u"}}
            reason = "InvalidBundles" if kind == REQUEST else "InvalidRayClusterSpec"
            # before creating it: a large object that is valid would be thousands of pods
            assert expected(kind, local).invalid == (reason, message), name
            stored = await create(kube, kind, body)
            expect = expected(kind, stored)
            assert expect.invalid == (reason, message), (
                f"{name} ({size} bytes): rayscale's code says {expect}"
            )
            applied.append(Applied(name, FuzzObject(kind, "large", body, (name,)), stored, expect))
        await outcomes(kube, op, applied, OUTCOME_TIMEOUT)
        took = await canary(kube, "canary-after")  # the operator is not busy with them
        after = rss(op)
        assert after - before < RSS_BOUND, f"RSS grew from {before >> 20} MiB to {after >> 20} MiB"
        # One Event per object, posted once: nothing is retried or repeated for them.
        events = (await kube.core.list_namespaced_event(namespace)).items
        for a in applied:
            mine = [e for e in events if e.involved_object.name == a.name and e.type == "Warning"]
            assert [(e.reason, e.count) for e in mine] == [(a.expect.invalid[0], 1)], (a.name, mine)  # type: ignore[index]
        await assert_nothing_created(kube, applied, created)
        assert operator_problem(op) is None
    print(f"RSS {before >> 20} MiB -> {after >> 20} MiB; canary after the large objects: {took:.1f}s")
