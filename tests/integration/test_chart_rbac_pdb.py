"""The chart grants PodDisruptionBudgets only when ``podDisruptionBudgets.enabled`` is set
(templates/rbac-pdb.yaml): by default no Role or ClusterRole of the chart names them; enabled, the
operator's ServiceAccount is bound to a rule on ``policy/poddisruptionbudgets`` where it watches
RayClusters (a ClusterRole for every namespace, a Role in each watched namespace otherwise), and
nowhere when the chart makes no RBAC. Rendered with ``helm template`` (no API server needed), and
installed once on the API server, asked with ``kubectl auth can-i``."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from hack.localk8s.testcluster import ClusterHandle

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "rayscale"
SA = "rs-rayscale"  # the chart's ServiceAccount for release rs
VERBS = ["get", "list", "create", "patch", "delete"]
ON = ("--set", "podDisruptionBudgets.enabled=true")


def render(helm: str, *sets: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [helm, "template", "rs", str(CHART), "--namespace", "rayscale-system", *sets],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def pdb_grants(docs: list[dict[str, Any]]) -> dict[tuple[str, str], list[str]]:
    """(kind, namespace) of each Role or ClusterRole with a rule on poddisruptionbudgets: its verbs."""
    out: dict[tuple[str, str], list[str]] = {}
    for doc in docs:
        if doc["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in doc.get("rules") or []:
            if "poddisruptionbudgets" in rule.get("resources", []) or "*" in rule.get("resources", []):
                out[(doc["kind"], doc["metadata"].get("namespace", ""))] = list(rule["verbs"])
    return out


def bound(docs: list[dict[str, Any]], kind: str, name: str, namespace: str = "") -> bool:
    """Whether a binding in `namespace` gives role `kind`/`name` to the operator's ServiceAccount."""
    binding = "RoleBinding" if kind == "Role" else "ClusterRoleBinding"
    return any(
        d["kind"] == binding
        and d["metadata"].get("namespace", "") == namespace
        and d["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}
        and {"kind": "ServiceAccount", "name": SA, "namespace": "rayscale-system"} in d["subjects"]
        for d in docs
    )


@pytest.mark.parametrize(
    "sets",
    [[], ["--set", "watchNamespace={team-a}"], ["--set", "singleNamespaceInstall=true"]],
    ids=["cluster-wide", "namespaces", "single-namespace"],
)
def test_no_budget_rule_unless_enabled(helm: str, sets: list[str]) -> None:
    docs = render(helm, *sets)
    assert any(d["kind"] in ("Role", "ClusterRole") for d in docs)  # the chart's RBAC is there
    assert pdb_grants(docs) == {}
    assert not [d for d in docs if d["metadata"]["name"].endswith("-pdb")]


def test_enabled_cluster_wide_a_cluster_role_bound_to_the_operator(helm: str) -> None:
    docs = render(helm, *ON)
    assert pdb_grants(docs) == {("ClusterRole", ""): VERBS}
    (role,) = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "rs-rayscale-pdb"]
    assert role["rules"] == [{"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": VERBS}]
    assert bound(docs, "ClusterRole", "rs-rayscale-pdb")


def test_enabled_with_namespaces_a_role_in_each(helm: str) -> None:
    docs = render(helm, *ON, "--set", "watchNamespace={team-a,team-b}")
    assert pdb_grants(docs) == {("Role", "team-a"): VERBS, ("Role", "team-b"): VERBS}
    assert bound(docs, "Role", "rs-rayscale-pdb", "team-a")
    assert bound(docs, "Role", "rs-rayscale-pdb", "team-b")

    single = render(helm, *ON, "--set", "singleNamespaceInstall=true")
    assert pdb_grants(single) == {("Role", "rayscale-system"): VERBS}
    assert bound(single, "Role", "rs-rayscale-pdb", "rayscale-system")


@pytest.mark.parametrize(
    "sets",
    [
        ["--set", "rbacEnable=false"],
        ["--set", "singleNamespaceInstall=true", "--set", "crNamespacedRbacEnable=false"],
    ],
    ids=["no-rbac", "roles-made-elsewhere"],
)
def test_enabled_but_the_chart_makes_no_roles_there(helm: str, sets: list[str]) -> None:
    docs = render(helm, *ON, *sets)
    assert pdb_grants(docs) == {}


def test_the_value_is_checked_by_the_schema(helm: str) -> None:
    out = subprocess.run(
        [helm, "template", "rs", str(CHART), "--set", "podDisruptionBudgets.enable=true"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert "additional properties 'enable' not allowed" in out.stderr


def test_installed_the_operator_may_manage_budgets_only_when_enabled(
    cluster: ClusterHandle, helm: str, namespace: str, other_namespace: str, raycluster_crd: None
) -> None:
    """On the API server: `helm install` watching one namespace, then `kubectl auth can-i` as the
    operator's ServiceAccount (impersonated): budgets there only with the value, never elsewhere."""
    name = f"rs-{uuid.uuid4().hex[:6]}"
    release_ns = f"{name}-system"
    account = f"system:serviceaccount:{release_ns}:{name}-rayscale"

    def helm_run(*args: str) -> None:
        out = subprocess.run(
            [helm, *args], env=cluster.env, capture_output=True, text=True, timeout=180, check=False
        )
        assert out.returncode == 0, out.stderr

    def may(verb: str, ns: str) -> bool:
        args = ["auth", "can-i", verb, "poddisruptionbudgets.policy", "-n", ns, "--as", account]
        return cluster.kubectl_run(*args, check=False).strip() == "yes"

    sets = ["--set", "replicas=0", "--set", f"watchNamespace={{{namespace}}}"]
    helm_run("install", name, str(CHART), "-n", release_ns, "--create-namespace", "--skip-crds", *sets)
    try:
        assert not may("create", namespace)
        helm_run("upgrade", name, str(CHART), "-n", release_ns, "--skip-crds", *sets, *ON)
        assert all(may(verb, namespace) for verb in VERBS)
        assert not may("update", namespace)  # patch is what rayscale sends
        assert not may("create", other_namespace)
    finally:
        subprocess.run(
            [helm, "uninstall", name, "-n", release_ns],
            env=cluster.env,
            capture_output=True,
            timeout=180,
            check=False,
        )
        cluster.kubectl_run("delete", "namespace", release_ns, "--wait=false", check=False)
