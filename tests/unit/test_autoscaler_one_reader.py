"""One reader: a round reads the RayCluster manifest through `spec_reader.read_spec` and never again.

Everything the round reads of the cluster after that (the groups' replicas and ``workersToDelete``,
the resourceVersion, the annotations, the head's template and GCS port, ``authOptions``, the
metadata its Events and RayResourceRequests name) comes from the typed ``ScalingSpec``. The loop is
run with the API and the GCS faked on a manifest that fails the test when read after the reader.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.builders import gpu_group, group, pod, rc, rrr
from tests.support.fakes import KEY, FakeGcs, autoscaler, gcs_state, token_cluster
from tests.support.fakes import EventLog as Events
from tests.support.fakes import FakeApi as Api
from tests.support.fakes import FakeSource as Source
from tests.support.one_reader import LATE, Manifest, key_reads, mapping_parameters

import rayscale
from rayscale.autoscaler import decide
from rayscale.autoscaler.spec_reader import ScalingSpec, read_spec
from rayscale.common import labels as L
from rayscale.ray import model as ray


@pytest.fixture(autouse=True)
def _sealing_reader(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The round's reader seals the manifest it read."""
    LATE.clear()

    def read(manifest: Any, **kwargs: Any) -> ScalingSpec:
        scaling = read_spec(manifest, **kwargs)
        if isinstance(manifest, Manifest):
            manifest.sealed = True
        return scaling

    monkeypatch.setattr(decide, "read_spec", read)
    yield
    assert LATE == []  # also what a broad `except` in the round would have swallowed


def manifest(body: dict[str, Any]) -> Manifest:
    return Manifest(body)


def idle(pod_name: str) -> ray.RayNodeState:
    return ray.RayNodeState(
        f"id-{pod_name}", ray.NodeStatus.IDLE, instance_id=pod_name, idle_duration_ms=3_600_000
    )


def test_the_manifest_refuses_reads_once_sealed() -> None:
    """The control: a sealed manifest is noticed, however it is read."""
    body = manifest(rc(group("a")))
    assert body.get("spec") is not None
    body.sealed = True
    for read in (
        lambda: body.get("metadata"),
        lambda: body["spec"],
        lambda: "status" in body,
        lambda: {**body},
    ):
        with pytest.raises(AssertionError, match="after the reader"):
            read()
    assert LATE[:3] == ["metadata", "spec", "status"]
    LATE.clear()


