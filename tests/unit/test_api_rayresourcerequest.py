"""RayResourceRequest: the model parses the issue's example and its CRD has the agreed shape."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from rayscale.api.crd import crd_manifest
from rayscale.api.rayresourcerequest import RayResourceRequestSpec, RayResourceRequestStatus
from rayscale.api.registry import CRDS, RAYRESOURCEREQUEST


def _version() -> dict[str, Any]:
    crd = crd_manifest(RAYRESOURCEREQUEST)
    assert crd["metadata"]["name"] == "rayresourcerequests.rayscale.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["kind"] == "RayResourceRequest"
    version: dict[str, Any] = crd["spec"]["versions"][0]
    return version


def test_registered() -> None:
    assert RAYRESOURCEREQUEST in CRDS


def test_version_columns_and_status_subresource() -> None:
    version = _version()
    assert version["name"] == "v1alpha1"
    assert version["subresources"] == {"status": {}}
    columns = [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert columns == [
        ("cluster", ".spec.clusterName"),
        ("phase", ".status.phase"),
        ("age", ".metadata.creationTimestamp"),
    ]


def test_schema() -> None:
    props = _version()["schema"]["openAPIV3Schema"]["properties"]
    spec = props["spec"]
    assert set(spec["required"]) == {"clusterName", "bundles"}
    bundle = spec["properties"]["bundles"]["items"]
    assert bundle["properties"]["count"]["default"] == 1
    assert bundle["properties"]["count"]["minimum"] == 1
    assert bundle["properties"]["resources"]["additionalProperties"]["x-kubernetes-int-or-string"] is True
    status = props["status"]["properties"]
    assert status["phase"]["enum"] == ["Pending", "Satisfied", "Unsatisfiable"]
    assert set(status) == {"phase", "reason", "message", "observedGeneration"}


def test_model_parses_issue_example() -> None:
    spec = RayResourceRequestSpec.model_validate(
        {
            "clusterName": "my-cluster",
            "bundles": [{"resources": {"GPU": 1, "CPU": 4, "memory": "8Gi"}, "count": 3}],
        }
    )
    assert spec.cluster_name == "my-cluster"
    assert spec.bundles[0].count == 3
    assert spec.bundles[0].resources["memory"] == "8Gi"
    assert (
        RayResourceRequestSpec.model_validate({"clusterName": "c", "bundles": [{"resources": {"CPU": 1}}]})
        .bundles[0]
        .count
        == 1
    )
    status = RayResourceRequestStatus.model_validate({"phase": "Unsatisfiable", "reason": "MAX_REPLICAS"})
    assert status.model_dump(by_alias=True, exclude_none=True) == {
        "phase": "Unsatisfiable",
        "reason": "MAX_REPLICAS",
    }


@pytest.mark.parametrize(
    "spec",
    [
        {"bundles": [{"resources": {"CPU": 1}}]},
        {"clusterName": "c", "bundles": []},
        {"clusterName": "c", "bundles": [{"resources": {"CPU": 1}, "count": 0}]},
    ],
)
def test_model_rejects(spec: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        RayResourceRequestSpec.model_validate(spec)
