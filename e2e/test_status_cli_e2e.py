"""`rayscale status` (and `kubectl rayscale status`, `rayscale simulate --from-cluster`) on a real
scaling cluster: the local control plane, `rayscale run --status-port`, a real Ray through the
bridge, and a Ray driver whose work scales a group up.

The CLI runs as a subprocess, as a user runs it, at three scripted points: the cluster idle, a
placement group of 2 bundles placed on the 2 workers it launched, and one more actor that the group
(at maxReplicas) cannot take. Each point is first awaited on the CLI's own JSON (the operator's
view: replica states, demand, the decision that repeats), then its text and JSON are compared with
the golden files in e2e/data/status/ after normalising what varies from run to run: ages and times,
pod name suffixes, Ray node and placement group ids, ports, round counts, what triggered a round (a
pod event, the interval or a read of Ray's state, whichever came first), Ray's memory and object
store sizes (from this machine's memory), the order of Ray's nodes and of Events of the same few
seconds; runs of spaces are collapsed, as column widths follow those values. The raw outputs of the
last run are in e2e/.results/status/. After a deliberate change of the output, rewrite the golden
files with ``RAYSCALE_UPDATE_GOLDEN=1 pytest e2e/test_status_cli_e2e.py`` and review the diff.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.harness import NAME, RESULTS, Scenario, group, run_process
from hack.localk8s import testcluster
from hack.localk8s.launcher import free_port
from tests.support.builders import ROOT
from tests.support.operators import AUTOSCALING_EXTRA, Operator, running
from tests.support.polling import eventually

from rayscale import run as run_command

pytestmark = pytest.mark.timeout(600)

GOLDEN = Path(__file__).resolve().parent / "data" / "status"
RAW = RESULTS / "status"
CLI_TIMEOUT = 60.0
TIME_KEYS = {"observedAt", "fetchedAt", "lastContactTime", "since", "idleSince", "backoffUntil", "time",
             "lastSeen", "lastDecisionTime", "created", "lastTransitionTime"}  # fmt: skip


def _has_status_port() -> bool:
    parser = argparse.ArgumentParser()
    run_command.register(parser.add_subparsers())
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return any("--status-port" in a.option_strings for a in sub.choices["run"]._actions)


@pytest.fixture
def status_port() -> int:
    if not _has_status_port():
        pytest.skip("`rayscale run` has no --status-port: the operator does not serve its status API yet")
    return free_port()


@pytest.fixture
def autoscaling_operator(
    cluster: testcluster.ClusterHandle,
    namespace: str,
    raycluster_crd: None,
    status_port: int,
    request: pytest.FixtureRequest,
) -> Iterator[Operator]:
    """The e2e operator (autoscaling every second), serving its status API on a free port."""
    extra = (*AUTOSCALING_EXTRA, "--status-port", str(status_port), "--status-address", "127.0.0.1")
    yield from running(Operator(cluster, namespace, mode="all", extra=extra), request)


# ---------------------------------------------------------------------------- the CLI


class Cli:
    def __init__(self, cluster: testcluster.ClusterHandle, namespace: str, port: int) -> None:
        self.cluster = cluster
        self.target = f"{namespace}/{NAME}"
        self.namespace = namespace
        self.endpoint = f"http://127.0.0.1:{port}"

    def env(self, columns: int | None) -> dict[str, str]:
        """The test's environment, the venv's executables (kubectl-rayscale) first on PATH."""
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        env = {**self.cluster.env, "PYTHONPATH": str(ROOT / "operator"), "PATH": path}
        env.pop("NO_COLOR", None)
        env.pop("COLUMNS", None)
        if columns:
            env["COLUMNS"] = str(columns)
        return env

    async def run(self, *argv: str, program: str | None = None, columns: int | None = 1000) -> str:
        """Its standard output; it must exit 0 with nothing on standard error."""
        command = [*([program] if program else [sys.executable, "-m", "rayscale"]), *argv]
        code, text, errors = await run_process(*command, env=self.env(columns), timeout=CLI_TIMEOUT)
        assert code == 0, f"{' '.join(command)} exited {code}: {errors}"
        assert errors == "", errors
        return text

    async def status(self, *more: str, columns: int | None = 1000) -> str:
        return await self.run("status", self.target, "--endpoint", self.endpoint, *more, columns=columns)

    async def doc(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(await self.status("-o", "json"))
        return found


@pytest.fixture
def rayscale(cluster: testcluster.ClusterHandle, namespace: str, status_port: int) -> Cli:
    return Cli(cluster, namespace, status_port)


# ---------------------------------------------------------------------------- normalising


def _text(value: str, namespace: str) -> str:
    value = value.replace(namespace, "<ns>")
    value = re.sub(r"\b(ray-cluster-(?:head|small-group-worker))-[a-z0-9]{5}\b", r"\1-<id>", value)
    return re.sub(r"127\.0\.0\.\d+:\d+", "<address>", value)


def normal_json(value: Any, namespace: str, key: str = "") -> Any:
    if key in {"memory", "object_store_memory"}:  # Ray sizes them from this machine's memory
        return "<bytes>"
    if key == "events":  # the Events of a few seconds come in any order (their times are to the second)
        return sorted(normal_json(value, namespace, "event"), key=lambda e: (e["reason"], e["message"]))
    if isinstance(value, dict):
        return {_pg(k): normal_json(v, namespace, k) for k, v in value.items()}
    if isinstance(value, list):
        items = [normal_json(v, namespace, key) for v in value]
        if key in {"nodes", "replicas", "pods"}:  # in the GCS's order, or by random pod names
            items.sort(key=lambda v: json.dumps(v, sort_keys=True))
        return items
    if value is None:
        return None
    if key in TIME_KEYS:
        return "<time>"
    if key in {"id", "rayNodes"}:
        return "<node>"
    if key in {"idleSeconds", "repeats"}:
        return "<n>"
    if key == "trigger":
        return "<trigger>"
    if isinstance(value, str):
        return _text(value, namespace)
    return value


def _pg(name: str) -> str:
    """Ray's resources of a placement group's bundles carry its id: CPU_group_0_<pg>, bundle_group_<pg>."""
    return re.sub(r"_group_(\d+_)?[0-9a-f]{16,}$", r"_group_\1<pg>", name)


def normal_text(text: str, namespace: str) -> str:
    text = _text(text, namespace)
    # Node ids first: an id such as 1234567d would otherwise read as an age of days.
    text = re.sub(r"\b[0-9a-f]{8}\b", "<node>", text)
    text = re.sub(r"\b\d+(?:s|m|h|d)(?:\d+[sm])?\b", "<age>", text)  # 45s, 3m12s, 5h, ...
    text = re.sub(r"(?m)^( +)\S+/\S+ (memory|object_store_memory)$", r"\1<bytes>/<bytes> \2", text)
    text = re.sub(r"the same in \d+ more rounds?", "the same in <n> more rounds", text)
    triggers = r"(?:periodic|pod|RayCluster|RayResourceRequest|Ray state)"
    text = re.sub(rf"(?m)^(  <age> +){triggers}(?:, {triggers})*(?= {{2,}}|$)", r"\1<trigger>", text)
    text = re.sub(r"(?<=\S) {2,}", "  ", text)
    text = re.sub(r"(?m)^ {6,}", " " * 6, text)  # a table's lines under its last column
    sections = [_sorted_events(section) for section in text.split("\n\n")]
    return "\n".join(line.rstrip() for line in "\n\n".join(sections).splitlines()) + "\n"


def _sorted_events(section: str) -> str:
    """The Events of a few seconds come in any order (their times are to the second)."""
    if not section.startswith("Events"):
        return section
    title, header, *rows = section.splitlines()
    return "\n".join([title, header, *sorted(rows)])


def compare(name: str, got: str) -> None:
    """`got` (normalised) against the golden file `name`."""
    path = GOLDEN / name
    if os.environ.get("RAYSCALE_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got)
    assert got == path.read_text(), f"{name}: the output differs from {path} (see the module docstring)"


def keep(name: str, raw: str) -> None:
    RAW.mkdir(parents=True, exist_ok=True)
    (RAW / name).write_text(raw)


async def golden_point(rayscale: Cli, namespace: str, point: str) -> None:
    """The text and the JSON of the cluster now, against their golden files; the text also fits
    100 columns when nothing says otherwise."""
    text = await rayscale.status("--decisions", "3")
    keep(f"{point}.txt", text)
    compare(f"{point}.txt", normal_text(text, namespace))
    narrow = await rayscale.status("--decisions", "3", columns=None)
    keep(f"{point}-100.txt", narrow)
    long = [line for line in narrow.splitlines() if len(line) > 100]
    assert not long, long
    raw = await rayscale.status("-o", "json")
    keep(f"{point}.json", raw)
    normal = normal_json(json.loads(raw), namespace)
    compare(f"{point}.json", json.dumps(normal, indent=1, sort_keys=True) + "\n")


# ---------------------------------------------------------------------------- waiting on the view


def _group(doc: dict[str, Any]) -> dict[str, Any]:
    view = doc["view"] or {}
    found: dict[str, Any]
    [found] = [g for g in view.get("groups") or [] if g["name"] == "small-group"] or [{}]
    return found


def _steady(doc: dict[str, Any]) -> bool:
    """The newest decision has repeated (no round is deciding anything new), and the RayCluster's
    ``status.autoscaler`` (written after the rounds, at most every 5 s) counts the replicas as the
    view does."""
    decisions = (doc["view"] or {}).get("decisions") or []
    if not decisions or decisions[0]["repeats"] < 1:
        return False
    viewed = {g["name"]: g["states"] for g in doc["view"].get("groups") or [] if g.get("states")}
    written = ((doc["kubernetes"].get("rayCluster") or {}).get("autoscaler") or {}).get("replicas") or {}
    return bool(written.get("counts", {}) == viewed)


async def view_where(rayscale: Cli, what: str, check: Any) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        doc = await rayscale.doc()
        return doc if doc["view"] is not None and check(doc) and _steady(doc) else None

    found: dict[str, Any] = await eventually(ready, timeout=120, interval=0.5, message=what)
    return found


# ---------------------------------------------------------------------------- the test


@pytest.mark.e2e_smoke
async def test_status_cli(
    scenario: Scenario, rayscale: Cli, namespace: str, cluster: testcluster.ClusterHandle
) -> None:
    """A group scaling up for a placement group, then unable to take one more actor, as `rayscale
    status` shows it at each point. (A short name: the namespace is named after it, and shows.)"""
    await scenario.create([group("small-group", max_replicas=2)], idle_timeout=3600)

    # 1. Idle: the head alone in Ray, no demand, nothing decided but "no change".
    doc = await view_where(
        rayscale,
        "the view of an idle cluster",
        lambda d: d["view"]["ray"] is not None and _group(d).get("desired") == 0,
    )
    assert [n["head"] for n in doc["view"]["ray"]["nodes"]] == [True]
    assert doc["operator"] == {"reached": True, "via": rayscale.endpoint, "error": None}
    await golden_point(rayscale, namespace, "idle")

    # 2. A placement group of 2 x {CPU: 1}, SPREAD: 2 workers launched at once, then placed.
    await scenario.ray_call("pg", name="pg", bundles=[{"CPU": 1}, {"CPU": 1}], strategy="SPREAD")
    await scenario.pg_nodes("pg")
    doc = await view_where(
        rayscale,
        "2 ready replicas and no demand",
        lambda d: _group(d).get("states") == {"ready": 2} and not d["view"]["demand"]["pending"],
    )
    [launch] = [x for r in doc["view"]["decisions"] for x in r["launched"]]  # one launch, of both
    assert (launch["group"], launch["replicas"]) == ("small-group", 2)
    assert [w.split(" x ", 1)[1] for w in launch["why"]] == [
        "SPREAD [{CPU: 1}, {CPU: 1}] (placement group(s))"
    ]
    await golden_point(rayscale, namespace, "scaled")

    # 3. One more actor: the group is at maxReplicas, so it stays unmet (and says why).
    await scenario.ray_call("actor", name="extra", num_cpus=1)
    doc = await view_where(
        rayscale,
        "the actor unmet at maxReplicas",
        lambda d: [u["reason"] for u in d["view"]["demand"]["unmet"]] == ["MAX_REPLICAS"],
    )
    assert (
        doc["view"]["decisions"][0]["unmet"][0]["why"] == "the groups that could hold it are at maxReplicas"
    )
    await golden_point(rayscale, namespace, "unmet")

    # The fleet of the namespace, and the same through kubectl's plugin mechanism.
    fleet = await rayscale.run("status", "-n", namespace, "--endpoint", rayscale.endpoint)
    keep("fleet.txt", fleet)
    compare("fleet.txt", normal_text(fleet, namespace))
    plugin = Path(sys.executable).parent / "kubectl-rayscale"
    assert plugin.exists(), f"no {plugin}: install rayscale again (make install)"
    through_kubectl = await rayscale.run(
        "rayscale", "status", "-n", namespace, "--endpoint", rayscale.endpoint, program=cluster.kubectl
    )
    assert normal_text(through_kubectl, namespace) == normal_text(fleet, namespace)

    # simulate --from-cluster: the newest decision again, then with room for the actor.
    same = json.loads(
        await rayscale.run("simulate", "--from-cluster", rayscale.target, "--endpoint", rayscale.endpoint)
    )
    assert same["groups"]["small-group"] == {"current": 2, "replicas": 2, "launch": 0, "terminate": 0}
    assert [u["reason"] for u in same["unmet"]] == ["MAX_REPLICAS"]
    more = json.loads(
        await rayscale.run(
            "simulate", "--from-cluster", rayscale.target, "--endpoint", rayscale.endpoint,
            "--set", "groups.small-group.maxReplicas=3", "--save", str(RAW / "unmet-scenario.yaml"),
        )
    )  # fmt: skip
    assert more["groups"]["small-group"] == {"current": 2, "replicas": 3, "launch": 1, "terminate": 0}
    assert more["unmet"] == []

    # Without the operator's API (no --endpoint, no Lease, no operator pod here): Kubernetes alone.
    alone = await rayscale.run("status", rayscale.target)
    keep("no-operator.txt", alone)
    assert alone.count("live view") == 1
    compare("no-operator.txt", normal_text(alone, namespace))
