"""The chart grants PodDisruptionBudgets only when ``podDisruptionBudgets.enabled`` is set
(templates/rbac-pdb.yaml): by default no Role or ClusterRole of the chart names them; enabled, the
operator's ServiceAccount is bound to a rule on ``policy/poddisruptionbudgets`` where it watches
RayClusters (a ClusterRole for every namespace, a Role in each watched namespace otherwise), and
nowhere when the chart makes no RBAC. Rendered with ``helm template`` (no API server needed)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

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
