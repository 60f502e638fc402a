"""A RayJob reconcile planned before the watch shows what the controller just created waits for the
watch rather than creating it again (rayscale.rayjob.created), and the RayJob index never goes back
to a version older than the controller's own write (its next status write would meet a 409)."""

from __future__ import annotations

from typing import Any

import pytest

from rayscale.kube import rayjob_ops
from rayscale.rayjob import actions as A
from rayscale.rayjob import consts as C
from rayscale.rayjob import controller as rayjob_controller
from rayscale.rayjob.controller import RayJobController
from rayscale.rayjob.created import TIMEOUT, Created
from rayscale.rayjob.index import RayJobIndex


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_created_until_seen_or_timed_out() -> None:
    clock = Clock()
    created = Created(clock)
    assert not created.unseen("RayCluster", "ns", "a", seen=False)  # never created here
    created.add("RayCluster", "ns", "a")
    assert created.unseen("RayCluster", "ns", "a", seen=False)
    assert not created.unseen("Service", "ns", "a", seen=False)  # another kind
    assert not created.unseen("RayCluster", "ns", "a", seen=True)  # the watch shows it: forgotten
    assert not created.unseen("RayCluster", "ns", "a", seen=False)
    created.add("RayCluster", "ns", "b")
    clock.now += TIMEOUT + 1
    assert not created.unseen("RayCluster", "ns", "b", seen=False)  # a watch that never delivers


def test_entries_nobody_asks_about_again_are_dropped() -> None:
    clock = Clock()
    created = Created(clock)
    for i in range(5):
        created.add("RayCluster", "ns", f"c{i}")
    clock.now += TIMEOUT + 1
    created.add("RayCluster", "ns", "new")
    assert len(created) == 1


def job(rv: str, uid: str = "u1", status: str = "Running") -> dict[str, Any]:
    meta = {"name": "a", "namespace": "ns", "uid": uid, "resourceVersion": rv}
    return {"metadata": meta, "status": {"jobDeploymentStatus": status}}


def test_the_index_keeps_the_controllers_newer_write_over_an_older_watch_event() -> None:
    index = RayJobIndex()
    marked: list[Any] = []
    index.changed = marked.append
    index.rayjob_event("ADDED", job("10", status="Initializing"))
    index.newer(("ns", "a"), job("12"))  # the status write's answer
    index.rayjob_event("MODIFIED", job("11", status="Initializing"))  # the watch, behind
    assert index.rayjobs[("ns", "a")]["metadata"]["resourceVersion"] == "12"
    index.rayjob_event("MODIFIED", job("12"))
    index.rayjob_event("MODIFIED", job("13"))
    assert index.rayjobs[("ns", "a")]["metadata"]["resourceVersion"] == "13"
    index.newer(("ns", "a"), job("12"))  # an answer older than what the watch showed since
    assert index.rayjobs[("ns", "a")]["metadata"]["resourceVersion"] == "13"
    index.rayjob_event("ADDED", job("5", uid="u2"))  # deleted and made again: a new object
    assert index.rayjobs[("ns", "a")]["metadata"]["uid"] == "u2"
    index.rayjob_event("MODIFIED", job("x7", uid="u2"))  # not decimal: taken as it comes
    assert index.rayjobs[("ns", "a")]["metadata"]["resourceVersion"] == "x7"
    assert len(marked) == 5  # the older event marked nothing


class Clusters:
    def __init__(self) -> None:
        self.shown: dict[tuple[str, str], Any] = {}

    def cluster(self, key: tuple[str, str]) -> Any:
        return self.shown.get(key)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def post(self, obj: Any, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason))


async def test_a_reconcile_before_the_watch_shows_the_new_cluster_does_not_create_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index, clusters, recorder = RayJobIndex(), Clusters(), Recorder()
    index.rayjobs[("ns", "a")] = job("10", status="Initializing")
    controller = RayJobController(None, index, clusters, None, recorder)  # type: ignore[arg-type]
    manifest = {"metadata": {"name": "a-x1", "namespace": "ns"}}
    creates: list[str] = []

    async def world(_: Any) -> None:
        return None

    async def create_custom(api: Any, kind: Any, body: Any) -> Any:
        creates.append(body["metadata"]["name"])
        return body

    step = A.Step(actions=[A.CreateCluster(manifest)], requeue=3.0)
    monkeypatch.setattr(controller, "world", world)
    monkeypatch.setattr(rayjob_controller, "plan", lambda _: step)
    monkeypatch.setattr(rayjob_ops, "create_custom", create_custom)
    assert await controller._reconcile(("ns", "a")) == 3.0
    assert await controller._reconcile(("ns", "a")) == C.STALE_WORLD_SECONDS  # the watch is behind
    assert creates == ["a-x1"]
    assert recorder.events == [("Normal", C.EV_CREATED_CLUSTER)]
    clusters.shown[("ns", "a-x1")] = manifest  # the watch delivers it; a plan asking again now is
    await controller._reconcile(("ns", "a"))  # not stale: the create goes (and the API server says)
    assert creates == ["a-x1", "a-x1"]
