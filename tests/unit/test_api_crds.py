"""The CRDs in crds/ are exactly what the models generate, and they are structural; RayCluster's
v1alpha1 is served beside v1 as KubeRay serves it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rayscale.api.command import render_crds
from rayscale.api.crd import crd_manifest
from rayscale.api.registry import RAYCLUSTER

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("filename", "text"), sorted(render_crds().items()))
def test_committed_crd_matches_models(filename: str, text: str) -> None:
    committed = ROOT / "crds" / filename
    assert committed.exists(), f"crds/{filename} missing: run `rayscale crds`"
    assert committed.read_text() == text, f"crds/{filename} is stale: run `rayscale crds`"


def _walk(node: Any, path: str = "") -> list[str]:
    """Paths of schema nodes that break the structural-schema rules we rely on."""
    problems: list[str] = []
    if not isinstance(node, dict):
        return problems
    if "$ref" in node or "title" in node:
        problems.append(path)
    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        problems.append(path)
    if "type" not in node and not node.get("x-kubernetes-int-or-string"):
        problems.append(path)
    for key, child in node.get("properties", {}).items():
        problems += _walk(child, f"{path}.{key}")
    if isinstance(node.get("items"), dict):
        problems += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        problems += _walk(node["additionalProperties"], f"{path}{{}}")
    return problems


def _schema() -> dict[str, Any]:
    crd = crd_manifest(RAYCLUSTER)
    version = crd["spec"]["versions"][0]
    assert version["name"] == "v1"
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def test_schema_is_structural() -> None:
    assert _walk(_schema()) == []


def test_defaults_enums_and_preserved_templates() -> None:
    spec = _schema()["properties"]["spec"]
    assert spec["required"] == ["headGroupSpec"]
    head = spec["properties"]["headGroupSpec"]
    assert head["required"] == ["template"]
    assert head["properties"]["template"]["x-kubernetes-preserve-unknown-fields"] is True
    group = spec["properties"]["workerGroupSpecs"]["items"]
    assert set(group["required"]) == {"groupName", "template"}
    props = group["properties"]
    assert props["minReplicas"]["default"] == 0
    assert props["maxReplicas"]["default"] == 2147483647
    assert props["replicas"]["default"] == 0
    assert props["numOfHosts"]["default"] == 1
    assert props["scaleStrategy"]["properties"]["workersToDelete"] == {
        "items": {"type": "string"},
        "type": "array",
    }
    auto = spec["properties"]["autoscalerOptions"]["properties"]
    assert auto["upscalingMode"]["enum"] == ["Default", "Aggressive", "Conservative"]
    assert auto["version"]["enum"] == ["v1", "v2"]
    assert spec["properties"]["upgradeStrategy"]["properties"]["type"]["enum"] == ["Recreate", "None"]
    assert len(spec["properties"]["managedBy"]["x-kubernetes-validations"]) == 2


def test_status_subresource_columns_and_categories() -> None:
    crd = crd_manifest(RAYCLUSTER)
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    assert crd["spec"]["names"]["categories"] == ["all"]
    columns = {c["name"]: (c["jsonPath"], c["priority"]) for c in version["additionalPrinterColumns"]}
    assert columns["desired workers"] == (".status.desiredWorkerReplicas", 0)
    assert columns["tpus"] == (".status.desiredTPU", 1)
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert status["desiredCPU"]["x-kubernetes-int-or-string"] is True


def test_generated_yaml_round_trips() -> None:
    for text in render_crds().values():
        assert yaml.safe_load(text)["kind"] == "CustomResourceDefinition"


def test_field_names_are_kuberays_where_camel_case_differs() -> None:
    """Field names KubeRay spells otherwise than plain camelCase (``K8s`` is not ``K8S``)."""
    from rayscale.api.raycluster import AuthOptions

    props = _schema()["properties"]["spec"]["properties"]["authOptions"]["properties"]
    assert "enableK8sTokenAuth" in props
    parsed = AuthOptions.model_validate({"mode": "token", "enableK8sTokenAuth": True})
    assert parsed.enable_k8s_token_auth is True
    dumped = parsed.model_dump(by_alias=True, exclude_none=True)
    assert dumped == {"mode": "token", "enableK8sTokenAuth": True}


# ---- ray.io/v1alpha1, served beside v1 as KubeRay serves it ----

# What a schema node says about its values (descriptions and nested nodes aside).
FACETS = ("type", "format", "default", "enum", "nullable", "pattern", "x-kubernetes-int-or-string")


def _versions() -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in crd_manifest(RAYCLUSTER)["spec"]["versions"]}


def _flat(node: dict[str, Any], path: str = "", *, stop_at: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Every schema node by path (`.spec.workerGroupSpecs[].template`), with its facets, `required`
    and whether it keeps unknown fields; nothing below a path in `stop_at` or a preserved node."""
    facets = {k: node[k] for k in FACETS if k in node}
    if node.get("required"):
        facets["required"] = sorted(node["required"])
    preserved = bool(node.get("x-kubernetes-preserve-unknown-fields"))
    if preserved:
        facets["preserved"] = True
    out = {path: facets}
    if preserved or path in stop_at:
        return out
    for key, child in node.get("properties", {}).items():
        out.update(_flat(child, f"{path}.{key}", stop_at=stop_at))
    if isinstance(node.get("items"), dict):
        out.update(_flat(node["items"], f"{path}[]", stop_at=stop_at))
    if isinstance(node.get("additionalProperties"), dict):
        out.update(_flat(node["additionalProperties"], f"{path}{{}}", stop_at=stop_at))
    return out


