"""KubeRay's kuberay-operator chart values installed with rayscale's chart, rendered by the real Helm
(`make helm`): KubeRay v1.6.2's values.yaml as shipped renders; each common override lands in the
field it sets under KubeRay; what rayscale cannot do is refused with what to do instead; a typo
still fails the schema (docs/migrating-from-kuberay.md). tests/integration/test_chart_kuberay_values.py
installs the shipped file into a real API server."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayscale import cli

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "rayscale"
DATA = ROOT / "tests" / "data"
KUBERAY = DATA / "kuberay-v1.6.2-values.yaml"
OVERRIDES = DATA / "kuberay-overrides.yaml"
GITOPS = DATA / "kuberay-overrides-gitops.yaml"
DEFAULTS: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]


def helm_template(
    helm: str, files: list[Path], values: dict[str, Any] | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = [helm, "template", "rs", str(CHART), "--namespace", "rayscale-system"]
    cmd += [arg for f in files for arg in ("-f", str(f))] + ["-f", "-"]
    return subprocess.run(cmd, input=json.dumps(values or {}), capture_output=True, text=True, timeout=120)


def rendered(
    helm: str, files: list[Path], values: dict[str, Any] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The manifests by kind."""
    out = helm_template(helm, files, values)
    assert out.returncode == 0, out.stderr
    kinds: dict[str, list[dict[str, Any]]] = {}
    for doc in yaml.safe_load_all(out.stdout):
        if doc:
            kinds.setdefault(doc["kind"], []).append(doc)
    return kinds


def refusal(helm: str, files: list[Path], values: dict[str, Any]) -> str:
    out = helm_template(helm, files, values)
    assert out.returncode != 0, f"rendered: {values}"
    return out.stderr


