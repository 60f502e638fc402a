"""One reader: a reconcile reads the RayCluster body when it makes its `ClusterSnapshot`, and never again.

After the snapshot the reconcile reads the typed values it holds: `ClusterMeta` (names, finalizers,
deletion, resourceVersion, the subject of Events), the status (`RayClusterStatus`: the conditions
planning reads, the status write's base) and the spec (`ClusterSnapshot.spec`, parsed once). The
controller is run with the API faked on a body that fails the test when read after the reader;
the same rule is then read in the controller's source, for the paths these reconciles do not take.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.support.builders import cluster, group, pod
from tests.support.fakes import KEY, EventLog, FakeClusterSource, FakeKubeOps
from tests.support.one_reader import LATE, Function, Manifest, key_reads, mapping_parameters, name_of

import rayscale
from rayscale.common.timefmt import rfc3339
from rayscale.controller import redis_cleanup, runner
from rayscale.controller.runner import ControllerConfig, RayClusterController
from rayscale.controller.snapshot import ClusterSnapshot
from rayscale.kube import ops


class Source(FakeClusterSource):
    """The watch's RayClusters, each read handed a copy of its own (a newer copy, as the watch's)."""

    def __init__(self, *bodies: dict[str, Any], pods: list[dict[str, Any]] | None = None) -> None:
        super().__init__(*bodies, pods=pods or [])
        self.handed: list[Manifest] = []

    def cluster(self, key: tuple[str, str]) -> Mapping[str, Any] | None:
        body = super().cluster(key)
        if body is None:
            return None
        self.handed.append(Manifest(copy.deepcopy(body)))
        return self.handed[-1]


@pytest.fixture(autouse=True)
def sealed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Manifest]]:
    """The reconcile's reader seals the body it read (the control of the sealing is
    test_autoscaler_one_reader's); the bodies it sealed, in order."""
    LATE.clear()
    read: list[Manifest] = []

    def snapshot(body: Any, *args: Any) -> ClusterSnapshot:
        made = ClusterSnapshot(body, *args)
        body.sealed = True
        read.append(body)
        return made

    monkeypatch.setattr(runner, "ClusterSnapshot", snapshot)
    yield read
    assert LATE == []  # also what a broad `except` in the reconcile would have swallowed


@pytest.fixture
def patches(monkeypatch: pytest.MonkeyPatch) -> list[list[dict[str, Any]]]:
    """The JSON patches of RayClusters' metadata (their finalizers)."""
    made: list[list[dict[str, Any]]] = []

    async def patch(api: Any, namespace: str, name: str, body: list[dict[str, Any]]) -> None:
        made.append(body)

    monkeypatch.setattr(ops, "json_patch_raycluster", patch)
    return made


def controller(source: Source, events: EventLog) -> RayClusterController:
    return RayClusterController(None, source, events, ControllerConfig())  # type: ignore[arg-type]


async def test_a_new_cluster_is_built_and_its_status_written_reading_the_body_once(
    kube_ops: FakeKubeOps, event_log: EventLog, sealed: list[Manifest]
) -> None:
    body = cluster(group("small", replicas=2))
    body["metadata"]["resourceVersion"] = "7"
    source = Source(body)
    scaler = controller(source, event_log)
    assert await scaler.reconcile(KEY) is None
    assert kube_ops.names("create_pod") == ["rc-head-", "rc-small-worker-", "rc-small-worker-"]
    assert event_log.reasons() == ["CreatedService", "CreatedHeadPod", "CreatedWorkerPod"]
    assert {(e.kind, e.name) for e in event_log.events} == {("RayCluster", "rc")}
    (status,) = kube_ops.statuses
    assert status["desiredWorkerReplicas"] == 2
    assert scaler._written[KEY].version == "7"  # the resourceVersion of the body the status came from
    # each create asked the watch whether the cluster is still wanted: a newer copy, read as the
    # snapshot reads it
    assert len(source.handed) == 4
    assert sealed == source.handed[:1]

    # Again, with the status written: the stored conditions are read from the typed status.
    source.bodies[KEY]["status"] = status
    kube_ops.existing.add("rc-head-svc")
    await scaler.reconcile(KEY)
    assert len(sealed) == 2


