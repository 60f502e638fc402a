"""The chart's batchScheduler (KubeRay's value) rendered by the real Helm: the operator's
``--batch-scheduler`` and the PodGroups' RBAC for each scheduler, and what is refused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "rayscale"
DEPLOYMENT = CHART / "templates" / "_deployment.tpl"


def _render(helm: str, values: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    cmd = [helm, "template", "rs", str(CHART), "--namespace", "rayscale-system", "-f", "-"]
    return subprocess.run(cmd, input=json.dumps(values), capture_output=True, text=True, timeout=120)


def _docs(helm: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    out = _render(helm, values)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _podgroup_rules(docs: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(kind, namespace) of each Role or ClusterRole granting podgroups -> its rules."""
    return {
        (d["kind"], d["metadata"].get("namespace", "")): d["rules"]
        for d in docs
        if d["kind"] in ("Role", "ClusterRole") and "podgroups" in json.dumps(d["rules"])
    }


def _args(docs: list[dict[str, Any]]) -> list[str]:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


@pytest.mark.parametrize(
    ("values", "group", "verbs"),
    [
        ({"name": "volcano"}, "scheduling.volcano.sh", ["get", "create", "update"]),
        ({"enabled": True}, "scheduling.volcano.sh", ["get", "create", "update"]),  # KubeRay's old form
        ({"name": "scheduler-plugins"}, "scheduling.x-k8s.io", ["get", "create"]),
    ],
)
def test_podgroup_rbac(helm: str, values: dict[str, Any], group: str, verbs: list[str]) -> None:
    rules = _podgroup_rules(_docs(helm, {"batchScheduler": values}))
    rule = {"apiGroups": [group], "resources": ["podgroups"], "verbs": verbs}
    assert rules == {("ClusterRole", ""): [rule]}
    one_namespace = {"batchScheduler": values, "singleNamespaceInstall": True, "watchNamespace": ["a", "b"]}
    assert sorted(_podgroup_rules(_docs(helm, one_namespace))) == [("Role", "a"), ("Role", "b")]
    assert _podgroup_rules(_docs(helm, {"batchScheduler": values, "rbacEnable": False})) == {}


@pytest.mark.parametrize("values", [{}, {"name": "yunikorn"}, {"name": "kai-scheduler"}, {"enabled": False}])
def test_no_podgroup_rbac_without_podgroups(helm: str, values: dict[str, Any]) -> None:
    assert _podgroup_rules(_docs(helm, {"batchScheduler": values})) == {}


@pytest.mark.skipif(
    "rayscale.batchScheduler" not in DEPLOYMENT.read_text(encoding="utf-8"),
    reason="_deployment.tpl does not pass rayscale.batchScheduler to --batch-scheduler yet",
)
@pytest.mark.parametrize(
    ("values", "arg"),
    [
        ({}, None),
        ({"name": ""}, None),
        ({"name": "yunikorn"}, "--batch-scheduler=yunikorn"),
        ({"name": "kai-scheduler"}, "--batch-scheduler=kai-scheduler"),
        ({"enabled": True}, "--batch-scheduler=volcano"),
    ],
)
def test_the_operator_runs_with_the_scheduler(helm: str, values: dict[str, Any], arg: str | None) -> None:
    args = [a for a in _args(_docs(helm, {"batchScheduler": values})) if a.startswith("--batch-scheduler")]
    assert args == ([arg] if arg else [])


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"name": "kueue"}, 'batchScheduler.name "kueue": rayscale does not integrate this scheduler'),
        ({"name": "volcano", "enabled": True}, "set name only"),
    ],
)
def test_refused(helm: str, values: dict[str, Any], message: str) -> None:
    out = _render(helm, {"batchScheduler": values})
    assert out.returncode != 0
    assert message in out.stderr
