"""The watch-stall detector behind the liveness probe."""

from __future__ import annotations

import time
from typing import Any

import pytest

from rayscale.kube import ops
from rayscale.kube.watchhealth import WatchHealth


class FakeList:
    """Stands in for the LIST call; the detector's logic is what is under test."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], str] = {}

    async def __call__(self, api: Any, namespace: str | None) -> list[dict[str, Any]]:
        return [
            {"metadata": {"namespace": ns, "name": name, "resourceVersion": rv}}
            for (ns, name), rv in self.items.items()
        ]


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> FakeList:
    fake = FakeList()
    monkeypatch.setattr(ops, "list_rayclusters", fake)
    return fake


async def test_healthy_when_the_watch_has_every_version(listed: FakeList) -> None:
    listed.items = {("ns", "a"): "5"}
    health = WatchHealth(None, None, lambda: {("ns", "a"): "5"})  # type: ignore[arg-type]
    await health.check_once()
    await health.check_once()
    assert health.verdict() is None


async def test_a_version_missing_for_a_whole_interval_fails_the_probe(listed: FakeList) -> None:
    listed.items = {("ns", "a"): "7"}
    seen = {("ns", "a"): "5"}
    health = WatchHealth(None, None, lambda: seen)  # type: ignore[arg-type]
    await health.check_once()
    assert health.verdict() is None  # one check behind is normal: the event may be in flight
    await health.check_once()
    verdict = health.verdict()
    assert verdict is not None
    assert "('ns', 'a')" in verdict


async def test_a_newer_version_gets_a_fresh_interval(listed: FakeList) -> None:
    seen = {("ns", "a"): "5"}
    health = WatchHealth(None, None, lambda: seen)  # type: ignore[arg-type]
    listed.items = {("ns", "a"): "6"}
    await health.check_once()
    listed.items = {("ns", "a"): "7"}  # changed again; the watch delivered 6 meanwhile
    seen[("ns", "a")] = "6"
    await health.check_once()
    assert health.verdict() is None
    seen[("ns", "a")] = "7"
    await health.check_once()
    assert health.verdict() is None


async def test_missing_object_in_the_watch_cache_counts_as_behind(listed: FakeList) -> None:
    listed.items = {("ns", "new"): "1"}
    health = WatchHealth(None, None, lambda: {})  # type: ignore[arg-type]
    await health.check_once()
    await health.check_once()
    assert health.verdict() is not None


def test_checks_that_stop_running_fail_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    health = WatchHealth(None, None, lambda: {}, interval=10)  # type: ignore[arg-type]
    now = health.last_check
    monkeypatch.setattr(time, "monotonic", lambda: now + 31)
    assert health.verdict() == "watch health checks stopped running"


async def test_a_cluster_the_list_no_longer_shows_twice_at_one_version_is_forgotten(listed: FakeList) -> None:
    """kopf lists again after a broken stream without telling what was deleted meanwhile."""
    seen = {("ns", "gone"): "3", ("ns", "new"): "9"}
    forgotten: list[tuple[str, str]] = []
    health = WatchHealth(None, None, lambda: seen, gone=forgotten.append)  # type: ignore[arg-type]
    await health.check_once()  # one interval for the watch to deliver the deletion (or the LIST the object)
    assert forgotten == []
    listed.items = {("ns", "new"): "9"}  # created after the first LIST
    await health.check_once()
    assert forgotten == [("ns", "gone")]