async def test_an_invalid_spec_reads_the_body_once(kube_ops: FakeKubeOps, event_log: EventLog) -> None:
    source = Source(cluster(group("small", min_replicas=3, max_replicas=1)))
    scaler = controller(source, event_log)
    assert await scaler.reconcile(KEY) is None
    assert event_log.reasons() == ["InvalidRayClusterSpec"]
    (status,) = kube_ops.statuses
    assert [c["type"] for c in status["conditions"]] == ["SpecValid"]
    source.bodies[KEY]["status"] = status  # the condition is there: no Warning again
    await scaler.reconcile(KEY)
    assert event_log.reasons() == ["InvalidRayClusterSpec"]


async def test_a_suspended_cluster_reads_its_conditions_from_the_typed_status(
    kube_ops: FakeKubeOps, event_log: EventLog
) -> None:
    source = Source(cluster(group("small", replicas=1), suspend=True), pods=[pod("rc-head-x", "headgroup")])
    scaler = controller(source, event_log)
    await scaler.reconcile(KEY)  # RayClusterSuspending=True is written
    source.bodies[KEY]["status"] = kube_ops.statuses[-1]
    await scaler.reconcile(KEY)
    assert kube_ops.names("delete_pod") == ["rc-head-x"]
    assert event_log.reasons()[-1] == "DeletedPod"


OPTIONS = {"redisAddress": "redis:6379"}


