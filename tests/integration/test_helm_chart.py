"""The Helm chart: lint, values schema, and rendered manifests accepted by a real API server.

Helm is built from the Go module proxy into ~/.cache/rayscale (e2e/tools/helm.sh).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from testcluster import ClusterHandle

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "rayscale"


def render(helm: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [helm, "template", "rs", str(CHART), "--namespace", "rayscale-system", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if check:
        assert out.returncode == 0, out.stderr
    return out


def test_lint_strict(helm: str) -> None:
    out = subprocess.run([helm, "lint", "--strict", str(CHART)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "replicass=2"], "additional properties 'replicass' not allowed"),
        (["--set", "replicas=2"], "/replicas"),
        (["--set", "mode=both"], "/mode"),
        (["--set", "image.tagg=x"], "additional properties 'tagg' not allowed"),
    ],
)
def test_schema_rejects_bad_values(helm: str, args: list[str], message: str) -> None:
    out = render(helm, *args, check=False)
    assert out.returncode != 0
    assert message in out.stderr


VALUE_SETS = {
    "default": [],
    "single-namespace": ["--set", "singleNamespaceInstall=true"],
    "watch-namespaces": ["--set", "watchNamespace={team-a,team-b}", "--set", "mode=controller"],
    "autoscaler-mode": ["--set", "mode=autoscaler", "--set", "serviceAccount.name=custom"],
}


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_rendered_manifests_pass_server_side_dry_run(helm: str, cluster: ClusterHandle, name: str) -> None:
    manifests = render(helm, *VALUE_SETS[name]).stdout
    docs = [d for d in yaml.safe_load_all(manifests) if d]
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} <= kinds
    namespaces = {"rayscale-system"} | {d["metadata"].get("namespace", "rayscale-system") for d in docs}
    for ns in sorted(namespaces):
        cluster.kubectl_run("create", "namespace", ns, check=False)
    out = subprocess.run(
        [cluster.kubectl, "apply", "--dry-run=server", "-f", "-"],
        input=manifests, env=cluster.env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    if name == "watch-namespaces":
        assert {"--namespace=team-a", "--namespace=team-b", "--mode=controller"} <= set(args)
        roles = {(d["kind"], d["metadata"]["namespace"]) for d in docs if d["kind"] == "Role"}
        assert roles == {("Role", "team-a"), ("Role", "team-b")}
    elif name == "single-namespace":
        assert "--namespace=rayscale-system" in args
        assert not any(d["kind"] == "ClusterRole" and "pods" in str(d["rules"]) for d in docs)
    else:
        assert "--all-namespaces" in args