async def test_a_scale_up_for_a_request_reads_the_manifest_once(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(monkeypatch)
    FakeGcs.state = gcs_state()
    body = rc(group("cpu", replicas=0), gpu_group())
    body["metadata"]["annotations"] = {
        "rayscale.io/max-node-provision-seconds": "30",
        "rayscale.io/unprovisioned-grace-seconds": "10",
    }
    body["spec"]["autoscalerOptions"] = {"version": "v1"}  # RayCompatible False: an Event
    events = Events()
    source = Source(manifest(body), requests=[rrr(3)])
    assert await autoscaler(source, events).step(KEY) == 5
    assert api.patches[0][0] == {"op": "test", "path": "/metadata/generation", "value": 1}
    assert api.patches[0][1:] == [{"op": "replace", "path": "/spec/workerGroupSpecs/1/replicas", "value": 3}]
    assert [name for name, _ in api.statuses] == ["reserve"]  # the request is bound to the cluster
    assert ("Normal", "ScaledUp", "group gpu: 0 -> 3 replicas") in events.posted
    assert "AutoscalerV1" in events.reasons("Warning")
    assert {e.kind for e in events.events} == {"RayCluster"}
    assert {e.name for e in events.events} == {"rc"}


async def test_an_idle_removal_reads_the_manifest_once(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(monkeypatch)
    body = rc(group("a", replicas=2, scaleStrategy={"workersToDelete": ["gone"]}))
    body["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": 60}
    FakeGcs.state = gcs_state(idle("w1"), idle("w2"))
    source = Source(manifest(body), [pod("w1", "a"), pod("w2", "a")])
    await autoscaler(source).step(KEY)
    assert sorted(FakeGcs.drained) == ["id-w1", "id-w2"]
    (patch,) = api.patches
    assert patch[1:] == [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 0},
        {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy/workersToDelete",
         "value": ["w1", "w2"]},
    ]  # fmt: skip


async def test_a_conflict_replans_on_the_fresh_manifest_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = rc(group("cpu", replicas=0), gpu_group(replicas=1), rv="43")
    changed["metadata"]["generation"] = 2  # somebody changed the spec
    fresh = manifest(changed)
    api = Api(monkeypatch, conflicts=1, fresh=fresh)
    source = Source(manifest(rc(group("cpu", replicas=0), gpu_group())), requests=[rrr(3)])
    assert await autoscaler(source).step(KEY) == 5
    assert [p[0]["value"] for p in api.patches] == [1, 2]
    assert fresh.sealed


async def test_the_gcs_address_and_token_come_from_the_typed_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    _, source = token_cluster(monkeypatch, "10.9.8.7:6379")
    assert source.body is not None
    source.body = manifest(source.body)
    events = Events()
    await autoscaler(source, events).step(KEY)
    assert FakeGcs.dialed == [("rc-head-svc.ns.svc.cluster.local:6379", "s3cret")]
    assert events.reasons("Warning") == ["GcsAddressIgnored"]


async def test_an_unreachable_gcs_reads_the_manifest_once(monkeypatch: pytest.MonkeyPatch) -> None:
    Api(monkeypatch)  # the GCS does not answer
    events = Events()
    source = Source(manifest(rc(group("a", replicas=0))), [pod("rc-head", L.HEAD_GROUP)])
    await autoscaler(source, events).step(KEY)
    assert events.reasons("Warning") == ["GcsUnreachable"]


# ----------------------------------------------------------------------------- the same, read in the source

PACKAGE = Path(rayscale.__file__).parent
#: The round's code: the autoscaler, and the helpers it reads a cluster with.
HELPERS = ("ray/address.py", "api/virtualcluster_names.py", "cluster/naming.py")
ROUND = [*sorted((PACKAGE / "autoscaler").rglob("*.py")), *(PACKAGE / p for p in HELPERS)]
MANIFEST_NAMES = {"cluster", "raycluster", "manifest", "fresh"}  # what a RayCluster manifest is called
#: (module, function): where a manifest may be read: the reader, and what runs before it (whether
#: a round runs at all: eligibility, the in-tree check) or instead of it (a cluster not taken).
ALLOWED = {
    ("autoscaler/spec_reader.py", "read_spec"),
    ("autoscaler/eligibility.py", "eligibility"),
    ("autoscaler/loop.py", "_step"),
    ("autoscaler/loop.py", "_written"),
    ("autoscaler/loop.py", "_idle_only"),  # a cluster not taken, read for its idle clock alone
}
#: (module, function): where a manifest may be passed on: into the reader, or before it.
TAKES_MANIFEST = {
    ("autoscaler/decide.py", "run"),
    ("autoscaler/decide.py", "_read"),
    ("autoscaler/eligibility.py", "eligibility"),
    ("autoscaler/loop.py", "_not_taken"),
    ("autoscaler/loop.py", "_idle_only"),
    ("autoscaler/loop.py", "_written"),
    ("autoscaler/reporter.py", "refused"),
    # a manifest given to it goes to the reader (tests, simulate); a round gives it its ScalingSpec
    ("autoscaler/snapshot.py", "build_snapshot"),
}


def _manifest_reads(function: ast.AST) -> Iterator[str]:
    """``cluster.get("spec")``, ``cluster["metadata"]`` and the like in `function`."""
    return key_reads(function, MANIFEST_NAMES)


def _manifest_parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[str]:
    """Parameters named like a manifest and typed as a plain mapping (``Obj``, ``Mapping[...]``)."""
    return mapping_parameters(function, MANIFEST_NAMES)


def test_the_round_reads_no_manifest_after_the_reader_in_its_source() -> None:
    """The paths the rounds above do not take: no function of the round reads a RayCluster manifest
    or takes one, but the reader and what runs before it."""
    found = []
    for path in ROUND:
        where = path.relative_to(PACKAGE).as_posix()
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if (where, function.name) not in ALLOWED:
                found += [f"{where} {function.name}: reads {r}" for r in _manifest_reads(function)]
            if (where, function.name) not in TAKES_MANIFEST | ALLOWED:
                found += [f"{where} {function.name}: takes {p}" for p in _manifest_parameters(function)]
    assert found == []


def test_the_source_check_finds_a_manifest_read() -> None:
    """The control: the check sees a read and a parameter of the shapes it looks for."""
    (function,) = ast.parse(
        "def f(cluster: Obj, fresh: Mapping[str, Any]) -> None:\n"
        "    cluster.get('metadata')\n    fresh['spec']\n    pod.get('spec')\n"
    ).body
    assert isinstance(function, ast.FunctionDef)
    assert list(_manifest_reads(function)) == ["cluster['metadata']", "fresh['spec']"]
    assert list(_manifest_parameters(function)) == ["cluster: Obj", "fresh: Mapping[str, Any]"]