def pod_of(kinds: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    (deployment,) = kinds["Deployment"]
    template: dict[str, Any] = deployment["spec"]["template"]
    return template


def container_of(kinds: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    container: dict[str, Any] = pod_of(kinds)["spec"]["containers"][0]
    return container


def pods_role_namespaces(kinds: dict[str, list[dict[str, Any]]]) -> set[str]:
    return {d["metadata"]["namespace"] for d in kinds.get("Role", []) if "pods" in str(d["rules"])}


def test_kuberays_values_file_as_shipped_renders_rayscale(helm: str) -> None:
    kinds = rendered(helm, [KUBERAY])
    (deployment,) = kinds["Deployment"]
    assert deployment["metadata"]["name"] == "kuberay-operator"  # its fullnameOverride
    assert deployment["spec"]["replicas"] == 1
    pod = pod_of(kinds)
    container = container_of(kinds)
    # KubeRay's own image (quay.io/kuberay/operator:v1.6.2) becomes rayscale's default image.
    assert container["image"] == f"{DEFAULTS['image']['repository']}:{APP_VERSION}"
    args = container["args"]
    assert {"--all-namespaces", "--concurrency=1", "--kube-api-qps=100", "--kube-api-burst=200",
            "--leader-elect", "--leader-election-id=kuberay-operator",
            "--metrics-port=8080"} <= set(args)  # fmt: skip
    cli.build_parser().parse_args(["run", *[a.replace("$(POD_NAMESPACE)", "ns") for a in args]])
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "kuberay-operator"
    assert pod["spec"]["serviceAccountName"] == "kuberay-operator"
    assert [sa["metadata"]["name"] for sa in kinds["ServiceAccount"]] == ["kuberay-operator"]
    assert container["resources"]["limits"] == {"cpu": "100m", "memory": "512Mi"}
    # podSecurityContext: {} keeps rayscale's; KubeRay's container securityContext is merged in.
    assert pod["spec"]["securityContext"] == DEFAULTS["podSecurityContext"]
    assert container["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    probe = {"initialDelaySeconds": 10, "periodSeconds": 5, "failureThreshold": 5}
    assert probe.items() <= container["livenessProbe"].items()
    assert probe.items() <= container["readinessProbe"].items()
    (service,) = kinds["Service"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"][0]["port"] == 8080
    assert "ServiceMonitor" not in kinds
    assert "ConfigMap" not in kinds
    assert any("pods" in str(d["rules"]) for d in kinds["ClusterRole"])


def test_rayscales_defaults_render_as_before(helm: str) -> None:
    """The new values' defaults change nothing: probes as they were, no extra labels or objects."""
    kinds = rendered(helm, [])
    container = container_of(kinds)
    assert container["image"] == f"rayscale:{APP_VERSION}"
    assert container["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "health"},
        "initialDelaySeconds": 10, "periodSeconds": 20, "failureThreshold": 3,
    }  # fmt: skip
    assert container["readinessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "health"},
        "initialDelaySeconds": 0, "periodSeconds": 10, "failureThreshold": 3,
    }  # fmt: skip
    pod = pod_of(kinds)
    assert set(pod["metadata"]["labels"]) == {"app.kubernetes.io/name", "app.kubernetes.io/instance"}
    assert "annotations" not in pod["metadata"]
    assert any("pods" in str(d["rules"]) for d in kinds["ClusterRole"])


def test_common_overrides_map_to_rayscales_fields(helm: str) -> None:
    kinds = rendered(helm, [KUBERAY, OVERRIDES])
    (deployment,) = kinds["Deployment"]
    pod = pod_of(kinds)
    container = container_of(kinds)
    assert container["image"] == "registry.example.com/rayscale:0.1.0"
    assert container["imagePullPolicy"] == "Always"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert deployment["spec"]["replicas"] == 2
    assert container["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"},
                                      "requests": {"cpu": "500m", "memory": "1Gi"}}  # fmt: skip
    assert pod["spec"]["nodeSelector"] == {"pool": "system"}
    assert pod["spec"]["tolerations"][0]["key"] == "dedicated"
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
    # labels: on the Deployment and its pod; annotations and componentOverride: on the pod.
    assert deployment["metadata"]["labels"]["team"] == "ml-platform"
    assert pod["metadata"]["labels"]["team"] == "ml-platform"
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "ray-operator"
    assert pod["metadata"]["annotations"] == {"example.com/owner": "ml-platform"}
    # The selector is unchanged, so the pod's extra labels never orphan it.
    assert set(deployment["spec"]["selector"]["matchLabels"]) == {
        "app.kubernetes.io/name",
        "app.kubernetes.io/instance",
    }
    # singleNamespaceInstall with watchNamespace: those namespaces, with Roles only (as KubeRay).
    args = container["args"]
    assert {"--namespace=team-a", "--namespace=team-b", "--concurrency=8", "--kube-api-qps=50",
            "--kube-api-burst=80", "--leader-elect"} <= set(args)  # fmt: skip
    assert "--all-namespaces" not in args
    assert pods_role_namespaces(kinds) == {"team-a", "team-b"}
    assert not any("pods" in str(d["rules"]) for d in kinds["ClusterRole"])
    # serviceAccount.name: the ServiceAccount, the pod's, and every binding's subject.
    assert [sa["metadata"]["name"] for sa in kinds["ServiceAccount"]] == ["ray-operator"]
    assert pod["spec"]["serviceAccountName"] == "ray-operator"
    bindings = kinds["RoleBinding"] + kinds["ClusterRoleBinding"]
    assert {s["name"] for b in bindings for s in b["subjects"]} == {"ray-operator"}
    # The ServiceMonitor: KubeRay's selector labels, its namespace, interval and honorLabels.
    (monitor,) = kinds["ServiceMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["spec"]["endpoints"][0]["interval"] == "15s"
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is False
    # KubeRay's service: the metrics Service's type and port.
    (service,) = kinds["Service"]
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["ports"][0]["port"] == 9090
    assert pod["spec"]["securityContext"]["runAsUser"] == 1000
    assert pod["spec"]["securityContext"]["fsGroup"] == 2000
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ENABLE_PROBES_INJECTION"] == "false"
    assert env["CLUSTER_DOMAIN"] == "corp.local"
    assert {"initialDelaySeconds": 30, "periodSeconds": 10, "failureThreshold": 6}.items() <= container[
        "livenessProbe"
    ].items()
    assert {"initialDelaySeconds": 5, "periodSeconds": 10, "failureThreshold": 2}.items() <= container[
        "readinessProbe"
    ].items()


def test_leader_election_off_and_single_namespace_alone(helm: str) -> None:
    kinds = rendered(helm, [KUBERAY], {"leaderElectionEnabled": False, "singleNamespaceInstall": True})
    args = container_of(kinds)["args"]
    assert not [a for a in args if a.startswith("--leader-elect")]
    assert kinds["Deployment"][0]["spec"]["strategy"]["type"] == "Recreate"
    assert "--namespace=rayscale-system" in args
    assert pods_role_namespaces(kinds) == {"rayscale-system"}


def test_rbac_off_an_existing_service_account_and_additional_labels(helm: str) -> None:
    kinds = rendered(helm, [KUBERAY, GITOPS])
    rbac = {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
    assert not rbac & set(kinds), "rbacEnable: false must create no RBAC"
    assert "ServiceAccount" not in kinds
    assert pod_of(kinds)["spec"]["serviceAccountName"] == "ray-operator-managed"
    (monitor,) = kinds["ServiceMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"


def test_cr_namespaced_rbac_off_leaves_the_watched_namespaces_roles_out(helm: str) -> None:
    values = {"singleNamespaceInstall": True, "watchNamespace": ["team-a"], "crNamespacedRbacEnable": False}
    kinds = rendered(helm, [KUBERAY], values)
    assert pods_role_namespaces(kinds) == set()
    assert [d["metadata"]["name"] for d in kinds["Role"]] == ["kuberay-operator-leader-election"]
    # Without singleNamespaceInstall it changes nothing, as in KubeRay's chart.
    kinds = rendered(helm, [KUBERAY], {"watchNamespace": ["team-a"], "crNamespacedRbacEnable": False})
    assert pods_role_namespaces(kinds) == {"team-a"}


REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "batch-scheduler-both": (
        {"batchScheduler": {"enabled": True, "name": "yunikorn"}},
        'batchScheduler: enabled (KubeRay\'s deprecated form of name: volcano) and name "yunikorn" are '
        "both set, which KubeRay's operator refuses too; set name only",
    ),
    "batch-scheduler-unknown": (
        {"batchScheduler": {"name": "kueue"}},
        'batchScheduler.name "kueue": rayscale does not integrate this scheduler; use one of volcano, '
        'yunikorn, scheduler-plugins, kai-scheduler (KubeRay\'s names), or ""',
    ),
    "feature-gate-unknown": (
        {"featureGates": [{"name": "RayFoo", "enabled": True}]},
        "featureGates: rayscale has no feature gate RayFoo",
    ),
    "feature-gate-service": (
        {"featureGates": [{"name": "RayServiceIncrementalUpgrade", "enabled": True}]},
        "featureGates: RayServiceIncrementalUpgrade enabled: true",
    ),
    "feature-gate-conditions-off": (
        {"featureGates": [{"name": "RayClusterStatusConditions", "enabled": False}]},
        "featureGates: RayClusterStatusConditions enabled: false: rayscale always writes RayCluster "
        "status conditions; remove it or set enabled: true",
    ),
    "feature-gate-multihost-off": (
        {"featureGates": [{"name": "RayMultiHostIndexing", "enabled": False}]},
        "featureGates: RayMultiHostIndexing enabled: false",
    ),
    "default-container-envs": (
        {"configuration": {"enabled": True, "defaultContainerEnvs": [{"name": "A", "value": "1"}]}},
        "configuration.defaultContainerEnvs: rayscale does not add environment variables",
    ),
    "head-sidecars": (
        {"configuration": {"enabled": True, "headSidecarContainers": [{"name": "fluentbit"}]}},
        "configuration.headSidecarContainers: rayscale does not add sidecars to Ray head pods",
    ),
    "worker-sidecars": (
        {"configuration": {"enabled": True, "workerSidecarContainers": [{"name": "fluentbit"}]}},
        "configuration.workerSidecarContainers",
    ),
    "log-file": (
        {"logging": {"baseDir": "/var/log", "fileName": "operator.log"}},
        "logging.baseDir and logging.fileName: rayscale logs to stdout only",
    ),
    "requeue-env": (
        {"env": [{"name": "RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV", "value": "300"}]},
        "env RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV: rayscale's equivalent is resyncSeconds; remove the "
        "entry and set resyncSeconds: 300",
    ),
    "openshift-route-env": (
        {"env": [{"name": "USE_INGRESS_ON_OPENSHIFT", "value": "false"}]},
        "env USE_INGRESS_ON_OPENSHIFT: rayscale creates an Ingress for enableIngress also on OpenShift",
    ),
    "operator-command": ({"operatorCommand": "/my-manager"}, 'operatorCommand "/my-manager"'),
    "kubernetes-proxy": (
        {"useKubernetesProxy": True},
        "useKubernetesProxy: rayscale dials Ray heads directly",
    ),
    "single-namespace-pattern": (
        {"singleNamespaceInstall": True, "watchNamespace": ["team-*"]},
        'singleNamespaceInstall: the watchNamespace pattern "team-*" needs a ClusterRole',
    ),
    "labels-conflict": (
        {"labels": {"team": "a"}, "podLabels": {"team": "b"}},
        'podLabels and labels set team differently ("b" and "a")',
    ),
    "annotations-conflict": (
        {"annotations": {"x": "1"}, "podAnnotations": {"x": "2"}},
        "podAnnotations and annotations set x differently",
    ),
    "component-conflict": (
        {"componentOverride": "op", "podLabels": {"app.kubernetes.io/component": "other"}},
        "podLabels and componentOverride set app.kubernetes.io/component differently",
    ),
    "service-monitor-labels-conflict": (
        {
            "metrics": {
                "serviceMonitor": {"enabled": True, "labels": {"release": "a"}, "selector": {"release": "b"}}
            }
        },
        "metrics.serviceMonitor.labels and metrics.serviceMonitor.selector set release differently",
    ),
    "service-type-conflict": (
        {"service": {"type": "NodePort"}, "metrics": {"service": {"type": "LoadBalancer"}}},
        "service.type (KubeRay's name for metrics.service.type) is NodePort but metrics.service.type is "
        "LoadBalancer: set only one",
    ),
    "service-port-conflict": (
        {"service": {"port": 9090}, "metrics": {"service": {"port": 9091}}},
        "service.port (KubeRay's name for metrics.service.port) is 9090",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_rayscale_cannot_do_is_refused_saying_what_to_do(helm: str, case: str) -> None:
    values, message = REFUSED[case]
    assert message in refusal(helm, [KUBERAY], values)


@pytest.mark.parametrize(
    "values",
    [
        {"configuration": {"enabled": False, "headSidecarContainers": [{"name": "fluentbit"}]}},
        {"logging": {"baseDir": "/var/log"}},  # KubeRay writes a file only with both
        {"featureGates": [{"name": "RayJobDeletionPolicy", "enabled": True}]},
        {"featureGates": [{"name": "RayJobDeletionPolicy", "enabled": False}]},
        {"featureGates": [{"name": "AsyncJobInfoQuery", "enabled": True}]},
        {"featureGates": [{"name": "RayCronJob", "enabled": True}]},
        {"featureGates": [{"name": "RayCronJob", "enabled": False}]},
        {"service": {"type": "ClusterIP", "port": 8080}, "metrics": {"service": {"type": "NodePort"}}},
        {"labels": {"team": "a"}, "podLabels": {"team": "a"}},
        {
            "env": [
                {"name": "USE_INGRESS_ON_OPENSHIFT", "value": "true"},
                {"name": "ENABLE_ZERO_DOWNTIME", "value": "false"},
            ]
        },
        {"image": {"repository": "mirror.example.com/kuberay/operator", "tag": "v1.5.0"}},
    ],
)
def test_kuberay_values_that_change_nothing_are_accepted(helm: str, values: dict[str, Any]) -> None:
    kinds = rendered(helm, [KUBERAY], values)
    if "image" in values:  # a mirror of KubeRay's image is KubeRay's operator still
        assert container_of(kinds)["image"] == f"{DEFAULTS['image']['repository']}:{APP_VERSION}"
    if "service" in values:  # KubeRay's at rayscale's default: rayscale's own value stands
        assert kinds["Service"][0]["spec"]["type"] == "NodePort"


@pytest.mark.parametrize(
    ("values", "typo"),
    [
        ({"rbacEnabled": False}, "rbacEnabled"),
        ({"service": {"typ": "NodePort"}}, "typ"),
        ({"batchScheduler": {"nmae": "volcano"}}, "nmae"),
        ({"logging": {"stdoutEncoding": "json"}}, "stdoutEncoding"),
        ({"configuration": {"enable": True}}, "enable"),
        ({"metrics": {"serviceMonitor": {"selectors": {"a": "b"}}}}, "selectors"),
        ({"livenessProbe": {"periodSecond": 5}}, "periodSecond"),
        ({"featureGates": [{"name": "RayCronJob", "enable": True}]}, "enable"),
    ],
)
def test_a_typo_still_fails_the_schema(helm: str, values: dict[str, Any], typo: str) -> None:
    assert f"additional properties '{typo}' not allowed" in refusal(helm, [KUBERAY], values)


def key_paths(values: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of a values file's keys, down to the leaves (lists and empty maps are leaves)."""
    paths = []
    for key, value in values.items():
        if isinstance(value, dict) and value:
            paths += key_paths(value, f"{prefix}{key}.")
        else:
            paths.append(f"{prefix}{key}")
    return paths


def test_every_kuberay_value_is_in_the_migration_guides_table() -> None:
    doc = (ROOT / "docs" / "migrating-from-kuberay.md").read_text()
    rows = "\n".join(line for line in doc.splitlines() if line.startswith("| `"))
    named = set(re.findall(r"`([A-Za-z.]+)`", rows))
    kuberay = yaml.safe_load(KUBERAY.read_text())
    later = ["watchNamespace", "useKubernetesProxy", "metrics.serviceMonitor.additionalLabels"]
    paths = [*key_paths(kuberay), *later]  # commented out in the file, or KubeRay's later name

    def covered(path: str) -> bool:  # named itself, or a map above it (`resources`, `image.*`)
        parts = path.split(".")
        prefixes = [".".join(parts[:n]) for n in range(1, len(parts) + 1)]
        return any(p in named or f"`{p}.*`" in rows for p in prefixes)

    missing = [p for p in paths if not covered(p)]
    assert not missing, f"docs/migrating-from-kuberay.md's table lacks {missing}"
