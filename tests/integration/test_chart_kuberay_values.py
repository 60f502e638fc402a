"""`helm install` of rayscale's chart with KubeRay's kuberay-operator chart values into a real API
server: KubeRay v1.6.2's values.yaml as shipped, and with the common overrides of
tests/data/kuberay-overrides.yaml (docs/migrating-from-kuberay.md). No operator replica runs (there
is no image registry here): what is checked is that the API server accepts every object and that
the Deployment it stores is rayscale's. tests/unit/test_chart_kuberay_values.py checks the mapping
value by value."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hack.localk8s.testcluster import ClusterHandle

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "rayscale"
DATA = ROOT / "tests" / "data"
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]


@pytest.fixture
def release(cluster: ClusterHandle, helm: str) -> Iterator[str]:
    """A release name: `<name>-system` is its namespace, `<name>-a` and `<name>-b` the watched
    ones; uninstalled and deleted afterwards."""
    name = f"kr-{uuid.uuid4().hex[:6]}"
    yield name
    cmd = [helm, "uninstall", name, "--namespace", f"{name}-system"]
    subprocess.run(cmd, env=cluster.env, capture_output=True, timeout=180, check=False)
    for namespace in (f"{name}-system", f"{name}-a", f"{name}-b"):
        cluster.kubectl_run(
            "delete", "namespace", namespace, "--ignore-not-found", "--wait=false", check=False
        )


def install(cluster: ClusterHandle, helm: str, name: str, *args: str) -> dict[str, Any]:
    """Install the chart as release `name` and return the Deployment the API server stored."""
    cmd = [helm, "install", name, str(CHART), "--namespace", f"{name}-system", "--create-namespace",
           "--skip-crds", "-f", str(DATA / "kuberay-v1.6.2-values.yaml"), *args,
           # Its own names (KubeRay's file names everything kuberay-operator), and no pod.
           "--set", f"fullnameOverride={name}", "--set", f"serviceAccount.name={name}",
           "--set", "replicas=0"]  # fmt: skip
    out = subprocess.run(cmd, env=cluster.env, capture_output=True, text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stderr
    stored = cluster.kubectl_run("get", "deployment", name, "-n", f"{name}-system", "-o", "json")
    deployment: dict[str, Any] = json.loads(stored)
    return deployment


def test_kuberays_values_file_as_shipped_installs_rayscale(
    cluster: ClusterHandle, helm: str, release: str
) -> None:
    deployment = install(cluster, helm, release)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"rayscale:{APP_VERSION}"  # not KubeRay's quay.io/kuberay/operator
    assert {"--all-namespaces", "--concurrency=1", "--kube-api-qps=100", "--leader-elect"} <= set(
        container["args"]
    )
    assert container["livenessProbe"]["periodSeconds"] == 5
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "kuberay-operator"
    assert (
        cluster.kubectl_run("get", "clusterrole", release, "-o", "name").strip()
        == f"clusterrole.rbac.authorization.k8s.io/{release}"
    )


def test_kuberays_common_overrides_install_rayscale(cluster: ClusterHandle, helm: str, release: str) -> None:
    watched = [f"{release}-a", f"{release}-b"]
    for namespace in watched:
        cluster.kubectl_run("create", "namespace", namespace)
    # The local control plane has no ServiceMonitor CRD: the unit test checks that object.
    deployment = install(
        cluster, helm, release, "-f", str(DATA / "kuberay-overrides.yaml"),
        "--set", f"watchNamespace={{{','.join(watched)}}}", "--set", "metrics.serviceMonitor.enabled=false",
    )  # fmt: skip
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/rayscale:0.1.0"
    assert {f"--namespace={ns}" for ns in watched} | {"--concurrency=8", "--kube-api-burst=80"} <= set(
        container["args"]
    )
    assert deployment["metadata"]["labels"]["team"] == "ml-platform"
    assert pod["metadata"]["annotations"] == {"example.com/owner": "ml-platform"}
    assert pod["spec"]["nodeSelector"] == {"pool": "system"}
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
    for namespace in watched:  # singleNamespaceInstall: a Role in each watched namespace
        assert cluster.kubectl_run("get", "role", release, "-n", namespace, "-o", "name").strip()
    service = json.loads(
        cluster.kubectl_run("get", "service", f"{release}-metrics", "-n", f"{release}-system", "-o", "json")
    )
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["ports"][0]["port"] == 9090
