"""Which cluster tests, the demo and the benchmarks use (hack/localk8s/target.py, testcluster.acquire):
only the local control plane unless RAYSCALE_TARGET_KUBECONFIG names another, which must answer and
hold no other owner's Ray objects. kubectl is faked: no cluster, no binaries."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hack.localk8s import launcher, target, testcluster
from hack.localk8s.target import TARGET_CONTEXT, TARGET_FORCE, TARGET_KUBECONFIG, TargetError
from kubernetes_asyncio.config import ConfigException, kube_config, load_kube_config
from tests.support import fixtures

BY = "unit test"


@dataclass
class FakeCluster:
    answers: bool = True
    crds: dict[str, str] = field(default_factory=dict)  # name -> group
    rayclusters: list[str] = field(default_factory=list)  # namespace/name
    marker: dict[str, Any] | None = None
    writes: int = 0


def kubeconfig(path: Path, current: str | None, *servers: str) -> Path:
    """A kubeconfig with one context per server, named after it."""
    path.write_text(json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": s, "cluster": {"server": f"https://{s}"}} for s in servers],
        "users": [{"name": s, "user": {"token": f"token-{s}"}} for s in servers],
        "contexts": [{"name": s, "context": {"cluster": s, "user": s}} for s in servers],
        **({"current-context": current} if current else {}),
    }))  # fmt: skip
    return path


def done(stdout: object = "", code: int = 0, stderr: str = "") -> subprocess.CompletedProcess[str]:
    text = stdout if isinstance(stdout, str) else json.dumps(stdout)
    return subprocess.CompletedProcess([], code, text, stderr)


class FakeKubectl:
    """kubectl over FakeClusters, each reached through the server of the kubeconfig's current context."""

    def __init__(self, **clusters: FakeCluster) -> None:
        self.clusters = clusters
        self.calls: list[tuple[Path, tuple[str, ...]]] = []

    def __call__(
        self, kubeconfig: Path, *args: str, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        self.calls.append((kubeconfig, args))
        config = json.loads(kubeconfig.read_text())
        argv = [a for a in args if not a.startswith("--request-timeout")]
        contexts = {c["name"]: c for c in config["contexts"]}
        if argv[:2] == ["config", "get-contexts"]:
            return done("\n".join(contexts))
        if argv[:2] == ["config", "view"]:
            chosen = next((a.split("=", 1)[1] for a in argv if a.startswith("--context=")), None)
            chosen = chosen or config.get("current-context")
            if chosen not in contexts:
                return done(code=1, stderr=f'error: context "{chosen}" does not exist')
            keep = contexts[chosen]["context"]
            return done({
                **config,
                "clusters": [c for c in config["clusters"] if c["name"] == keep["cluster"]],
                "users": [u for u in config["users"] if u["name"] == keep["user"]],
                "contexts": [contexts[chosen]],
            })  # fmt: skip
        cluster = self.clusters[contexts[config["current-context"]]["context"]["cluster"]]
        return self.api(cluster, argv, stdin)

    def api(
        self, cluster: FakeCluster, argv: list[str], stdin: str | None
    ) -> subprocess.CompletedProcess[str]:
        if not cluster.answers:
            return done(code=1, stderr="The connection to the server was refused")
        if argv == ["get", "--raw", "/readyz"]:
            return done("ok")
        if argv[:3] == ["get", "configmap", target.MARKER_NAME]:
            if cluster.marker is None:
                return done(code=1, stderr='Error from server (NotFound): configmaps "x" not found')
            return done(cluster.marker)
        if argv[:2] == ["get", "customresourcedefinitions"]:
            crds = [{"metadata": {"name": n}, "spec": {"group": g}} for n, g in cluster.crds.items()]
            return done({"items": crds})
        if argv[:2] == ["get", target.RAYCLUSTER_CRD]:
            names = [rc.split("/") for rc in cluster.rayclusters]
            return done({"items": [{"metadata": {"namespace": ns, "name": n}} for ns, n in names]})
        if argv[:3] == ["create", "-f", "-"]:
            assert stdin is not None
            cluster.writes += 1
            if cluster.marker is not None:
                return done(code=1, stderr="Error from server (AlreadyExists): already exists")
            cluster.marker = json.loads(stdin)
            return done("configmap/rayscale-test-target created")
        raise AssertionError(f"unexpected kubectl {argv}")

    def servers(self) -> set[str]:
        """The clusters the calls other than `kubectl config` went to."""
        reached = set()
        for path, args in self.calls:
            if args[0] != "config":
                config = json.loads(path.read_text())
                reached.add(config["contexts"][0]["context"]["cluster"])
        return reached


def env(source: Path | None, **extra: str) -> dict[str, str]:
    named = {TARGET_KUBECONFIG: str(source)} if source else {}
    return {"KUBECONFIG": "/home/someone/.kube/config", **named, **extra}


@pytest.fixture(autouse=True)
def scratch_in_tmp_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The pinned copies go under the test's own directory, even when a test fails before discard."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@pytest.fixture
def kind(tmp_path: Path) -> Path:
    return kubeconfig(tmp_path / "kind.kubeconfig", "kind", "kind")


def test_no_named_cluster_means_the_local_control_plane_and_kubeconfig_is_never_read(tmp_path: Path) -> None:
    prod = kubeconfig(tmp_path / "config", "prod", "prod")
    kubectl = FakeKubectl(prod=FakeCluster(crds={"rayclusters.ray.io": "ray.io"}))
    assert target.resolve({"KUBECONFIG": str(prod)}, kubectl, by=BY) is None
    assert kubectl.calls == []


@pytest.mark.parametrize("cluster_up", [False, True], ids=["private", "cluster-up"])
def test_acquire_ignores_kubeconfig(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cluster_up: bool
) -> None:
    prod = kubeconfig(tmp_path / "config", "prod", "prod")
    local = kubeconfig(tmp_path / "local.kubeconfig", "local", "local")
    kubectl = FakeKubectl(prod=FakeCluster(), local=FakeCluster())
    private = testcluster.ClusterHandle(tmp_path / "private", "kubectl", None, "fixture")
    monkeypatch.setenv("KUBECONFIG", str(prod))
    for variable in (TARGET_KUBECONFIG, TARGET_CONTEXT, TARGET_FORCE):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(launcher, "build", lambda: str(tmp_path))
    monkeypatch.setattr(target, "kubectl_at", lambda binary: kubectl)
    monkeypatch.setattr(launcher, "running", lambda d: {"kubeconfig": str(local)} if cluster_up else None)
    monkeypatch.setattr(testcluster, "start_private", lambda bindir, timeout: private)

    handle = testcluster.acquire()

    assert handle.local
    assert handle.kubeconfig == (local if cluster_up else private.kubeconfig)
    assert kubectl.servers() == ({"local"} if cluster_up else set())


def test_a_named_cluster_that_does_not_answer_fails_without_falling_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: Path
) -> None:
    kubectl = FakeKubectl(kind=FakeCluster(answers=False))
    with pytest.raises(TargetError, match="does not answer") as raised:
        target.resolve(env(kind), kubectl, by=BY)
    assert f"{TARGET_KUBECONFIG}={kind}" in str(raised.value)
    assert "Nothing falls back" in str(raised.value)

    monkeypatch.setenv(TARGET_KUBECONFIG, str(kind))
    monkeypatch.setattr(launcher, "build", lambda: str(tmp_path))
    monkeypatch.setattr(target, "kubectl_at", lambda binary: kubectl)
    monkeypatch.setattr(launcher, "running", lambda d: None)
    monkeypatch.setattr(testcluster, "start_private", lambda *a: pytest.fail("fell back to a local one"))
    with pytest.raises(TargetError, match="does not answer"):
        testcluster.acquire()


