"""The pod informer's stream handling and the pod index, on canned watch streams (the real API
server's side is tests/integration/test_pod_informer.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from rayscale.api.names import RAYRESOURCEREQUEST
from rayscale.kube import ops
from rayscale.kube.by_cluster import ByCluster
from rayscale.kube.informer import Expired, Informer, Kind, _decode, _lines

NO_API: Any = None  # the calls never reach a client: `send_raw` is replaced


def pod(name: str, cluster: str | None, ns: str = "ns", rv: str = "1") -> dict[str, Any]:
    labels = {"ray.io/cluster": cluster} if cluster is not None else {}
    return {"metadata": {"name": name, "namespace": ns, "labels": labels, "resourceVersion": rv},
            "spec": {"containers": [{"name": "ray-worker", "image": "x"}]},
            "status": {"phase": "Pending"}}  # fmt: skip


class Stream:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


class Response:
    def __init__(self, chunks: list[bytes]) -> None:
        self.content = Stream(chunks)
        self.released = False

    def release(self) -> None:
        self.released = True


def events(*items: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(json.dumps({"type": t, "object": o}).encode() + b"\n" for t, o in items)


def informer(monkeypatch: pytest.MonkeyPatch, body: bytes, *, namespaces: list[str] | None = None,
             chunk: int = 7) -> tuple[Informer, ByCluster, list[Any], Response]:  # fmt: skip
    changed: list[Any] = []
    index = ByCluster(changed.append)
    inf = Informer(NO_API, index, label_selector="ray.io/cluster", namespaces=namespaces)
    resp = Response([body[i : i + chunk] for i in range(0, len(body), chunk)])

    async def send_raw(call: Any, what: str) -> Response:
        return resp

    monkeypatch.setattr(inf, "_call", lambda namespace, **params: None)
    monkeypatch.setattr(ops, "send_raw", send_raw)
    return inf, index, changed, resp


async def test_lines_are_whole_however_the_chunks_split_them() -> None:
    chunks = [b'{"a":', b'1}\n{"b"', b":2}\n\n", b'{"c":3}']
    assert [line async for line in _lines(Stream(chunks))] == [b'{"a":1}', b'{"b":2}', b'{"c":3}']  # type: ignore[arg-type]


async def test_a_watch_applies_each_event_and_returns_the_last_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = events(
        ("ADDED", pod("w-1", "a", rv="5")),
        ("ADDED", pod("w-2", "a", rv="6")),
        ("MODIFIED", pod("w-1", "a", rv="7") | {"status": {"phase": "Running", "hostIP": "x"}}),
        ("BOOKMARK", {"metadata": {"resourceVersion": "9"}}),
        ("DELETED", pod("w-2", "a", rv="10")),
        ("BOOKMARK", {"metadata": {"resourceVersion": "12"}}),
    )
    inf, index, changed, resp = informer(monkeypatch, body)
    assert await inf._watch("ns", "4") == "12"
    assert [p["metadata"]["name"] for p in index.of(("ns", "a"))] == ["w-1"]
    assert index.of(("ns", "a"))[0]["status"] == {
        "phase": "Running",
        "conditions": [],
        "containerStatuses": [],
    }
    assert changed == [("ns", "a")] * 4  # bookmarks change nothing
    assert resp.released
    assert inf.events == 6


async def test_an_expired_version_raises_expired(monkeypatch: pytest.MonkeyPatch) -> None:
    body = events(("ADDED", pod("w-1", "a")), ("ERROR", {"code": 410, "message": "too old resource version"}))
    inf, index, _, resp = informer(monkeypatch, body)
    with pytest.raises(Expired):
        await inf._watch("ns", "1")
    assert len(index) == 1
    assert resp.released


async def test_another_error_event_is_a_failed_call(monkeypatch: pytest.MonkeyPatch) -> None:
    inf, _, _, _ = informer(monkeypatch, events(("ERROR", {"code": 500, "message": "boom"})))
    with pytest.raises(ops.KubeError, match="500 boom"):
        await inf._watch("ns", "1")


async def test_patterns_drop_the_pods_of_other_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    body = events(("ADDED", pod("w-1", "a", ns="team-x")), ("ADDED", pod("w-1", "a", ns="kube-system")))
    inf, index, changed, _ = informer(monkeypatch, body, namespaces=["team-*"])
    assert inf.streams == [None]
    await inf._watch(None, "1")
    assert len(index) == 1
    assert changed == [("team-x", "a")]


def test_streams_one_per_named_namespace_or_one_for_all() -> None:
    index = ByCluster(lambda key: None)
    assert Informer(NO_API, index, label_selector="", namespaces=None).streams == [None]
    assert Informer(NO_API, index, label_selector="", namespaces=["a", "b"]).streams == ["a", "b"]
    assert Informer(NO_API, index, label_selector="", namespaces=["a", "b-*"]).streams == [None]


def test_a_relabelled_pod_moves_and_both_clusters_are_told() -> None:
    changed: list[Any] = []
    index = ByCluster(changed.append)
    index.upsert(pod("w", "a"))
    index.upsert(pod("w", "b"))
    assert index.of(("ns", "a")) == []
    assert len(index.of(("ns", "b"))) == 1
    index.upsert(pod("w", None))
    assert len(index) == 0
    assert changed == [("ns", "a"), ("ns", "a"), ("ns", "b"), ("ns", "b")]


def test_a_relist_replaces_only_its_namespace() -> None:
    changed: list[Any] = []
    index = ByCluster(changed.append)
    for name, ns in (("w-1", "x"), ("w-2", "x"), ("w-1", "y")):
        index.upsert(pod(name, "a", ns=ns))
    changed.clear()
    index.replace("x", [pod("w-2", "a", ns="x"), pod("w-3", "b", ns="x")])
    assert {p["metadata"]["name"] for p in index.of(("x", "a"))} == {"w-2"}
    assert len(index.of(("x", "b"))) == 1
    assert len(index.of(("y", "a"))) == 1
    assert set(changed) == {("x", "a"), ("x", "b")}
    index.replace(None, [])
    assert len(index) == 0


def test_events_are_decoded_without_managed_fields_and_otherwise_as_they_are() -> None:
    fields: dict[str, Any] = {"f:status": {'k:{"type":"Ready"}': {}}}
    meta = {"name": "w", "namespace": "ns", "annotations": {"tricky": 'x","managedFields":[1]},"spec":{'},
            "managedFields": [{"manager": "kwok", "fieldsV1": fields}]}  # fmt: skip
    event = {
        "type": "MODIFIED",
        "object": {"metadata": meta, "spec": {"a": [1]}, "status": {"phase": "Running"}},
    }
    line = json.dumps(event, separators=(",", ":")).encode()
    decoded = _decode(line)
    assert "managedFields" not in decoded["object"]["metadata"]
    del meta["managedFields"]
    assert decoded == event  # the annotation's look-alike bytes are left alone
    for other in (
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
        {"type": "ADDED", "object": {"metadata": {"name": "w", "managedFields": []}}},  # no spec after it
    ):
        assert _decode(json.dumps(other, separators=(",", ":")).encode()) == other


async def test_a_custom_resource_whose_crd_is_not_installed_is_none_and_listed_again_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An optional CRD (RayResourceRequests, RayVirtualClusters) left out does not keep the
    controller waiting for the informers, nor fail the liveness probe."""

    async def not_served(call: Any, what: str, *, body: bool = False) -> Any:
        raise ops.KubeError(f"{what}: 404 the server could not find the requested resource", 404)

    monkeypatch.setattr(ops, "send", not_served)
    changed: list[Any] = []
    index = ByCluster(changed.append)
    index.upsert(pod("w", "a"))  # as if listed before its CRD was deleted
    inf = Informer(
        NO_API,
        index,
        kind=Kind(RAYRESOURCEREQUEST.plural, RAYRESOURCEREQUEST.group, RAYRESOURCEREQUEST.version),
        namespaces=None,
    )
    monkeypatch.setattr(inf, "_call", lambda namespace, **params: None)
    assert await inf._list(None) == ""
    inf._synced(None)
    assert inf.synced.is_set()
    assert len(index) == 0
    assert inf.problem() is None
    pods = Informer(NO_API, index, namespaces=None)
    monkeypatch.setattr(pods, "_call", lambda namespace, **params: None)
    with pytest.raises(ops.KubeError):  # a core kind is always served: 404 is a failure there
        await pods._list(None)
