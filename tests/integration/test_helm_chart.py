"""The Helm chart: lint, values schema, and rendered manifests accepted by a real API server.

Helm is built from the Go module proxy into ~/.cache/rayscale (e2e/tools/helm.sh).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hack.localk8s.testcluster import ClusterHandle

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
        (["--set", "leaderElectionEnabled=false", "--set", "replicas=2"], "/replicas"),
        (["--set", "mode=both"], "/mode"),
        (["--set", "image.tagg=x"], "additional properties 'tagg' not allowed"),
        (["--set", "kubeClient.qpss=1"], "additional properties 'qpss' not allowed"),
        (["--set", "autoscaler.allowGcsAddressOverride=yes"], "/autoscaler/allowGcsAddressOverride"),
        (["--set", "metrics.serviceMonitor.interval=30"], "/metrics/serviceMonitor/interval"),
        (["--set", "statusPage.port=0"], "/statusPage/port"),
        (["--set", "statusPage.enable=true"], "additional properties 'enable' not allowed"),
        (["--set", "autoscaler.authTokenSecrets[0].name=x"], "missing property 'namespace'"),
        (["--set", "autoscaler.disruptionNotices={reclaim=90}"], "/autoscaler/disruptionNotices/0"),
        (["--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.service.enabled=false"],
         "metrics.serviceMonitor.enabled needs metrics.enabled and metrics.service.enabled"),
    ],
)  # fmt: skip
def test_schema_rejects_bad_values(helm: str, args: list[str], message: str) -> None:
    out = render(helm, *args, check=False)
    assert out.returncode != 0
    assert message in out.stderr


VALUE_SETS = {
    "default": [],
    "single-namespace": ["--set", "singleNamespaceInstall=true"],
    "watch-namespaces": ["--set", "watchNamespace={team-a,team-b}", "--set", "mode=controller"],
    "autoscaler-mode": ["--set", "mode=autoscaler", "--set", "serviceAccount.name=custom"],
    "leader-election-off": ["--set", "leaderElectionEnabled=false", "--set", "metrics.enabled=false"],
    # --set makes 2.5 a string; --set-json keeps it a number.
    "three-replicas-tuned": ["--set", "replicas=3", "--set", "kubeClient.qps=0",
                             "--set", "kubeClient.burst=7", "--set-json", "autoscaler.interval=2.5",
                             "--set", "autoscaler.maxNodeProvisionSeconds=60",
                             "--set", "autoscaler.allowGcsAddressOverride=true",
                             "--set-json", 'autoscaler.disruptionNotices=["taint:example.com/reclaim=90",'
                                           '"cluster-autoscaler-grace=300"]',
                             "--set", "metrics.port=9090", "--set", "metrics.service.type=NodePort"],
    "auth-token-secrets": ["--set", "autoscaler.authTokenSecrets[0].namespace=team-a",
                           "--set", "autoscaler.authTokenSecrets[0].name=ray-token",
                           "--set", "autoscaler.authTokenSecrets[1].namespace=team-b",
                           "--set", "autoscaler.authTokenSecrets[1].name=other-token"],
    # What a KubeRay chart's values become (docs/migrating-from-kuberay.md): the same names.
    "from-kuberay": ["--set", "reconcileConcurrency=4", "--set", "kubeClient.qps=50",
                     "--set", "kubeClient.burst=80",
                     "--set", "env[0].name=ENABLE_LOGIN_SHELL", "--set-string", "env[0].value=true",
                     "--set", "resources.limits.memory=1Gi", "--set", "nodeSelector.pool=system",
                     "--set", "tolerations[0].key=dedicated", "--set", "tolerations[0].operator=Exists",
                     "--set", "priorityClassName=system-cluster-critical"],
    # The local control plane has no ServiceMonitor CRD: that document is checked as rendered YAML
    # and left out of the dry run; everything else is dry-run as usual.
    "status-page": ["--set", "statusPage.enabled=true", "--set", "statusPage.port=9093",
                    "--set", "statusPort=0"],
    "service-monitor": ["--set", "metrics.serviceMonitor.enabled=true",
                        "--set", "metrics.serviceMonitor.labels.release=prom",
                        "--set", "metrics.serviceMonitor.scrapeTimeout=10s"],
}  # fmt: skip


def args_of(docs: list[dict[str, Any]]) -> list[str]:
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_rendered_manifests_pass_server_side_dry_run(helm: str, cluster: ClusterHandle, name: str) -> None:
    docs = [d for d in yaml.safe_load_all(render(helm, *VALUE_SETS[name]).stdout) if d]
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} <= kinds
    applied = [d for d in docs if d["kind"] != "ServiceMonitor"]
    namespaces = {"rayscale-system"} | {d["metadata"].get("namespace", "rayscale-system") for d in applied}
    for ns in sorted(namespaces):
        cluster.kubectl_run("create", "namespace", ns, check=False)
    out = subprocess.run(
        [cluster.kubectl, "apply", "--dry-run=server", "-f", "-"],
        input=yaml.safe_dump_all(applied), env=cluster.env, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    CHECKS[name](docs, args_of(docs))


def check_default(docs: list[dict[str, Any]], args: list[str]) -> None:
    assert "--all-namespaces" in args
    assert {"--metrics-port=8080", "--leader-elect", "--leader-election-namespace=$(POD_NAMESPACE)",
            "--leader-election-id=rs-rayscale", "--kube-api-qps=100", "--kube-api-burst=200",
            "--autoscaler-interval=5", "--max-node-provision-seconds=900"} <= set(args)  # fmt: skip
    assert "--allow-gcs-address-override" not in args  # the annotation is not followed by default
    assert "--status-port=8082" in args  # the status API; the status page is off by default
    assert not [a for a in args if a.startswith("--status-page")]
    deployment = of_kind(docs, "Deployment")[0]
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"  # a new pod waits as a standby
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in container["env"]}
    assert env == {"POD_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"}
    assert {(p["name"], p["containerPort"]) for p in container["ports"]} == {
        ("health", 8081),
        ("metrics", 8080),
        ("status", 8082),
    }
    (service,) = of_kind(docs, "Service")
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert not of_kind(docs, "ServiceMonitor")
    # Leases: only in the release namespace, get/update only on its own Lease, even cluster-wide.
    leases = [d for d in of_kind(docs, "Role") if "leases" in str(d["rules"])]
    assert [d["metadata"]["namespace"] for d in leases] == ["rayscale-system"]
    assert leases[0]["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["rs-rayscale"],
         "verbs": ["get", "update"]},
    ]  # fmt: skip
    assert "leases" not in str(of_kind(docs, "ClusterRole"))
    # Secrets: create only (a cluster's generated Ray auth token); reading one needs authTokenSecrets.
    secret_rules = [r for d in docs for r in d.get("rules", []) if "secrets" in r["resources"]]
    assert secret_rules == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]
    # RayVirtualClusters: as RayResourceRequests, and update on finalizers (blockOwnerDeletion).
    (role,) = [d for d in of_kind(docs, "ClusterRole") if "pods" in str(d["rules"])]
    vc_rules = [r for r in role["rules"] if "rayvirtualclusters" in str(r["resources"])]
    assert vc_rules == [
        {"apiGroups": ["rayscale.io"], "resources": ["rayvirtualclusters"],
         "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": ["rayscale.io"], "resources": ["rayvirtualclusters/status"], "verbs": ["get", "patch"]},
        {"apiGroups": ["rayscale.io"], "resources": ["rayvirtualclusters/finalizers"], "verbs": ["update"]},
    ]  # fmt: skip


def check_single_namespace(docs: list[dict[str, Any]], args: list[str]) -> None:
    assert "--namespace=rayscale-system" in args
    assert not any(d["kind"] == "ClusterRole" and "pods" in str(d["rules"]) for d in docs)


def check_watch_namespaces(docs: list[dict[str, Any]], args: list[str]) -> None:
    assert {"--namespace=team-a", "--namespace=team-b", "--mode=controller"} <= set(args)
    roles = {d["metadata"]["namespace"] for d in of_kind(docs, "Role") if "pods" in str(d["rules"])}
    assert roles == {"team-a", "team-b"}
    # --mode controller runs Ray's autoscaler sidecar: it creates its ServiceAccount, Role, RoleBinding.
    for role in of_kind(docs, "Role"):
        if "pods" in str(role["rules"]):
            assert {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["create"]} in role["rules"]


def check_autoscaler_mode(docs: list[dict[str, Any]], args: list[str]) -> None:
    assert {"--all-namespaces", "--mode=autoscaler"} <= set(args)


def check_leader_election_off(docs: list[dict[str, Any]], args: list[str]) -> None:
    assert not [a for a in args if a.startswith("--leader-elect")]
    assert "--metrics-port=0" in args
    assert "leases" not in str(docs)
    assert not of_kind(docs, "Service")
    assert of_kind(docs, "Deployment")[0]["spec"]["strategy"]["type"] == "Recreate"


def check_three_replicas_tuned(docs: list[dict[str, Any]], args: list[str]) -> None:
    assert of_kind(docs, "Deployment")[0]["spec"]["replicas"] == 3
    assert {"--kube-api-qps=0", "--kube-api-burst=7", "--autoscaler-interval=2.5", "--metrics-port=9090",
            "--max-node-provision-seconds=60", "--leader-elect",
            "--allow-gcs-address-override", "--disruption-notice=taint:example.com/reclaim=90",
            "--disruption-notice=cluster-autoscaler-grace=300"} <= set(args)  # fmt: skip
    (service,) = of_kind(docs, "Service")
    assert service["spec"]["type"] == "NodePort"


def check_auth_token_secrets(docs: list[dict[str, Any]], args: list[str]) -> None:
    secret_roles = {
        d["metadata"]["namespace"]: d["rules"] for d in of_kind(docs, "Role") if "secrets" in str(d["rules"])
    }
    rule = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
    assert secret_roles == {
        "team-a": [{**rule, "resourceNames": ["ray-token"]}],
        "team-b": [{**rule, "resourceNames": ["other-token"]}],
    }
    bindings = {d["metadata"]["namespace"] for d in of_kind(docs, "RoleBinding") if "auth-tokens" in str(d)}
    assert bindings == {"team-a", "team-b"}


def check_from_kuberay(docs: list[dict[str, Any]], args: list[str]) -> None:
    assert {"--concurrency=4", "--kube-api-qps=50", "--kube-api-burst=80"} <= set(args)
    pod = of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert {"name": "ENABLE_LOGIN_SHELL", "value": "true"} in container["env"]
    assert container["resources"]["limits"]["memory"] == "1Gi"
    assert pod["nodeSelector"] == {"pool": "system"}
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert pod["priorityClassName"] == "system-cluster-critical"


def check_service_monitor(docs: list[dict[str, Any]], args: list[str]) -> None:
    (monitor,) = of_kind(docs, "ServiceMonitor")
    (service,) = of_kind(docs, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == "rayscale-system"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    # It selects the metrics Service (and not, say, a Service of a RayCluster) by its labels.
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert selector["app.kubernetes.io/component"] == "metrics"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["rayscale-system"]}
    assert monitor["spec"]["endpoints"] == [
        {
            "port": "metrics",
            "path": "/metrics",
            "interval": "30s",
            "scrapeTimeout": "10s",
            "honorLabels": True,
        }
    ]


def check_status_page(docs: list[dict[str, Any]], args: list[str]) -> None:
    assert {"--status-page", "--status-page-port=9093", "--status-port=0"} <= set(args)
    container = of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    assert {(p["name"], p["containerPort"]) for p in container["ports"]} == {
        ("health", 8081),
        ("metrics", 8080),
        ("status-page", 9093),
    }


CHECKS = {
    "default": check_default,
    "single-namespace": check_single_namespace,
    "from-kuberay": check_from_kuberay,
    "watch-namespaces": check_watch_namespaces,
    "autoscaler-mode": check_autoscaler_mode,
    "leader-election-off": check_leader_election_off,
    "three-replicas-tuned": check_three_replicas_tuned,
    "auth-token-secrets": check_auth_token_secrets,
    "service-monitor": check_service_monitor,
    "status-page": check_status_page,
}
