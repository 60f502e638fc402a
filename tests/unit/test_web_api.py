"""The status API (rayscale.web): its paths, errors, standby and controller-mode answers, read-only
methods, no secret in any answer, and the cost of a large view."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from tests.support.fakes import HEAD_GCS, KEY, FakeAutoscaler, autoscaler, token_cluster

from rayscale.autoscaler.history import DecisionHistory, decision_record
from rayscale.autoscaler.lifecycle import Lives, ReplicaLife, ReplicaState
from rayscale.autoscaler.scheduling.model import Decision, Group, GroupDecision, Node, Snapshot
from rayscale.autoscaler.status import GcsHealth
from rayscale.autoscaler.view import Observed, cluster_view, fleet_entry
from rayscale.common.types import ClusterKey
from rayscale.ray import model as ray
from rayscale.web.api import API, NO_AUTOSCALER, Served
from rayscale.web.server import make_app

NOW = datetime(2026, 11, 23, 10, 15, 4, tzinfo=UTC)
DEMO = ("team-a", "demo")
VIEW = {"namespace": "team-a", "name": "demo", "groups": [], "replicas": [], "decisions": [{"time": "t"}]}
ENTRY = {"namespace": "team-a", "name": "demo", "states": {"ready": 1}, "unmet": {}}
SCENARIO = {"groups": [{"name": "cpu"}], "nodes": [], "demands": []}
PATHS = (API, f"{API}/team-a/demo", f"{API}/team-a/demo/decisions/0/scenario")

Client = Callable[..., Awaitable[TestClient[Any, Any]]]


def fake_autoscaler() -> FakeAutoscaler:
    return FakeAutoscaler({DEMO: VIEW}, [ENTRY], {(DEMO, 0): SCENARIO})


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    """Start a test server (no real port needed) for a `Served`; closed after the test."""
    started: list[TestClient[Any, Any]] = []

    async def start(served: Served, *, html: bool = False) -> TestClient[Any, Any]:
        test_client: TestClient[Any, Any] = TestClient(TestServer(make_app(served, html=html)))
        await test_client.start_server()
        started.append(test_client)
        return test_client

    yield start
    for test_client in started:
        await test_client.close()


def serving(scaler: Any, **more: Any) -> Served:
    return Served(autoscaler=lambda: scaler, wall_clock=lambda: NOW, **more)


async def get_json(test_client: TestClient[Any, Any], path: str, status: int = 200) -> Any:
    response = await test_client.get(path)
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    return await response.json()


async def test_the_three_paths_answer_the_autoscalers_documents(client: Client) -> None:
    scaler = fake_autoscaler()
    api = await client(serving(scaler))
    fleet = await get_json(api, API)
    assert fleet == {"clusters": [ENTRY], "leader": True, "observedAt": "2026-11-23T10:15:04Z"}
    assert await get_json(api, f"{API}/team-a/demo") == VIEW
    assert await get_json(api, f"{API}/team-a/demo/decisions/0/scenario") == SCENARIO
    assert scaler.asked == [("fleet",), ("view", DEMO), ("scenario", DEMO, 0)]

    head = await api.head(f"{API}/team-a/demo")
    assert head.status == 200
    assert await head.read() == b""


async def test_unknown_clusters_and_scenarios_are_404_with_a_message(client: Client) -> None:
    api = await client(serving(fake_autoscaler()))
    body = await get_json(api, f"{API}/team-a/nope", 404)
    assert body == {"error": "RayCluster team-a/nope is not autoscaled here (or had no round yet)"}
    body = await get_json(api, f"{API}/team-a/demo/decisions/3/scenario", 404)
    assert "no scenario for decision 3" in body["error"]
    for path in (f"{API}/team-a/demo/decisions/-1/scenario", f"{API}/team-a/demo/decisions/x/scenario",
                 f"{API}/team-a", "/", "/clusters/team-a/demo", "/metrics"):  # fmt: skip
        assert await get_json(api, path, 404) == {"error": "Not Found"}, path


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
async def test_it_is_read_only(client: Client, method: str) -> None:
    scaler = fake_autoscaler()
    for html in (False, True):
        server = await client(serving(scaler), html=html)
        for path in (*PATHS, *(("/", "/clusters/team-a/demo") if html else ())):
            response = await server.request(method, path)
            assert response.status == 405, (method, path)
            assert response.headers["Allow"] == "GET,HEAD"
    assert scaler.asked == []


async def test_a_standby_answers_503_naming_the_leader(client: Client) -> None:
    scaler = fake_autoscaler()
    holder = {"name": "rayscale-7d9f8c-x2k4q_0b6e"}
    standby = await client(serving(scaler, leading=lambda: False, holder=lambda: holder["name"]))
    for path in PATHS:
        assert await get_json(standby, path, 503) == {"error": "not the leader", "leader": holder["name"]}
    holder["name"] = ""  # no holder seen yet
    assert await get_json(standby, API, 503) == {"error": "not the leader", "leader": None}
    assert scaler.asked == []  # a standby's autoscaler (if any) is never read


async def test_without_an_autoscaler_it_says_why(client: Client) -> None:
    controller = await client(Served(autoscaling=False))
    for path in PATHS:
        assert await get_json(controller, path, 404) == {"error": NO_AUTOSCALER}
    starting = await client(Served())  # leading, the autoscaler not made yet (kopf starting)
    assert await get_json(starting, API, 503) == {"error": "the autoscaler is starting"}


async def test_the_status_page_port_also_answers_the_api(client: Client) -> None:
    page = await client(serving(fake_autoscaler()), html=True)
    assert await get_json(page, f"{API}/team-a/demo") == VIEW
    assert await get_json(page, f"{API}/team-a/nope", 404) == {
        "error": "RayCluster team-a/nope is not autoscaled here (or had no round yet)"
    }


async def test_no_token_in_any_answer(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster with token auth, its Secret read and the token sent to the GCS: no endpoint (JSON
    or HTML) shows it."""
    _, source = token_cluster(monkeypatch, None)
    body = source.body
    assert body is not None
    worker = body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    worker["env"] = [{"name": "RAY_AUTH_TOKEN", "value": "s3cret"}]  # the manifest is not shown either
    body["metadata"]["annotations"] = {"example.com/note": "s3cret"}
    scaler = autoscaler(source)
    await scaler.step(KEY)
    assert scaler.view(KEY) is not None
    answers = []
    for html in (False, True):
        server = await client(Served(autoscaler=lambda: scaler), html=html)
        paths = [*PATHS, *(("/", "/clusters/ns/rc") if html else ())]
        for path in (p.replace("team-a/demo", "ns/rc") for p in paths):
            response = await server.get(path)
            answers.append(await response.text())
            assert response.status == 200, (path, answers[-1])
            assert "s3cret" not in answers[-1], path
    assert len(answers) == 8
    assert sum(HEAD_GCS in text for text in answers) == 3  # the address is there: JSON view, page, fleet page


