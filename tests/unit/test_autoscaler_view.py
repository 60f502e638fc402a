"""The view of a cluster and of the fleet: the contract's shape, plain JSON, RFC 3339 times, no secrets."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

from tests.support.views import GCS, HEAD, observed, ray_node

from rayscale.autoscaler.status import GcsHealth
from rayscale.autoscaler.view import Observed, cluster_view, fleet_entry
from rayscale.ray import model as ray

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def plain(value: Any, path: str = "") -> list[str]:
    """Paths whose value is not plain JSON data (exact types only: no enums, tuples, datetimes)."""
    if type(value) is dict:
        return [
            p
            for k, v in value.items()
            for p in ([f"{path}: key {k!r}"] if type(k) is not str else []) + plain(v, f"{path}.{k}")
        ]
    if type(value) is list:
        return [p for i, v in enumerate(value) for p in plain(v, f"{path}[{i}]")]
    if value is None or type(value) in (str, int, float, bool):
        return []
    return [f"{path}: {type(value).__name__}"]


def times(value: Any, keys: set[str], path: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        out = [(f"{path}.{k}", v) for k, v in value.items() if k in keys]
        return out + [t for k, v in value.items() for t in times(v, keys, f"{path}.{k}")]
    if isinstance(value, list):
        return [t for i, v in enumerate(value) for t in times(v, keys, f"{path}[{i}]")]
    return []


def test_the_view_has_the_contracts_shape_and_is_plain_json() -> None:
    state = ray.ClusterState(
        1,
        "s",
        (
            HEAD,
            ray_node("cpu-a", ray.NodeStatus.RUNNING, 1.0),
            ray_node("cpu-b", ray.NodeStatus.IDLE, 4.0, 30_000),
            ray_node("cpu-c", ray.NodeStatus.DEAD, 0.0),
        ),
    )
    seen, history = observed(state)
    view = cluster_view(seen, history.newest_first())
    assert plain(view) == []
    assert json.loads(json.dumps(view)) == view
    assert list(view) == [
        "namespace",
        "name",
        "observedAt",
        "gcs",
        "hold",
        "groups",
        "replicas",
        "ray",
        "demand",
        "decisions",
    ]
    stamps = times(
        view, {"observedAt", "lastContactTime", "since", "idleSince", "backoffUntil", "time", "lastSeen"}
    )
    assert len(stamps) > 10
    assert all(v is None or TIME.match(v) for _, v in stamps), stamps
    assert view["gcs"] == {
        "address": GCS.address,
        "reachable": True,
        "lastError": None,
        "lastContactTime": "2026-01-01T01:00:00Z",
    }
    cpu, gpu, tpu = view["groups"]
    assert cpu == {
        "name": "cpu",
        "minReplicas": 0,
        "maxReplicas": 10,
        "numOfHosts": 1,
        "desired": 3,
        "current": 3,
        "hostResources": {"CPU": 4, "memory": 8 * 2**30},
        "backoffUntil": None,
        "refused": False,
        "states": {"requested": 1, "ready": 1, "idle": 1, "failed": 1},
    }
    assert (gpu["backoffUntil"], gpu["states"]) == ("2026-01-01T01:05:00Z", {})
    assert (tpu["numOfHosts"], tpu["current"], tpu["states"]) == (2, 1, {"scheduling": 1})
    replicas = {r["replica"]: r for r in view["replicas"]}
    assert replicas["s1"] == {
        "group": "tpu",
        "replica": "s1",
        "pods": ["tpu-0", "tpu-1"],
        "rayNodes": [],
        "state": "scheduling",
        "since": "2026-01-01T00:59:40Z",
        "idleSince": None,
        "cause": None,
        "message": None,
        "gone": False,
    }
    assert (replicas["cpu-b"]["state"], replicas["cpu-b"]["idleSince"]) == ("idle", "2026-01-01T00:59:30Z")
    assert (replicas["cpu-c"]["state"], replicas["cpu-c"]["cause"]) == ("failed", "NODE_DEAD")
    assert replicas["cpu-a"]["rayNodes"] == ["id-cpu-a"]
    nodes = {n["pod"]: n for n in view["ray"]["nodes"]}
    assert nodes["demo-head"] == {
        "id": "aa01",
        "pod": "demo-head",
        "group": None,
        "head": True,
        "state": "RUNNING",
        "total": {"CPU": 2},
        "available": {"CPU": 1.5},
        "idleSeconds": 0.0,
    }
    assert (nodes["cpu-b"]["group"], nodes["cpu-b"]["state"], nodes["cpu-b"]["idleSeconds"]) == (
        "cpu",
        "IDLE",
        30,
    )
    assert view["ray"]["usage"] == {  # the live nodes: the dead one does not count
        "CPU": {"used": 3.5, "total": 10},
        "memory": {"used": 0, "total": 16 * 2**30},
    }
    assert view["demand"]["pending"] == [
        {"kind": "task", "resources": {"CPU": 1}, "count": 3},
        {"kind": "task", "resources": {"GPU": 1}, "count": 2},
        {"kind": "request", "resources": {"CPU": 4}, "unit": "ns/reserve", "count": 2},
        {"kind": "placementGroup", "bundles": [{"CPU": 1}, {"CPU": 1}], "strategy": "PACK", "count": 1},
    ]
    assert view["demand"]["pendingOmitted"] == 0
    assert view["demand"]["unmet"] == [
        {
            "kind": "task",
            "resources": {"GPU": 1},
            "count": 2,
            "reason": "BACKOFF",
            "why": "every group that could hold it is backing off after failed launches",
        }
    ]
    newest, older = view["decisions"]
    assert (newest["time"], older["time"], older["trigger"], older["written"]) == (
        "2026-01-01T01:00:00Z",
        "2026-01-01T00:59:55Z",
        "RayCluster",
        True,
    )


def test_without_the_gcs_there_is_no_ray_section_and_the_hold_is_said() -> None:
    seen, history = observed(None, hold="the head's raylet is not running in Ray's GCS")
    seen = Observed(
        seen.namespace,
        seen.name,
        seen.at,
        seen.snapshot,
        seen.decision,
        None,
        GcsHealth("x:6379", reachable=False, last_error="UNAVAILABLE: down"),
        seen.hold,
        seen.backoff_until,
        seen.lives,
    )
    view = cluster_view(seen, history.newest_first())
    assert view["ray"] is None
    assert view["hold"] == view["decisions"][0]["held"] == "the head's raylet is not running in Ray's GCS"
    assert view["gcs"] == {
        "address": "x:6379",
        "reachable": False,
        "lastError": "UNAVAILABLE: down",
        "lastContactTime": None,
    }
    assert plain(view) == []


def test_the_fleet_entry_is_short() -> None:
    seen, _ = observed(None)
    entry = fleet_entry(seen)
    assert plain(entry) == []
    assert entry == {
        "namespace": "ns",
        "name": "demo",
        "lastDecisionTime": "2026-01-01T01:00:00Z",
        "hold": None,
        "gcsReachable": True,
        "groups": [
            {"name": "cpu", "desired": 3, "current": 3},
            {"name": "gpu", "desired": 0, "current": 0},
            {"name": "tpu", "desired": 1, "current": 1},
        ],
        "states": {"requested": 1, "scheduling": 1, "ready": 1, "idle": 1, "failed": 1},
        "unmet": {"BACKOFF": 2},
    }


def test_the_view_modules_are_pure() -> None:
    """No kopf, Kubernetes client, gRPC or asyncio behind the view, the lifecycle and the history."""
    modules = ["lifecycle", "history", "view", "scenario_write"]
    code = (
        "import sys\n"
        + "".join(f"import rayscale.autoscaler.{m}\n" for m in modules)
        + "print(sorted(m for m in ('kopf', 'kubernetes_asyncio', 'grpc', 'asyncio') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