def test_a_named_file_that_does_not_exist_fails(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="no such file"):
        target.resolve(env(tmp_path / "absent"), FakeKubectl(), by=BY)


@pytest.mark.parametrize("crd", ["rayjobs.ray.io", "rayresourcerequests.rayscale.io"])
def test_another_owners_ray_crd_is_refused_without_writing(kind: Path, crd: str) -> None:
    cluster = FakeCluster(crds={crd: crd.split(".", 1)[1], "widgets.example.com": "example.com"})
    with pytest.raises(TargetError) as raised:
        target.resolve(env(kind), FakeKubectl(kind=cluster), by=BY)
    message = str(raised.value)
    assert f"CustomResourceDefinition {crd}" in message
    assert "widgets" not in message
    assert f"{TARGET_FORCE}=1" in message
    assert cluster.writes == 0
    assert cluster.marker is None


def test_rayclusters_present_are_refused_and_listed(kind: Path) -> None:
    cluster = FakeCluster(crds={"rayclusters.ray.io": "ray.io"}, rayclusters=["prod/big", "team-a/small"])
    with pytest.raises(TargetError) as raised:
        target.resolve(env(kind), FakeKubectl(kind=cluster), by=BY)
    assert "RayCluster prod/big" in str(raised.value)
    assert "RayCluster team-a/small" in str(raised.value)
    assert cluster.writes == 0


