"""When the indexes kopf's event handlers fill are whole: every custom resource a LIST shows."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import client
from tests.support.polling import turns

from rayscale.api.names import RAYCLUSTER, RAYRESOURCEREQUEST
from rayscale.common.types import ClusterKey
from rayscale.kube import listing, ops

CLUSTERS = RAYCLUSTER.path
REQUESTS = RAYRESOURCEREQUEST.path


class Lists:
    """Stands in for the API server's LISTs: `items` by plural; a plural missing is not served."""

    def __init__(self, items: dict[str, list[tuple[str, str]]]) -> None:
        self.items = items
        self.calls = 0

    async def __call__(self, api: Any, resource: tuple[str, str, str], namespace: str | None) -> set[Any]:
        self.calls += 1
        return set(self.items[resource[2]])


@pytest.fixture
def lists(monkeypatch: pytest.MonkeyPatch) -> Lists:
    fake = Lists({"rayclusters": [("ns", "a"), ("ns", "b")], "rayresourcerequests": [("ns", "r")]})
    monkeypatch.setattr(listing, "listed_keys", fake)
    return fake


async def test_waits_until_every_listed_object_is_indexed(lists: Lists) -> None:
    clusters: set[ClusterKey] = {("ns", "a")}
    requests: set[tuple[str, str]] = set()
    held = [(CLUSTERS, lambda: clusters), (REQUESTS, lambda: requests)]
    waiting = asyncio.create_task(listing.wait_indexed(None, ["ns"], held, poll=0))  # type: ignore[arg-type]
    await turns(20)
    assert not waiting.done()  # ns/b and ns/r not yet delivered by kopf
    clusters.add(("ns", "b"))
    requests.add(("ns", "r"))
    await asyncio.wait_for(waiting, 5)


async def test_an_object_deleted_before_kopf_delivered_it_is_not_waited_for(lists: Lists) -> None:
    clusters: set[ClusterKey] = {("ns", "a")}
    held = [(CLUSTERS, lambda: clusters)]
    waiting = asyncio.create_task(listing.wait_indexed(None, None, held, poll=0))  # type: ignore[arg-type]
    await turns(20)
    assert not waiting.done()
    lists.items["rayclusters"] = [("ns", "a")]  # ns/b deleted: the next LIST no longer shows it
    await asyncio.wait_for(waiting, 5)


async def test_a_resource_not_served_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    async def not_served(call: Any, what: str, *, body: bool = False) -> Any:
        call.close()
        raise ops.KubeError(f"{what}: 404 the server could not find the requested resource", 404)

    monkeypatch.setattr(ops, "send", not_served)

    class Objects:
        def list_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> Any:
            return asyncio.sleep(0)

    monkeypatch.setattr(client, "CustomObjectsApi", lambda api: Objects())
    assert await listing.listed_keys(None, REQUESTS, "ns") == set()  # type: ignore[arg-type]
