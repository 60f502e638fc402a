"""The chart's `shards` (docs/scaling.md), rendered by the real Helm (`make helm`): one Deployment and
one Lease per shard, RBAC over every shard's namespaces, arguments `rayscale run` accepts, and
nothing changed for a release without shards. tests/integration/test_sharding.py has the API server
accept these manifests; tests/integration/test_helm_chart.py checks the chart's other values."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rayscale import cli
from rayscale.kube.scope import check_namespace_pattern, parse_selector

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "rayscale"
SHARDS: list[dict[str, Any]] = [
    {"name": "teams", "namespaces": ["team-*"]},
    {"name": "a", "namespaces": ["!team-*"], "clusterSelector": "shard=a"},
    {"name": "rest", "namespaces": ["!team-*"], "clusterSelector": "shard notin (a)", "replicas": 3,
     "resources": {"limits": {"memory": "2Gi"}}},
]  # fmt: skip


@pytest.fixture(scope="module")
def helm() -> str:
    """Helm from `make helm` (built once into ~/.cache/rayscale; that needs Go)."""
    out = subprocess.run(
        [str(ROOT / "e2e" / "tools" / "helm.sh")], capture_output=True, text=True, timeout=900, check=False
    )
    if out.returncode != 0:
        pytest.skip(f"no Helm to render the chart with (make helm): {out.stderr.strip()[-300:]}")
    return out.stdout.strip().splitlines()[-1]


def render(helm: str, values: dict[str, Any] | None = None, *sets: str) -> subprocess.CompletedProcess[str]:
    cmd = [helm, "template", "rs", str(CHART), "--namespace", "rayscale-system", "-f", "-", *sets]
    return subprocess.run(cmd, input=json.dumps(values or {}), capture_output=True, text=True, timeout=120)


def docs_of(helm: str, values: dict[str, Any] | None = None, *sets: str) -> list[dict[str, Any]]:
    out = render(helm, values, *sets)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def args_of(deployment: dict[str, Any]) -> list[str]:
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def test_without_shards_the_release_renders_as_before(helm: str) -> None:
    plain = render(helm)
    assert plain.returncode == 0, plain.stderr
    assert render(helm, {"shards": []}).stdout == plain.stdout
    docs = [d for d in yaml.safe_load_all(plain.stdout) if d]
    (deployment,) = of_kind(docs, "Deployment")
    assert deployment["metadata"]["name"] == "rs-rayscale"
    assert "rayscale.io/shard" not in deployment["spec"]["selector"]["matchLabels"]
    args = args_of(deployment)
    assert "--leader-election-id=rs-rayscale" in args
    assert not [a for a in args if a.startswith(("--shard", "--cluster-selector"))]
    assert "# Shard" not in plain.stdout
    assert "podTargetLabels" not in plain.stdout


def test_each_shard_gets_a_deployment_and_a_lease_of_its_own(helm: str) -> None:
    docs = docs_of(helm, {"shards": SHARDS})
    deployments = {d["metadata"]["name"]: d for d in of_kind(docs, "Deployment")}
    assert sorted(deployments) == ["rs-rayscale-a", "rs-rayscale-rest", "rs-rayscale-teams"]
    leases = set()
    for shard in SHARDS:
        deployment = deployments[f"rs-rayscale-{shard['name']}"]
        args = args_of(deployment)
        namespaces = [a.removeprefix("--namespace=") for a in args if a.startswith("--namespace=")]
        assert namespaces == shard["namespaces"]
        assert f"--shard={shard['name']}" in args
        selectors = [
            a.removeprefix("--cluster-selector=") for a in args if a.startswith("--cluster-selector")
        ]
        assert selectors == ([shard["clusterSelector"]] if "clusterSelector" in shard else [])
        (lease,) = [
            a.removeprefix("--leader-election-id=") for a in args if a.startswith("--leader-election-id")
        ]
        leases.add(lease)
        assert deployment["spec"]["replicas"] == shard.get("replicas", 1)
        limits = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert limits["memory"] == ("2Gi" if shard["name"] == "rest" else "512Mi")
        # Each Deployment selects its own pods only (a shared selector would make them fight).
        selector = deployment["spec"]["selector"]["matchLabels"]
        for other in deployments.values():
            pod_labels = other["spec"]["template"]["metadata"]["labels"]
            assert (selector.items() <= pod_labels.items()) is (other is deployment)
    assert leases == {"rs-rayscale-teams", "rs-rayscale-a", "rs-rayscale-rest"}
    (role,) = [d for d in of_kind(docs, "Role") if "leases" in str(d["rules"])]
    assert role["metadata"]["namespace"] == "rayscale-system"
    assert role["rules"][1]["resourceNames"] == ["rs-rayscale-teams", "rs-rayscale-a", "rs-rayscale-rest"]


def test_every_shards_arguments_are_accepted_by_rayscale_run(helm: str) -> None:
    """What the chart renders is what `rayscale run` parses (it refuses a bad scope at start)."""
    for deployment in of_kind(docs_of(helm, {"shards": SHARDS}), "Deployment"):
        args = [a.replace("$(POD_NAMESPACE)", "rayscale-system") for a in args_of(deployment)]
        parsed = cli.build_parser().parse_args(["run", *args])
        assert parsed.shard == deployment["metadata"]["labels"]["rayscale.io/shard"]
        if parsed.cluster_selector is not None:
            assert parsed.cluster_selector == parse_selector(str(parsed.cluster_selector))


def test_rbac_covers_every_shards_namespaces(helm: str) -> None:
    named = [
        {"name": "a", "namespaces": ["team-a", "team-b"]},
        {"name": "b", "namespaces": ["team-b", "ml"], "clusterSelector": "shard=b"},
    ]
    docs = docs_of(helm, {"shards": named})
    roles = {d["metadata"]["namespace"] for d in of_kind(docs, "Role") if "pods" in str(d["rules"])}
    bindings = {d["metadata"]["namespace"] for d in of_kind(docs, "RoleBinding") if "leader" not in str(d)}
    assert roles == bindings == {"team-a", "team-b", "ml"}
    assert not [d for d in of_kind(docs, "ClusterRole") if "pods" in str(d["rules"])]
    # A pattern, or a shard of every namespace: namespaces not known at install time, a ClusterRole.
    for shards in (SHARDS, [{"name": "a", "clusterSelector": "shard=a"}, *named[1:]]):
        docs = docs_of(helm, {"shards": shards})
        assert [d for d in of_kind(docs, "ClusterRole") if "pods" in str(d["rules"])]
        assert not [d for d in of_kind(docs, "Role") if "pods" in str(d["rules"])]


def test_the_service_monitor_labels_each_series_with_its_shard(helm: str) -> None:
    values = {"shards": SHARDS, "metrics": {"serviceMonitor": {"enabled": True}}}
    docs = docs_of(helm, values)
    (monitor,) = of_kind(docs, "ServiceMonitor")
    assert monitor["spec"]["podTargetLabels"] == ["rayscale.io/shard"]
    (service,) = of_kind(docs, "Service")  # one metrics Service in front of every shard's pods
    for deployment in of_kind(docs, "Deployment"):
        assert (
            service["spec"]["selector"].items()
            <= deployment["spec"]["template"]["metadata"]["labels"].items()
        )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"shards": [{"namespaces": ["x"]}]}, "missing property 'name'"),
        ({"shards": [{"name": "A"}]}, "/shards/0/name"),
        ({"shards": [{"name": "a", "namespace": ["x"]}]}, "additional properties 'namespace' not allowed"),
        ({"shards": [{"name": "a", "namespaces": ["Team"]}]}, "/shards/0/namespaces/0"),
        ({"shards": [{"name": "a", "clusterSelector": "shard in ()"}]}, "/shards/0/clusterSelector"),
        ({"shards": [{"name": "a", "namespaces": ["team-a,team-b"]}]}, "/shards/0/namespaces/0"),
        ({"shards": [{"name": "a", "clusterSelector": "x=1"}, {"name": "a", "clusterSelector": "x=2"}]},
         'two shards are named "a"'),
        ({"shards": [{"name": "a", "clusterSelector": "x=1"}, {"name": "b"}]},
         "shard b has neither namespaces nor a clusterSelector"),
        ({"shards": [{"name": "a", "namespaces": ["x", "y"]}, {"name": "b", "namespaces": ["y", "x"]}]},
         "shards a and b take the same RayClusters"),
        ({"shards": [{"name": "a"}], "watchNamespace": ["x"]},
         "leave singleNamespaceInstall and watchNamespace"),
        ({"shards": [{"name": "a"}], "singleNamespaceInstall": True}, "leave singleNamespaceInstall"),
        ({"shards": [{"name": "a", "replicas": 2}], "leaderElectionEnabled": False},
         "shard a has more than one replica without leaderElectionEnabled"),
        ({"shards": [{"name": "abcdefghij"}], "fullnameOverride": "x" * 55}, "longer than 63 characters"),
    ],
)  # fmt: skip
def test_shards_that_cannot_work_are_refused_saying_why(
    helm: str, values: dict[str, Any], message: str
) -> None:
    out = render(helm, values)
    assert out.returncode != 0
    assert message in out.stderr


SELECTOR_PARTS = st.sampled_from(
    ["a", "b", "x.y/", "A", "-", "_", ".", "=", "==", "!=", "!", "(", ")", ",", " ", " in ", " notin ", "in",
     "<", ">", "1", "-2", "/"]
)  # fmt: skip


SHARD_SCHEMA = json.loads((CHART / "values.schema.json").read_text())["properties"]["shards"]["items"]
SELECTOR_PATTERN = re.compile(SHARD_SCHEMA["properties"]["clusterSelector"]["pattern"])
NAMESPACE_PATTERN = re.compile(SHARD_SCHEMA["properties"]["namespaces"]["items"]["pattern"])


@settings(max_examples=500, deadline=None)
@given(st.lists(SELECTOR_PARTS, max_size=8))
def test_the_schema_takes_the_cluster_selectors_rayscale_run_takes(parts: list[str]) -> None:
    """The schema's pattern is the selector grammar: a typo fails `helm install` instead of leaving
    the shard's pod exiting with status 2 (only names past 63 characters get that far)."""
    text = "".join(parts)
    assert (SELECTOR_PATTERN.search(text) is not None) is _takes(parse_selector, text), text


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "-", "*", "?", "!", ",", " ", "A", "_", "1"]), max_size=10))
def test_the_schema_takes_the_namespace_patterns_rayscale_run_takes(parts: list[str]) -> None:
    """As for selectors: `team-a,team-b` (which kopf reads as `team-a` alone) fails `helm install`."""
    text = "".join(parts)
    assert (NAMESPACE_PATTERN.search(text) is not None) is _takes(check_namespace_pattern, text), text


def _takes(check: Callable[[str], object], text: str) -> bool:
    """`rayscale run` takes `text` (the check raises no ValueError)."""
    try:
        check(text)
    except ValueError:
        return False
    return True