async def test_the_redis_finalizer_is_added_and_run_reading_the_body_once(
    kube_ops: FakeKubeOps,
    event_log: EventLog,
    patches: list[list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = cluster(group(replicas=1), gcsFaultToleranceOptions=OPTIONS)
    source = Source(body)
    scaler = controller(source, event_log)
    await scaler.reconcile(KEY)
    assert patches == [[{"op": "add", "path": "/metadata/finalizers", "value": [redis_cleanup.FINALIZER]}]]

    jobs: list[dict[str, Any]] = []

    async def get_job(api: Any, namespace: str, name: str) -> dict[str, Any] | None:
        return jobs[0] if jobs else None

    async def create_job(api: Any, namespace: str, manifest: dict[str, Any]) -> bool:
        jobs.append({**manifest, "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
        return True

    monkeypatch.setattr(ops, "get_job", get_job)
    monkeypatch.setattr(ops, "create_job", create_job)
    body["metadata"].update(
        finalizers=["other", redis_cleanup.FINALIZER], deletionTimestamp=rfc3339(datetime.now(UTC))
    )
    await scaler.reconcile(KEY)  # no pods left: the cleanup Job is created
    assert event_log.reasons()[-1] == "CreatedRedisCleanupJob"
    await scaler.reconcile(KEY)  # the Job is done: the finalizer goes
    path = "/metadata/finalizers/1"
    assert patches[-1] == [
        {"op": "test", "path": path, "value": redis_cleanup.FINALIZER},
        {"op": "remove", "path": path},
    ]


# ----------------------------------------------------------------------------- the same, read in the source

PACKAGE = Path(rayscale.__file__).parent
CONTROLLER = sorted((PACKAGE / "controller").glob("*.py"))
BODY_NAMES = {"body", "cluster", "raycluster"}  # what a RayCluster body is called
BODY_KEYS = {"metadata", "spec", "status"}
#: (module, function): where a body may be read: the reader, and what runs before any reader
#: (the event filter: which queue a watch event marks).
ALLOWED = {
    ("controller/snapshot.py", "__post_init__"),
    ("controller/event_filter.py", "reconciled_facts"),
}
#: (module, function): where a body may be taken (as a plain mapping) and passed on: into the
#: reader, or before it.
TAKES_BODY = {
    ("controller/snapshot.py", "__post_init__"),
    ("controller/event_filter.py", "reconciled_facts"),
    ("controller/event_filter.py", "raycluster_changed"),
}
#: (module, function): where the watch's RayCluster is fetched: the reconcile (the reader's input),
#: its `wanted` check (a newer copy, read by `ClusterMeta.from_body`), the queue's version of it.
FETCHES = {
    ("controller/runner.py", "_reconcile"),
    ("controller/runner.py", "_wanted"),
    ("controller/runner.py", "__init__"),
}
#: what of a snapshot is the reader's own: its body, the spec it parses
PRIVATE = {"body", "raw_spec", "_spec"}


def _body_reads(function: ast.AST) -> Iterator[str]:
    """``body.get("spec")``, ``body["metadata"]``, ``snapshot.status.get(...)``, ``snapshot.raw_spec``
    and the like in `function`."""
    yield from key_reads(function, BODY_NAMES, BODY_KEYS)
    for node in ast.walk(function):
        if not isinstance(node, ast.Subscript | ast.Attribute):
            continue
        if isinstance(node, ast.Attribute) and name_of(node.value) == "snapshot" and node.attr in PRIVATE:
            yield f"snapshot.{node.attr}"
        elif ast.unparse(node.value) == "snapshot.status" and (
            isinstance(node, ast.Subscript) or node.attr == "get"
        ):
            yield "snapshot.status as a mapping"


def _body_parameters(function: Function) -> Iterator[str]:
    return mapping_parameters(function, BODY_NAMES)


def _fetches(function: ast.AST) -> Iterator[str]:
    """``self.source.cluster(...)``: the watch's RayCluster fetched."""
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "cluster"
            and name_of(node.func.value) == "source"
        ):
            yield "source.cluster()"


def _after_the_reader(function: Function) -> Iterator[str]:
    """`body` used after the line that makes the snapshot from it."""
    made = [
        n.lineno
        for n in ast.walk(function)
        if isinstance(n, ast.Call) and name_of(n.func) == "ClusterSnapshot"
    ]
    for node in ast.walk(function):
        if made and isinstance(node, ast.Name) and node.id in BODY_NAMES and node.lineno > made[0]:
            yield f"{node.id} after the snapshot (line {node.lineno})"


Check = Callable[[Function], Iterator[str]]
NOWHERE: set[tuple[str, str]] = set()


def _found(sources: Mapping[str, str]) -> list[str]:
    found: list[str] = []
    for where, text in sources.items():
        for function in ast.walk(ast.parse(text)):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            at = (where, function.name)
            checks: list[tuple[Check, set[tuple[str, str]]]] = [(_after_the_reader, NOWHERE)]
            checks += [(_body_reads, ALLOWED), (_body_parameters, TAKES_BODY), (_fetches, FETCHES)]
            for check, allowed in checks:
                if at not in allowed:
                    found += [f"{where} {function.name}: {r}" for r in check(function)]
    return found


def test_the_reconcile_reads_no_body_after_the_reader_in_its_source() -> None:
    """The paths the reconciles above do not take: no function of the controller reads a RayCluster
    body, takes one or fetches one, but the reader and what runs before it."""
    sources = {f"controller/{p.name}": p.read_text() for p in CONTROLLER}
    assert _found(sources) == []


def test_the_source_check_finds_a_body_read() -> None:
    """The control: the check sees each shape it looks for."""
    text = (
        "def f(body: Obj, cluster: Mapping[str, Any]) -> None:\n"
        "    body.get('metadata')\n    cluster['spec']\n    pod.get('spec')\n    snapshot.status.get('x')\n"
        "    snapshot.raw_spec\n    self.source.cluster(key)\n"
        "async def g(self, body: Any) -> None:\n    s = ClusterSnapshot(body, [], [])\n    post(body)\n"
    )
    assert _found({"m.py": text}) == [
        "m.py f: body['metadata']",
        "m.py f: cluster['spec']",
        "m.py f: snapshot.raw_spec",
        "m.py f: snapshot.status as a mapping",
        "m.py f: body: Obj",
        "m.py f: cluster: Mapping[str, Any]",
        "m.py f: source.cluster()",
        "m.py g: body after the snapshot (line 10)",
    ]
