"""The CRDs in crds/ are exactly what the models generate, and they are structural."""

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