def test_v1alpha1_is_served_not_stored_with_v1s_columns_and_no_conversion() -> None:
    crd = crd_manifest(RAYCLUSTER)
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [
        ("v1", True, True),
        ("v1alpha1", True, False),
    ]
    assert "conversion" not in crd["spec"]  # strategy None: only apiVersion changes
    v1, alpha = _versions()["v1"], _versions()["v1alpha1"]
    assert "deprecated" not in alpha  # KubeRay's CRD sets no deprecation warning for it
    assert alpha["subresources"] == {"status": {}}
    assert alpha["additionalPrinterColumns"] == v1["additionalPrinterColumns"]
    assert _walk(alpha["schema"]["openAPIV3Schema"]) == []


def test_v1alpha1_schema_is_v1s_cut_down_so_storing_it_as_v1_keeps_every_field() -> None:
    """The API server stores a v1alpha1 object as v1 without converting it: every v1alpha1 field must
    be a v1 field with the same type, format and default (its own `required` and `nullable` aside)."""
    v1 = _flat(_versions()["v1"]["schema"]["openAPIV3Schema"])
    alpha = _flat(_versions()["v1alpha1"]["schema"]["openAPIV3Schema"])

    def comparable(facets: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in facets.items() if k not in ("required", "nullable")}

    assert {p: comparable(f) for p, f in alpha.items() if comparable(f) != comparable(v1.get(p, {}))} == {}
    assert len(alpha) < len(v1)
    assert ".status.conditions" not in alpha
    assert ".spec.workerGroupSpecs[].numOfHosts" not in alpha
    assert alpha[".spec.headGroupSpec"]["required"] == ["rayStartParams", "template"]
    assert alpha[".spec.workerGroupSpecs[]"]["required"] == ["groupName", "rayStartParams", "template"]
    assert "required" not in alpha[""]  # KubeRay's v1alpha1 does not require spec


def _kuberay_crd() -> dict[str, Any]:
    """KubeRay's own RayCluster CRD, from its Go module (the version tests/kuberay pins; fetched into
    the Go module cache if missing)."""
    from tests.kuberay.oracle import module_dir

    path = module_dir() / "config" / "crd" / "bases" / "ray.io_rayclusters.yaml"
    crd: dict[str, Any] = yaml.safe_load(path.read_text())
    return crd


def test_v1alpha1_schema_is_kuberays() -> None:
    """Field for field what KubeRay's CRD has for v1alpha1, where rayscale keeps core objects (pod
    templates, the head Service, env) as preserved objects, as it does for v1."""
    theirs = {v["name"]: v for v in _kuberay_crd()["spec"]["versions"]}["v1alpha1"]
    ours = _versions()["v1alpha1"]
    assert (ours["served"], ours["storage"]) == (theirs["served"], theirs["storage"])
    assert ("deprecated" in ours, "deprecationWarning" in ours) == (
        "deprecated" in theirs,
        "deprecationWarning" in theirs,
    )
    mine = _flat(ours["schema"]["openAPIV3Schema"])
    preserved = frozenset(p for p, f in mine.items() if f.get("preserved"))
    kuberay = _flat(theirs["schema"]["openAPIV3Schema"], stop_at=preserved)
    for path in preserved:
        mine[path] = kuberay[path] = {"type": "object"}
    # KubeRay lists minReplicas and maxReplicas as required too; both have defaults, which the API
    # server applies before it validates, so an object can never miss them (the same holds in v1).
    groups = kuberay[".spec.workerGroupSpecs[]"]
    groups["required"] = [r for r in groups["required"] if r not in ("minReplicas", "maxReplicas")]
    assert set(mine) == set(kuberay)
    assert {p: (f, kuberay[p]) for p, f in mine.items() if f != kuberay[p]} == {}
