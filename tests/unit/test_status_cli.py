"""`rayscale status` and `rayscale simulate --from-cluster` end to end against a fake API server
(tests/support/fake_kube_api.py) and the operator's real status server (rayscale.web) with a fake autoscaler:
how the operator is found (the Lease's holder, the chart's pods, a standby naming the leader,
--endpoint), what is said when it cannot be, exit codes, arguments, the kubectl plugin."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.fake_kube_api import FakeKube, running
from tests.support.fakes import FakeAutoscaler

from rayscale import cli
from rayscale.api.names import RAYCLUSTER
from rayscale.status.args import UsageError, parse_target
from rayscale.status.reach import cluster_path, fleet_path, holder_pod, proxy_path, scenario_path
from rayscale.web.api import Served
from rayscale.web.server import make_app

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "status"
LIVE = json.loads((DATA / "cluster-live.json").read_text())
VIEW: dict[str, Any] = LIVE["view"]
SCENARIO: dict[str, Any] = json.loads((DATA / "scenario.json").read_text())
LEADER, STANDBY = "rayscale-7d9f8c-x2k4q", "rayscale-7d9f8c-p5m2n"
OPERATOR_NS = "rayscale-system"


DEMO = ("team-a", "demo")
FLEET_ENTRY = {
    "namespace": "team-a",
    "name": "demo",
    "lastDecisionTime": VIEW["observedAt"],
    "hold": None,
    "gcsReachable": True,
    "groups": [{"name": "cpu", "desired": 2, "current": 3}],
    "states": {"ready": 2},
    "unmet": {"BACKOFF": 2},
}


def operator_app(*, leading: bool = True, holder: str = "") -> Any:
    scaler = FakeAutoscaler({DEMO: VIEW}, [FLEET_ENTRY], {(DEMO, 0): SCENARIO, (DEMO, 1): SCENARIO})
    return make_app(Served(autoscaler=lambda: scaler, leading=lambda: leading, holder=lambda: holder))


def meta(name: str, namespace: str = "team-a", **more: Any) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "creationTimestamp": "2026-11-23T09:02:11Z", **more}


def pod(
    name: str, labels: dict[str, str], namespace: str = "team-a", phase: str = "Running"
) -> dict[str, Any]:
    ready = [{"type": "Ready", "status": "True" if phase == "Running" else "False"}]
    return {"metadata": meta(name, namespace, labels=labels), "status": {"phase": phase, "conditions": ready}}


def ray_pod(name: str, cluster: str, group: str | None) -> dict[str, Any]:
    kind = (
        {"ray.io/node-type": "head"}
        if group is None
        else {"ray.io/node-type": "worker", "ray.io/group": group}
    )
    return pod(name, {"ray.io/cluster": cluster, **kind})


def raycluster(name: str, *, autoscaling: bool = True, namespace: str = "team-a") -> dict[str, Any]:
    groups = [
        {
            "groupName": g["name"],
            "replicas": g["replicas"],
            "minReplicas": g["minReplicas"],
            "maxReplicas": g["maxReplicas"],
            "numOfHosts": g["numOfHosts"],
        }
        for g in LIVE["kubernetes"]["rayCluster"]["groups"]
    ]
    status = (
        {"state": "ready", "autoscaler": LIVE["kubernetes"]["rayCluster"]["autoscaler"]}
        if autoscaling
        else {}
    )
    return {
        **RAYCLUSTER.type_meta(),
        "metadata": meta(name, namespace),
        "spec": {"enableInTreeAutoscaling": autoscaling, "workerGroupSpecs": groups},
        "status": status,
    }


def lease(holder: str) -> dict[str, Any]:
    return {
        "metadata": meta("rayscale", OPERATOR_NS),
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }


def operator_pod(name: str) -> dict[str, Any]:
    return pod(name, {"app.kubernetes.io/name": "rayscale"}, OPERATOR_NS)


def cluster_objects(kube: FakeKube) -> FakeKube:
    kube.rayclusters = [raycluster("demo"), raycluster("plain", autoscaling=False)]
    kube.pods += [
        ray_pod("demo-head-8xk2z", "demo", None),
        ray_pod("demo-cpu-worker-x7k2p", "demo", "cpu"),
        ray_pod("plain-head-2kq9d", "plain", None),
    ]
    kube.requests = [
        {
            "metadata": meta("reserve"),
            "spec": {"clusterName": "demo", "bundles": [{"resources": {"CPU": 4}, "count": 2}]},
            "status": {"phase": "Pending", "message": "waiting"},
        },
        {
            "metadata": meta("elsewhere"),
            "spec": {"clusterName": "plain", "bundles": [{"resources": {"CPU": 1}}]},
        },
    ]
    kube.events = [
        {
            "metadata": meta("demo.1"),
            "involvedObject": {"kind": "RayCluster", "name": "demo"},
            "type": "Normal",
            "reason": "ScaledUp",
            "message": "group cpu: 0 -> 2 replicas",
            "count": 2,
            "lastTimestamp": "2026-11-23T10:09:02Z",
        },
        {
            "metadata": meta("plain.1"),
            "involvedObject": {"kind": "RayCluster", "name": "plain"},
            "type": "Normal",
            "reason": "CreatedWorkerPod",
            "message": "Created worker Pod team-a/plain-workers-worker-7xw2m",
        },
    ]
    return kube


@pytest.fixture
def fake() -> FakeKube:
    """The fake API server's objects: the chart's two operator pods (the leader and a standby), the
    Lease, the clusters. A test may change them before the server starts (its first CLI run)."""
    kube = cluster_objects(FakeKube())
    kube.leases[(OPERATOR_NS, "rayscale")] = lease(f"{LEADER}_0b6e4c2a-9d1f-4f0e-8a55-3c2b1d7e6f90")
    kube.pods += [operator_pod(LEADER), operator_pod(STANDBY)]
    kube.operators = {LEADER: operator_app(), STANDBY: operator_app(leading=False, holder=f"{LEADER}_0b6e")}
    return kube


class Cli:
    """Runs the CLI with a kubeconfig of the fake API server, which starts at the first run."""

    def __init__(self, kube: FakeKube, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.kube = kube
        self.config = config
        self.capsys = capsys
        self.stack = contextlib.ExitStack()

    def start(self) -> FakeKube:
        if not self.kube.url:
            self.stack.enter_context(running(self.kube))
            self.kube.kubeconfig(self.config)
        return self.kube

    def __call__(self, *argv: str, kubeconfig: bool = True) -> tuple[int, str, str]:
        """(exit code, stdout, stderr)"""
        self.start()
        code = cli.main([*argv, "--kubeconfig", str(self.config)] if kubeconfig else list(argv))
        out, err = self.capsys.readouterr()
        return code, out, err


@pytest.fixture
def rayscale(fake: FakeKube, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Cli]:
    run = Cli(fake, tmp_path / "kubeconfig", capsys)
    with run.stack:
        yield run


# ---------------------------------------------------------------------------- reaching the operator


def test_the_leader_is_asked_through_the_api_servers_proxy(rayscale: Cli, fake: FakeKube) -> None:
    code, out, err = rayscale("status", "team-a/demo", "-o", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["operator"] == {"reached": True, "via": f"pod {OPERATOR_NS}/{LEADER}", "error": None}
    assert doc["view"] == VIEW
    assert doc["kubernetes"]["requests"] == [
        {
            "name": "reserve",
            "bundles": [{"resources": {"CPU": 4}, "count": 2}],
            "phase": "Pending",
            "reason": None,
            "message": "waiting",
        }
    ]
    assert [e["reason"] for e in doc["kubernetes"]["events"]] == ["ScaledUp"]
    assert [p["name"] for p in doc["kubernetes"]["pods"]] == ["demo-head-8xk2z", "demo-cpu-worker-x7k2p"]
    assert doc["kubernetes"]["rayCluster"]["autoscaler"]["lastDecisionTime"] == "2026-11-23T10:14:22Z"
    proxied = [p for p in fake.asked if "/proxy" in p]
    assert proxied == [proxy_path(OPERATOR_NS, LEADER, 8082, cluster_path("team-a", "demo"))]
    assert f"/apis/coordination.k8s.io/v1/namespaces/{OPERATOR_NS}/leases/rayscale" in fake.asked


def test_the_text_shows_the_view_beside_kubernetes(rayscale: Cli) -> None:
    code, out, _ = rayscale("status", "demo", "-n", "team-a")
    assert code == 0
    assert out.startswith("RayCluster team-a/demo: ready, autoscaling\n")
    assert f"operator  pod {OPERATOR_NS}/{LEADER}, latest round" in out
    for heading in (
        "Ray (what `ray status` shows)",
        "Groups",
        "Replicas",
        "Unmet demand",
        "Decisions (newest first)",
        "RayResourceRequests",
        "Events (newest first)",
    ):
        assert f"\n{heading}\n" in out, heading
    assert "\x1b[" not in out  # not a terminal: no colour


def test_the_namespace_defaults_to_the_contexts(rayscale: Cli, tmp_path: Path) -> None:
    assert rayscale("status", "demo", "-o", "json")[0] == 0  # context "fake": namespace team-a
    code, _, err = rayscale("status", "demo", "--context", "other")  # no namespace: default
    assert code == 1
    assert err == "rayscale status: RayCluster default/demo not found\n"


def test_a_standby_names_the_leader_which_is_asked_instead(rayscale: Cli, fake: FakeKube) -> None:
    """The Lease as read named a replica that has lost it since: it answers 503 with the holder."""
    fake.leases[(OPERATOR_NS, "rayscale")] = lease(f"{STANDBY}_77aa")
    code, out, _ = rayscale("status", "team-a/demo", "-o", "json")
    assert code == 0
    assert json.loads(out)["operator"]["via"] == f"pod {OPERATOR_NS}/{LEADER}"
    assert [p.split("/")[6] for p in fake.asked if "/proxy" in p] == [f"{STANDBY}:8082", f"{LEADER}:8082"]


def test_without_a_lease_the_charts_running_pod_is_asked(rayscale: Cli, fake: FakeKube) -> None:
    fake.leases.clear()
    fake.pods[-1]["status"]["phase"] = "Pending"  # the standby: not running
    code, out, _ = rayscale("status", "team-a/demo", "-o", "json")
    assert code == 0
    assert json.loads(out)["operator"]["via"] == f"pod {OPERATOR_NS}/{LEADER}"
    assert any("labelSelector" not in p and p == f"/api/v1/namespaces/{OPERATOR_NS}/pods" for p in fake.asked)


def test_without_an_operator_kubernetes_is_shown_and_one_line_says_why(rayscale: Cli, fake: FakeKube) -> None:
    fake.leases.clear()
    fake.pods = [p for p in fake.pods if p["metadata"]["namespace"] != OPERATOR_NS]
    code, out, err = rayscale("status", "team-a/demo")
    assert (code, err) == (0, "")
    missing = [line for line in out.splitlines() if "live view" in line]
    assert missing == [
        "  live view  missing: no operator found: nobody holds the Lease rayscale-system/rayscale and no"
    ]
    assert "status.autoscaler of the latest round it was written for" in out
    assert re.search(r"demo-cpu-worker-x7k2p +cpu +Running +yes", out)  # the pods, from Kubernetes
    assert "NODE_DEAD: the Ray node of pod" in out  # status.autoscaler's failed replicas


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda k: k.forbidden.add("leases"),
            "cannot read the operator's Lease: get Lease rayscale-system/rayscale: 403",
        ),
        (
            lambda k: k.forbidden.add("proxy"),
            f"not allowed to proxy to pod {OPERATOR_NS}/{LEADER} (needs get on pods/proxy in {OPERATOR_NS})",
        ),
        (
            lambda k: k.operators.pop(LEADER),
            f"the API server could not reach pod {OPERATOR_NS}/{LEADER} on port 8082: error trying to reach",
        ),
        (lambda k: k.pods.pop(), None),  # the standby is gone: nothing changes
        (
            lambda k: k.leases.update({(OPERATOR_NS, "rayscale"): lease("rayscale-gone_1")}),
            "the operator pod rayscale-system/rayscale-gone does not exist",
        ),
    ],
)
def test_why_the_operator_was_not_reached(
    rayscale: Cli, fake: FakeKube, change: Any, reason: str | None
) -> None:
    change(fake)
    code, out, _ = rayscale("status", "team-a/demo", "-o", "json")
    assert code == 0
    operator = json.loads(out)["operator"]
    if reason is None:
        assert operator["error"] is None
    else:
        assert operator["reached"] is False
        assert reason in operator["error"], operator["error"]


def test_an_endpoint_is_asked_directly(rayscale: Cli, fake: FakeKube) -> None:
    url = rayscale.start().operator_url(LEADER)
    code, out, _ = rayscale("status", "team-a/demo", "-o", "json", "--endpoint", url + "/")
    assert code == 0
    assert json.loads(out)["operator"] == {"reached": True, "via": url, "error": None}
    assert not [p for p in fake.asked if "proxy" in p or "leases" in p]


def test_an_endpoint_that_is_a_standby_says_who_leads(rayscale: Cli, fake: FakeKube) -> None:
    standby = rayscale.start().operator_url(STANDBY)
    code, out, _ = rayscale("status", "team-a/demo", "-o", "json", "--endpoint", standby)
    assert code == 0
    error = json.loads(out)["operator"]["error"]
    assert error.endswith(f"is a standby, not the leader (the Lease is held by {LEADER}_0b6e)")


def test_an_endpoint_that_does_not_answer(rayscale: Cli) -> None:
    code, out, _ = rayscale("status", "team-a/demo", "-o", "json", "--endpoint", "http://127.0.0.1:9")
    assert code == 0
    assert json.loads(out)["operator"]["error"].startswith(
        "cannot reach the operator at http://127.0.0.1:9: "
    )


def test_a_cluster_the_operator_does_not_autoscale(rayscale: Cli) -> None:
    code, out, _ = rayscale("status", "team-a/plain")
    assert code == 0
    assert "live view  missing: RayCluster team-a/plain is not autoscaled here (or had no round yet)" in out
    assert "RayCluster team-a/plain: no state yet, autoscaling off" in out
    assert re.search(r"elsewhere +1 x \{CPU: 1\} +-", out)  # its own request only, without a phase yet
    assert "reserve" not in out
    assert "CreatedWorkerPod" in out
    assert "ScaledUp" not in out


# ---------------------------------------------------------------------------- the fleet, exit codes


def test_the_fleet_of_a_namespace_and_of_all(rayscale: Cli, fake: FakeKube) -> None:
    fake.rayclusters.append(raycluster("batch", namespace="ml"))
    code, out, _ = rayscale("status")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "STATE", "DECIDED", "GCS", "UNMET", "GROUPS", "current/desired"]
    assert [line.split()[0] for line in lines[1:3]] == ["demo", "plain"]
    assert lines[1].endswith("cpu 3/2")
    assert lines[2].split()[2] == "off"
    code, out, _ = rayscale("status", "-A", "-o", "yaml")
    doc = yaml.safe_load(out)
    assert [(c["namespace"], c["name"]) for c in doc["clusters"]] == [
        ("ml", "batch"),
        ("team-a", "demo"),
        ("team-a", "plain"),
    ]
    assert doc["operator"]["leader"] is True
    assert doc["clusters"][2]["kubernetes"]["workers"] == {}
    assert fleet_path() in [p.split("/proxy")[1] for p in fake.asked if "/proxy" in p]


def test_exit_codes(rayscale: Cli) -> None:
    assert rayscale("status", "team-a/nope")[0] == 1
    assert rayscale("status", "team-a/nope")[2] == "rayscale status: RayCluster team-a/nope not found\n"
    assert rayscale("status", "a/b/c")[0] == 2
    assert rayscale("status", "-A", "team-a/demo")[0] == 2
    assert rayscale("status", "team-a/demo", "-n", "team-b")[0] == 2
    with pytest.raises(SystemExit) as exited:
        rayscale("status", "--interval", "0")
    assert exited.value.code == 2
    with pytest.raises(SystemExit) as exited:
        rayscale("status", "-o", "wide")
    assert exited.value.code == 2


def test_an_api_server_that_does_not_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = FakeKube(url="http://127.0.0.1:9").kubeconfig(tmp_path / "kubeconfig")
    assert cli.main(["status", "team-a/demo", "--kubeconfig", str(config)]) == 1
    assert re.match(r"rayscale status: (get|list) .*: ClientConnectorError", capsys.readouterr().err)
    assert cli.main(["status", "--kubeconfig", str(tmp_path / "missing")]) == 1
    assert "cannot load the kubeconfig" in capsys.readouterr().err


def test_watch_redraws_until_ctrl_c(rayscale: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(asyncio, "sleep", sleep)
    code, out, _ = rayscale("status", "team-a/demo", "--watch", "--interval", "0.5")
    assert code == 0
    assert slept == [0.5, 0.5]
    assert out.count("RayCluster team-a/demo: ready, autoscaling\n") == 2
    assert "\x1b[2J" not in out  # not a terminal: the screen is not cleared


# ---------------------------------------------------------------------------- simulate --from-cluster


def test_simulate_from_cluster_replays_the_operators_scenario(
    rayscale: Cli, fake: FakeKube, tmp_path: Path
) -> None:
    code, out, err = rayscale("simulate", "--from-cluster", "team-a/demo")
    assert (code, err) == (0, "")
    decision = json.loads(out)
    assert decision["groups"]["cpu"]["replicas"] == 2
    assert [p.split("/proxy")[1] for p in fake.asked if "/proxy" in p] == [scenario_path("team-a", "demo", 0)]

    saved = tmp_path / "bug.yaml"
    code, out, _ = rayscale(
        "simulate",
        "--from-cluster",
        "demo",
        "--decision",
        "1",
        "--set",
        "groups.gpu.backoff=false",
        "--set",
        "groups.cpu.maxReplicas=1",
        "--save",
        str(saved),
    )
    assert code == 0
    changed = json.loads(out)
    assert changed["groups"]["gpu"]["launch"] == 2  # no backoff: the GPU tasks launch
    assert changed["groups"]["cpu"]["replicas"] == 1
    assert saved.read_text().startswith(
        "# rayscale simulate scenario: decision 1 of RayCluster team-a/demo "
        f"(from pod {OPERATOR_NS}/{LEADER}) "
        "with --set groups.gpu.backoff=false --set groups.cpu.maxReplicas=1\n"
    )
    code, out, _ = rayscale("simulate", str(saved), kubeconfig=False)  # the saved scenario replays the same
    assert code == 0
    assert {k: v for k, v in json.loads(out).items() if k != "elapsedSeconds"} == {
        k: v for k, v in changed.items() if k != "elapsedSeconds"
    }


def test_simulate_from_an_endpoint_needs_no_kubeconfig(rayscale: Cli, fake: FakeKube) -> None:
    url = rayscale.start().operator_url(LEADER)
    argv = ["simulate", "--from-cluster", "team-a/demo", "--endpoint", url, "--indent", "0"]
    code, out, _ = rayscale(*argv, kubeconfig=False)
    assert code == 0
    assert json.loads(out)["groups"]["cpu"]["replicas"] == 2
    assert not fake.asked


def test_simulate_from_cluster_failures(rayscale: Cli, fake: FakeKube) -> None:
    code, _, err = rayscale("simulate", "--from-cluster", "team-a/demo", "--decision", "4")
    assert code == 1
    assert "no scenario for decision 4" in err
    code, _, err = rayscale("simulate", "--from-cluster", "team-a/demo", "--set", "groups.tpu2.maxReplicas=3")
    assert code == 2
    assert "the scenario has no group 'tpu2' (groups: cpu, gpu, tpu)" in err
    code, _, err = rayscale("simulate", "--from-cluster", "team-a/demo", "--set", "groups.cpu.maxReplicas=-1")
    assert code == 2
    assert "bad scenario: groups[0].maxReplicas" in err
    code, _, err = rayscale("simulate", "--from-cluster", "team-a/demo", "--set", "maxReplicas=3")
    assert (code, "expected groups.NAME.FIELD=VALUE or options.FIELD=VALUE" in err) == (2, True)
    code, _, err = rayscale("simulate", "--from-cluster", "team-a/demo", "--endpoint", "http://127.0.0.1:9")
    assert code == 1
    assert err.startswith("rayscale simulate: cannot reach the operator at http://127.0.0.1:9")
    assert rayscale("simulate", "x.yaml", "--from-cluster", "demo")[0] == 2
    assert rayscale("simulate", "--decision", "1")[0] == 2


def test_set_applies_to_a_scenario_file_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCENARIO))
    assert (
        cli.main(
            [
                "simulate",
                str(path),
                "--set",
                "options.upscalingMode=Conservative",
                "--set",
                "groups.gpu.resources.GPU=2",
                "--save",
                str(tmp_path / "out.json"),
            ]
        )
        == 0
    )
    saved = json.loads((tmp_path / "out.json").read_text())
    assert saved["options"]["upscalingMode"] == "Conservative"
    assert saved["groups"][1]["resources"] == {"CPU": 8, "GPU": 2, "memory": 34359738368}


# ---------------------------------------------------------------------------- pure parts, the plugin


@pytest.mark.parametrize(
    ("text", "namespace", "every", "expected"),
    [
        ("demo", None, False, (None, "demo")),
        ("demo", "team-a", False, ("team-a", "demo")),
        ("team-a/demo", None, False, ("team-a", "demo")),
        ("team-a/demo", "team-a", False, ("team-a", "demo")),
        ("team-a/demo", "team-b", False, UsageError),
        ("/demo", None, False, UsageError),
        ("team-a/", None, False, UsageError),
        ("a/b/c", None, False, UsageError),
        ("team-a/demo", None, True, UsageError),
    ],
)
def test_parse_target(text: str, namespace: str | None, every: bool, expected: Any) -> None:
    if expected is UsageError:
        with pytest.raises(UsageError):
            parse_target(text, namespace, every)
    else:
        assert parse_target(text, namespace, every) == expected


def test_paths() -> None:
    assert holder_pod("rayscale-7d9f8c-x2k4q_0b6e4c2a-9d1f-4f0e-8a55-3c2b1d7e6f90") == "rayscale-7d9f8c-x2k4q"
    assert holder_pod("my-laptop") == "my-laptop"
    assert proxy_path("rayscale-system", "rayscale-7d9f8c-x2k4q", 8082, cluster_path("team-a", "demo")) == (
        "/api/v1/namespaces/rayscale-system/pods/rayscale-7d9f8c-x2k4q:8082/proxy/api/v1/clusters/team-a/demo"
    )
    assert scenario_path("team-a", "demo", 3) == "/api/v1/clusters/team-a/demo/decisions/3/scenario"
    assert fleet_path() == "/api/v1/clusters"


def test_the_kubectl_plugin_is_the_rayscale_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-rayscale"] == "rayscale.cli:kubectl_main"
    assert scripts["rayscale"] == "rayscale.cli:main"
    monkeypatch.setattr("sys.argv", ["kubectl-rayscale", "status", "--help"])
    with pytest.raises(SystemExit) as exited:
        cli.kubectl_main()
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage: kubectl rayscale status [-h]")
    monkeypatch.setattr("sys.argv", ["kubectl-rayscale", "version"])
    assert cli.kubectl_main() == 0
    assert capsys.readouterr().out.startswith("rayscale ")


def test_every_flag_is_documented() -> None:
    """docs/status-cli.md has every flag of `rayscale status` and `rayscale simulate` (no drift)."""
    doc = (ROOT / "docs" / "status-cli.md").read_text()
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("status", "simulate"):
        flags = [f for a in sub.choices[name]._actions for f in a.option_strings if f.startswith("--")]
        missing = [f for f in flags if f not in ("--help", "--indent") and f"`{f}" not in doc]
        assert not missing, f"docs/status-cli.md lacks {name}'s {missing}"