def large_view(replicas: int) -> tuple[Observed, DecisionHistory]:
    """A cluster of `replicas` ready single-host replicas, each with a busy Ray node."""
    pods = [f"big-cpu-worker-{i:05d}" for i in range(replicas)]
    group = Group("cpu", {"CPU": 8, "memory": 32 * 2**30}, max_replicas=replicas)
    snapshot = Snapshot(groups=(group,), nodes=tuple(Node(p, "cpu", available={"CPU": 1}) for p in pods))
    decision = Decision({"cpu": GroupDecision(replicas, replicas, 0, 0)}, (), (), ())
    state = ray.ClusterState(
        1,
        "s",
        tuple(
            ray.RayNodeState(
                f"{i:056x}",
                ray.NodeStatus.RUNNING,
                instance_id=p,
                total_resources={"CPU": 8.0, "memory": 32.0 * 2**30, f"node:10.0.{i}": 1.0},
                available_resources={"CPU": 1.0, "memory": 32.0 * 2**30},
            )
            for i, p in enumerate(pods)
        ),
    )
    since = NOW - timedelta(minutes=5)
    lives = Lives(
        tuple(
            ReplicaLife("cpu", p, (p,), (f"{i:056x}",), ReplicaState.READY, since, since)
            for i, p in enumerate(pods)
        )
    )
    gcs = GcsHealth("big-head-svc.team-a.svc.cluster.local:6379", reachable=True, last_contact=NOW)
    history = DecisionHistory()
    history.add(decision_record(snapshot, decision, NOW, written=True))
    return Observed("team-a", "big", NOW, snapshot, decision, state, gcs, lives=lives), history


class Big:
    def __init__(self, replicas: int) -> None:
        self.seen, self.history = large_view(replicas)

    def view(self, key: ClusterKey) -> dict[str, Any] | None:
        return cluster_view(self.seen, self.history.newest_first())

    def fleet(self) -> list[dict[str, Any]]:
        return [fleet_entry(self.seen)]

    def history_scenario(self, key: ClusterKey, index: int = 0) -> dict[str, Any] | None:
        return self.history.scenario(index)


async def test_the_cost_of_a_view_of_10000_replicas(client: Client) -> None:
    """What one request costs the event loop for a cluster of 10,000 replicas (printed with -s;
    not asserted: the machine's speed varies). The page lists a bounded part of it."""
    big = Big(10_000)
    took = []
    for _ in range(3):
        started = time.perf_counter()
        body = json.dumps(big.view(DEMO), separators=(",", ":"))
        took.append(time.perf_counter() - started)
    print(f"\nview() and json.dumps of 10,000 replicas: {min(took) * 1000:.0f} ms (best of 3)")
    server = await client(serving(big), html=True)
    for path, accept in ((f"{API}/team-a/big", "identity"), (f"{API}/team-a/big", "gzip"),
                         ("/clusters/team-a/big", "gzip"), (API, "identity")):  # fmt: skip
        started = time.perf_counter()
        response = await server.get(path, headers={"Accept-Encoding": accept}, auto_decompress=False)
        raw = await response.read()
        elapsed = time.perf_counter() - started
        assert response.status == 200
        print(f"GET {path} ({accept}): {elapsed * 1000:.0f} ms, {len(raw) / 1e6:.2f} MB sent")
        if path == f"{API}/team-a/big" and accept == "identity":
            assert raw == body.encode()
            view = json.loads(raw)
            assert (len(view["replicas"]), len(view["ray"]["nodes"])) == (10_000, 10_000)
        if accept == "gzip":
            assert response.headers["Content-Encoding"] == "gzip"
