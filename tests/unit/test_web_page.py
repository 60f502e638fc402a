"""The status page (rayscale.web.page): what the fleet and a cluster show, escaping, the standby
and controller-mode pages, the refresh script allowed by its hash and nothing else."""

from __future__ import annotations

import base64
import copy
import hashlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from tests.support.fakes import FakeAutoscaler
from tests.support.views import HEAD, T0, observed, ray_node

from rayscale.autoscaler.view import cluster_view, fleet_entry
from rayscale.ray import model as ray
from rayscale.web.api import NO_AUTOSCALER, Served
from rayscale.web.page import MAX_ROWS
from rayscale.web.server import make_app

EVIL = "<script>alert(1)</script>"


class Tags(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def with_attr(self, name: str) -> list[dict[str, str]]:
        return [attrs for _, attrs in self.tags if name in attrs]

    def all_text(self) -> str:
        return " ".join(" ".join(self.text).split())


def real_view() -> dict[str, Any]:
    """A view made by the autoscaler's own code: three groups (one backing off), replicas in five
    states, Ray's nodes, pending and unmet demand, two decisions."""
    busy = ray_node("cpu-a", ray.NodeStatus.RUNNING, 1.0)
    idle = ray_node("cpu-b", ray.NodeStatus.IDLE, 4.0, 30_000)
    seen, history = observed(
        ray.ClusterState(1, "s", (HEAD, busy, idle, ray_node("cpu-c", ray.NodeStatus.DEAD, 0.0)))
    )
    return cluster_view(seen, history.newest_first())


Page = Callable[..., Awaitable[tuple[int, str, Any]]]


@pytest.fixture
async def page() -> AsyncIterator[Page]:
    """GET a path of the status page served from a `Served`: (status, HTML, headers)."""
    started: list[TestClient[Any, Any]] = []

    async def get(served: Served, path: str) -> tuple[int, str, Any]:
        client: TestClient[Any, Any] = TestClient(TestServer(make_app(served, html=True)))
        await client.start_server()
        started.append(client)
        response = await client.get(path)
        assert response.content_type == "text/html"
        return response.status, await response.text(), response.headers

    yield get
    for client in started:
        await client.close()


def fake_of(*views: dict[str, Any]) -> FakeAutoscaler:
    """An autoscaler that has `views`, each in the fleet with the entry of `observed`."""
    found = {(v["namespace"], v["name"]): v for v in views}
    seen, _ = observed(None)
    fleet = [{**fleet_entry(seen), "namespace": ns, "name": name} for ns, name in sorted(found)]
    return FakeAutoscaler(found, fleet)


def serving(*views: dict[str, Any], **more: Any) -> Served:
    fake = fake_of(*views)
    return Served(autoscaler=lambda: fake, wall_clock=lambda: T0 + timedelta(seconds=4), **more)


async def test_the_fleet_page_lists_every_cluster_with_a_link(page: Page) -> None:
    other = {**real_view(), "namespace": "team-b", "name": "batch"}
    status, html, _ = await page(serving(real_view(), other), "/")
    assert status == 200
    found = Tags(html)
    assert [a["data-cluster"] for a in found.with_attr("data-cluster")] == ["ns/demo", "team-b/batch"]
    links = [a["href"] for tag, a in found.tags if tag == "a"]
    assert {"/clusters/ns/demo", "/clusters/team-b/batch", "/api/v1/clusters"} <= set(links)
    text = found.all_text()
    for shown in ("cpu 3 / 3", "tpu 1 / 1", "1 scheduling", "1 failed", "2 BACKOFF", "reachable",
                  "01:00:00 (4s ago)"):  # fmt: skip
        assert shown in text, shown


async def test_the_cluster_page_shows_groups_replicas_ray_demand_and_decisions(page: Page) -> None:
    view = real_view()
    gone = copy.deepcopy(next(r for r in view["replicas"] if r["replica"] == "cpu-c"))
    view["replicas"].append({**gone, "replica": "cpu-old", "state": "removed", "cause": "IDLE", "gone": True})
    status, html, _ = await page(serving(view), "/clusters/ns/demo")
    assert status == 200
    found = Tags(html)
    assert [g["data-group"] for g in found.with_attr("data-group")] == ["cpu", "gpu", "tpu"]
    rows = {r["data-replica"]: r for r in found.with_attr("data-replica")}
    assert {name: r["data-state"] for name, r in rows.items()} == {
        r["replica"]: r["state"] for r in view["replicas"]
    }
    assert rows["cpu-old"]["class"] == "replica gone"
    assert rows["cpu-a"]["class"] == "replica"
    assert list(rows)[-1] == "cpu-old"  # gone replicas last
    assert [d["data-decision"] for d in found.with_attr("data-decision")] == ["0", "1"]
    text = found.all_text()
    for shown in (
        "backing off until 01:05:00",  # gpu
        "NODE_DEAD",  # cpu-c failed
        "idle since 00:59:30",  # cpu-b
        "CPU 3.5 / 10",  # usage of the live nodes
        "memory 0 B / 16 GiB",
        "BACKOFF every group that could hold it is backing off after failed launches",
        "placement group PACK [{CPU 1}, {CPU 1}]",
        "{CPU 4} request ns/reserve",
        "RayCluster",  # the older decision's trigger
    ):
        assert shown in text, shown
    scenario = [a["href"] for tag, a in found.tags if tag == "a" and a.get("href", "").endswith("/scenario")]
    assert scenario == [
        "/api/v1/clusters/ns/demo/decisions/0/scenario",
        "/api/v1/clusters/ns/demo/decisions/1/scenario",
    ]


async def test_everything_from_the_cluster_is_escaped(page: Page) -> None:
    view = real_view()
    view.update(namespace=f"ns{EVIL}", name=f"n{EVIL}", hold=EVIL)
    view["groups"][0]["name"] = EVIL
    view["groups"][0]["hostResources"] = {EVIL: 1}
    view["replicas"][0].update(group=EVIL, replica=EVIL, message=EVIL, cause=EVIL, state=EVIL)
    view["gcs"].update(reachable=False, lastError=EVIL, address=EVIL)
    view["demand"]["unmet"][0].update(why=EVIL, reason=EVIL)
    view["decisions"][0].update(trigger=EVIL, held=EVIL)
    assert view["ray"] is not None
    view["ray"]["nodes"][1]["pod"] = EVIL
    fake = fake_of(view)
    served = Served(autoscaler=lambda: fake)
    for path in ("/", "/clusters/ns%3Cscript%3Ealert(1)%3C%2Fscript%3E/n%3Cscript%3Ealert(1)%3C%2Fscript%3E"):
        status, html, _ = await page(served, path)
        assert status == 200, html
        assert "<script>alert" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert html.count("<script") == 1  # the refresh script, nothing else
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 12


async def test_only_the_refresh_script_may_run(page: Page) -> None:
    status, html, headers = await page(serving(real_view()), "/clusters/ns/demo")
    assert status == 200
    (script,) = re.findall(r"<script>(.*?)</script>", html, re.S)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = headers["Content-Security-Policy"]
    assert f"script-src 'sha256-{digest}';" in csp
    assert "default-src 'none'" in csp
    assert "fetch(location.href)" in script
    assert html.count("<main>") == 1  # what the script swaps


async def test_a_standby_page_names_the_leader(page: Page) -> None:
    served = serving(real_view(), leading=lambda: False, holder=lambda: "rayscale-7d9f8c-x2k4q_0b6e")
    for path in ("/", "/clusters/ns/demo"):
        status, html, _ = await page(served, path)
        assert status == 503
        text = Tags(html).all_text()
        assert "not the leader" in text
        assert "The leader is rayscale-7d9f8c-x2k4q_0b6e" in text


async def test_without_an_autoscaler_or_a_cluster_the_page_says_so(page: Page) -> None:
    status, html, _ = await page(Served(autoscaling=False), "/")
    assert status == 404
    assert NO_AUTOSCALER in Tags(html).all_text()
    status, html, _ = await page(serving(real_view()), "/clusters/ns/nope")
    assert status == 404
    assert "RayCluster ns/nope is not autoscaled here" in Tags(html).all_text()
    status, html, _ = await page(serving(), "/")
    assert status == 200
    assert "No autoscaled RayCluster yet" in Tags(html).all_text()


async def test_long_lists_are_cut_on_the_page(page: Page) -> None:
    view = real_view()
    template = view["replicas"][0]
    view["replicas"] = [{**template, "replica": f"r-{i:04d}"} for i in range(MAX_ROWS + 25)]
    status, html, _ = await page(serving(view), "/clusters/ns/demo")
    assert status == 200
    found = Tags(html)
    assert len(found.with_attr("data-replica")) == MAX_ROWS
    assert "25 more replicas not shown here: the JSON API lists them all." in found.all_text()
