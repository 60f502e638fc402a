"""The indexes kopf's handlers and the informers feed: RayClusters by this shard's scope, and the
objects bound to a RayCluster by a label or a spec field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayscale.kube.by_cluster import ByCluster, by_spec
from rayscale.kube.informer import _decode
from rayscale.kube.raycluster_index import RayClusterIndex


def cluster(name: str, ns: str = "ns", shard: str = "a", rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "labels": {"shard": shard}, "resourceVersion": rv,
                         "managedFields": [{"manager": "kubectl"}]}, "spec": {}}  # fmt: skip


def ours(body: Mapping[str, Any]) -> bool:
    return bool(body["metadata"]["labels"]["shard"] == "a")


def test_rayclusters_are_kept_whole_when_ours_and_as_a_version_when_not() -> None:
    seen: list[tuple[tuple[str, str], bool]] = []
    index = RayClusterIndex(ours, lambda key, body: seen.append((key, body is not None)))
    index.upsert(cluster("mine"))
    index.upsert(cluster("theirs", shard="b", rv="5"))
    assert set(index.owned) == {("ns", "mine")}
    assert "managedFields" not in index.owned[("ns", "mine")]["metadata"]
    assert index.foreign == {("ns", "theirs"): "5"}
    index.upsert(cluster("mine", shard="b", rv="2"))  # relabelled: another shard's now
    assert index.owned == {}
    assert index.foreign == {("ns", "mine"): "2", ("ns", "theirs"): "5"}
    index.delete(cluster("theirs", shard="b"))
    assert seen == [
        (("ns", "mine"), True),
        (("ns", "theirs"), True),
        (("ns", "mine"), True),
        (("ns", "theirs"), False),
    ]


def test_a_relist_deletes_the_rayclusters_of_its_namespace_it_no_longer_shows() -> None:
    gone: list[tuple[str, str]] = []
    index = RayClusterIndex(ours, lambda key, body: gone.append(key) if body is None else None)
    for name, ns in (("a", "x"), ("b", "x"), ("c", "y")):
        index.upsert(cluster(name, ns=ns, shard="a" if name != "b" else "b"))
    index.replace("x", [cluster("a", ns="x")])
    assert gone == [("x", "b")]
    assert set(index.owned) == {("x", "a"), ("y", "c")}
    index.replace(None, [])
    assert sorted(gone) == [("x", "a"), ("x", "b"), ("y", "c")]
    assert index.owned == {}
    assert index.foreign == {}


def test_a_raycluster_is_kept_without_changing_what_the_watch_delivered() -> None:
    """kopf's body is shared with its handlers: the index copies what it slims."""
    delivered = cluster("mine")
    index = RayClusterIndex(ours, lambda key, body: None)
    index.upsert(delivered)
    assert delivered["metadata"]["managedFields"] == [{"manager": "kubectl"}]
    assert "managedFields" not in index.owned[("ns", "mine")]["metadata"]


def test_a_request_that_names_another_cluster_moves_and_both_are_told() -> None:
    changed: list[tuple[str, str]] = []
    index = ByCluster(changed.append, cluster_of=by_spec("clusterName"), slim=dict)
    request = {"metadata": {"name": "r", "namespace": "ns"}, "spec": {"clusterName": "one"}}
    index.upsert(request)
    index.upsert(request | {"spec": {"clusterName": "two"}})
    assert index.of(("ns", "one")) == []
    assert len(index.of(("ns", "two"))) == 1
    index.upsert(request | {"spec": {}})  # names none: kept under "" (told its cluster does not exist)
    assert len(index.of(("ns", ""))) == 1
    assert changed == [("ns", "one"), ("ns", "one"), ("ns", "two"), ("ns", "two"), ("ns", "")]


def test_a_custom_resources_event_is_decoded_whole() -> None:
    """Its fields come sorted by name: managedFields is not last in its metadata."""
    template = b'{"template":{"metadata":{"finalizers":["f"]},"spec":{}}}'
    line = (b'{"type":"ADDED","object":{"metadata":{"managedFields":[{"manager":"m"}],"name":"c",'
            b'"uid":"u"},"spec":{"headGroupSpec":' + template + b"}}}")  # fmt: skip
    assert _decode(line, cut=False)["object"]["spec"]["headGroupSpec"]["template"]["spec"] == {}
    assert _decode(line, cut=False)["object"]["metadata"]["managedFields"] == [{"manager": "m"}]