def test_a_clean_cluster_is_claimed(kind: Path) -> None:
    cluster = FakeCluster(crds={"widgets.example.com": "example.com"})
    named = target.resolve(env(kind), FakeKubectl(kind=cluster), by=BY)
    assert named is not None
    assert cluster.marker is not None
    assert cluster.marker["metadata"]["namespace"] == target.MARKER_NAMESPACE
    assert cluster.marker["data"]["forced"] == "false"
    assert cluster.marker["data"]["claimed-by"].startswith(BY)
    named.discard()


def test_force_accepts_and_claims_then_the_claim_is_accepted_without_force(kind: Path) -> None:
    cluster = FakeCluster(crds={"rayclusters.ray.io": "ray.io"}, rayclusters=["prod/big"])
    kubectl = FakeKubectl(kind=cluster)
    named = target.resolve(env(kind, **{TARGET_FORCE: "1"}), kubectl, by=BY)
    assert named is not None
    assert cluster.marker is not None
    assert cluster.marker["data"]["forced"] == "true"
    assert "RayCluster prod/big" in cluster.marker["data"]["found"]
    named.discard()

    again = target.resolve(env(kind, **{TARGET_FORCE: "0"}), kubectl, by=BY)
    assert again is not None
    assert cluster.writes == 1  # accepted because of the claim: not claimed twice
    again.discard()


def test_a_configmap_of_that_name_without_the_label_is_no_claim(kind: Path) -> None:
    cluster = FakeCluster(crds={"rayjobs.ray.io": "ray.io"}, marker={"metadata": {"name": "x"}})
    with pytest.raises(TargetError, match=r"rayjobs\.ray\.io"):
        target.resolve(env(kind), FakeKubectl(kind=cluster), by=BY)


def test_the_context_named_is_the_only_one_used_and_pinned(tmp_path: Path) -> None:
    both = kubeconfig(tmp_path / "config", "prod", "prod", "kind")
    prod = FakeCluster(crds={"rayclusters.ray.io": "ray.io"}, rayclusters=["prod/big"])
    kind = FakeCluster()
    kubectl = FakeKubectl(prod=prod, kind=kind)

    named = target.resolve(env(both, **{TARGET_CONTEXT: "kind"}), kubectl, by=BY)

    assert named is not None
    assert named.context == "kind"
    pinned = json.loads(named.kubeconfig.read_text())
    assert pinned["current-context"] == "kind"
    assert [c["name"] for c in pinned["contexts"]] == ["kind"]
    assert [c["name"] for c in pinned["clusters"]] == ["kind"]
    assert named.kubeconfig.stat().st_mode & 0o777 == 0o600
    assert kubectl.servers() == {"kind"}
    assert kind.marker is not None
    assert prod.writes == 0
    named.discard()
    assert not named.kubeconfig.exists()

    # Without a context, the file's current one (prod) is what is checked, and refused.
    with pytest.raises(TargetError, match="RayCluster prod/big"):
        target.resolve(env(both), kubectl, by=BY)


def test_an_unknown_context_fails_and_lists_the_contexts(tmp_path: Path) -> None:
    both = kubeconfig(tmp_path / "config", "prod", "prod", "kind")
    with pytest.raises(TargetError, match="its contexts: prod, kind"):
        target.resolve(env(both, **{TARGET_CONTEXT: "staging"}), FakeKubectl(), by=BY)


def test_a_file_without_a_current_context_needs_one_named(tmp_path: Path) -> None:
    none = kubeconfig(tmp_path / "config", None, "kind")
    with pytest.raises(TargetError, match=TARGET_CONTEXT):
        target.resolve(env(none), FakeKubectl(kind=FakeCluster()), by=BY)


def test_a_context_without_a_file_fails(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match=f"{TARGET_KUBECONFIG} is not"):
        target.resolve(env(None, **{TARGET_CONTEXT: "kind"}), FakeKubectl(), by=BY)


def test_the_test_process_has_no_default_kubeconfig() -> None:
    """The plugin points KUBECONFIG and kubernetes_asyncio's default at a file that is not there."""
    assert os.environ["KUBECONFIG"] == fixtures.NO_KUBECONFIG
    assert kube_config.KUBE_CONFIG_DEFAULT_LOCATION == fixtures.NO_KUBECONFIG
    assert not Path(fixtures.NO_KUBECONFIG).exists()


async def test_a_client_made_by_mistake_reaches_no_cluster() -> None:
    with pytest.raises(ConfigException):
        await load_kube_config()
