"""RayVirtualCluster: the models round-trip, the CRD has the agreed shape, and the shared names and
spec checks."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from rayscale.api.crd import crd_manifest
from rayscale.api.raycluster import RayClusterSpec
from rayscale.api.rayvirtualcluster import RayVirtualClusterSpec, RayVirtualClusterStatus
from rayscale.api.registry import CRDS, RAYVIRTUALCLUSTER
from rayscale.api.virtualcluster_names import (
    FINALIZER,
    JOB_LABEL,
    VC_LABEL,
    job_resource,
    parse_resource,
    spec_errors,
    vc_resource,
)

SPEC = {
    "rayClusterName": "demo",
    "divisible": True,
    "revision": 3,
    "groups": [
        {"groupName": "cpu", "nodes": 2, "minNodes": 1, "maxNodes": 4},
        {"groupName": "gpu", "nodes": 1},
    ],
}

STATUS = {
    "phase": "Scaling",
    "revision": 4,
    "observedGeneration": 4,
    "rayResource": "rayscale.io/vc/team-a",
    "groups": [
        {
            "groupName": "cpu",
            "desired": 3,
            "ready": 2,
            "nodes": [
                {"pod": "demo-cpu-abcde", "nodeId": "ab12", "state": "Busy", "jobCluster": "raysubmit_abc",
                 "since": "2026-01-02T03:04:05Z"},
                {"pod": "demo-cpu-fghij", "state": "Pending"},
            ],
        }
    ],
    "jobClusters": [
        {"name": "raysubmit_abc", "rayResource": "rayscale.io/vc/team-a/raysubmit_abc", "phase": "Destroying",
         "reason": "1 actor still runs", "groups": [{"groupName": "cpu", "nodes": 2}]}
    ],
    "busy": {"jobs": 0, "actors": 1, "placementGroups": 0, "tasks": 0},
    "unmet": [{"reason": "MaxNodes", "message": "2 x {CPU: 8}: cpu is at maxNodes", "count": 2}],
    "conditions": [
        {"type": "Ready", "status": "False", "reason": "Scaling",
         "lastTransitionTime": "2026-01-02T03:04:05Z"}
    ],
}  # fmt: skip


def _version() -> dict[str, Any]:
    crd = crd_manifest(RAYVIRTUALCLUSTER)
    assert crd["metadata"]["name"] == "rayvirtualclusters.rayscale.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["kind"] == "RayVirtualCluster"
    assert crd["spec"]["names"]["shortNames"] == ["rvc"]
    version: dict[str, Any] = crd["spec"]["versions"][0]
    return version


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = _version()["schema"]["openAPIV3Schema"]
    return schema


def test_registered() -> None:
    assert RAYVIRTUALCLUSTER in CRDS


def test_version_columns_and_status_subresource() -> None:
    version = _version()
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = [(c["name"], c["type"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert columns == [
        ("cluster", "string", ".spec.rayClusterName"),
        ("divisible", "boolean", ".spec.divisible"),
        ("phase", "string", ".status.phase"),
        ("revision", "integer", ".status.revision"),
        ("age", "date", ".metadata.creationTimestamp"),
    ]


def test_spec_schema() -> None:
    spec = _schema()["properties"]["spec"]
    assert set(spec["required"]) == {"rayClusterName", "groups"}
    props = spec["properties"]
    assert props["rayClusterName"]["minLength"] == 1
    assert props["rayClusterName"]["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "rayClusterName is immutable"}
    ]
    assert props["divisible"]["default"] is False
    assert props["divisible"]["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf",
         "message": "divisible is immutable: create a new RayVirtualCluster to change it"}
    ]  # fmt: skip
    assert props["revision"] == {"type": "integer", "format": "int64", "minimum": 1}
    groups = props["groups"]
    assert groups["minItems"] == 1
    assert groups["x-kubernetes-list-type"] == "map"
    assert groups["x-kubernetes-list-map-keys"] == ["groupName"]
    group = groups["items"]
    assert set(group["required"]) == {"groupName", "nodes"}
    for name in ("nodes", "minNodes", "maxNodes"):
        assert group["properties"][name]["format"] == "int32"
        assert group["properties"][name]["minimum"] == 0
    rules = {r["fieldPath"]: r["rule"] for r in group["x-kubernetes-validations"]}
    assert rules == {
        ".minNodes": "!has(self.minNodes) || self.minNodes <= self.nodes",
        ".maxNodes": "!has(self.maxNodes) || self.nodes <= self.maxNodes",
    }


def test_revision_rule_is_on_the_whole_object() -> None:
    (rule,) = _schema()["x-kubernetes-validations"]
    assert rule["rule"].startswith("!has(self.spec.revision) || self.spec == oldSelf.spec")
    assert "self.spec.revision == oldSelf.status.revision" in rule["rule"]
    assert rule["fieldPath"] == ".spec.revision"
    assert "re-apply your change on the latest revision" in rule["message"]
    # The other CRDs keep no rule on the whole object.
    assert all("x-kubernetes-validations" not in crd_manifest(d)["spec"]["versions"][0]["schema"]
               ["openAPIV3Schema"] for d in CRDS if d is not RAYVIRTUALCLUSTER)  # fmt: skip


def test_status_schema() -> None:
    status = _schema()["properties"]["status"]["properties"]
    assert status["phase"]["enum"] == ["Pending", "Ready", "Scaling", "Removing", "Invalid"]
    assert status["revision"]["format"] == "int64"
    assert set(status) == {"phase", "revision", "observedGeneration", "rayResource", "groups", "jobClusters",
                           "busy", "unmet", "conditions"}  # fmt: skip
    node = status["groups"]["items"]["properties"]["nodes"]
    assert node["x-kubernetes-list-map-keys"] == ["pod"]
    assert node["items"]["properties"]["state"]["enum"] == [
        "Pending", "Booting", "Ready", "Idle", "Busy", "Dead", "Releasing"
    ]  # fmt: skip
    jobs = status["jobClusters"]
    assert jobs["x-kubernetes-list-map-keys"] == ["name"]
    assert jobs["items"]["properties"]["phase"]["enum"] == ["Active", "Destroying"]
    assert set(status["busy"]["properties"]) == {"jobs", "actors", "placementGroups", "tasks"}
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]


def test_model_round_trip() -> None:
    spec = RayVirtualClusterSpec.model_validate(SPEC)
    assert spec.ray_cluster_name == "demo"
    assert spec.divisible is True
    assert spec.revision == 3
    assert [(g.group_name, g.lowest, g.nodes, g.highest) for g in spec.groups] == [
        ("cpu", 1, 2, 4),
        ("gpu", 1, 1, 1),
    ]
    assert spec.model_dump(by_alias=True, exclude_none=True) == SPEC
    status = RayVirtualClusterStatus.model_validate(STATUS)
    assert status.groups is not None
    assert status.groups[0].nodes is not None
    assert status.groups[0].nodes[0].job_cluster == "raysubmit_abc"
    assert status.busy is not None
    assert status.busy.placement_groups == 0
    assert status.model_dump(by_alias=True, exclude_none=True) == STATUS


def test_model_defaults() -> None:
    spec = RayVirtualClusterSpec.model_validate(
        {"rayClusterName": "demo", "groups": [{"groupName": "cpu", "nodes": 0}]}
    )
    assert spec.divisible is False
    assert spec.revision is None
    assert RayVirtualClusterStatus.model_validate({}).phase is None


@pytest.mark.parametrize(
    "spec",
    [
        {"groups": [{"groupName": "cpu", "nodes": 1}]},
        {"rayClusterName": "", "groups": [{"groupName": "cpu", "nodes": 1}]},
        {"rayClusterName": "demo", "groups": []},
        {"rayClusterName": "demo", "groups": [{"groupName": "cpu"}]},
        {"rayClusterName": "demo", "groups": [{"groupName": "cpu", "nodes": -1}]},
        {"rayClusterName": "demo", "revision": 0, "groups": [{"groupName": "cpu", "nodes": 1}]},
    ],
)
def test_model_rejects(spec: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        RayVirtualClusterSpec.model_validate(spec)


# ---- shared names ----


def test_resource_names_round_trip() -> None:
    assert vc_resource("team-a") == "rayscale.io/vc/team-a"
    assert job_resource("team-a", "raysubmit_abc") == "rayscale.io/vc/team-a/raysubmit_abc"
    assert parse_resource(vc_resource("team-a")) == ("team-a", None)
    assert parse_resource(job_resource("team-a", "raysubmit_abc")) == ("team-a", "raysubmit_abc")
    assert parse_resource(job_resource("team-a", "a/b")) == ("team-a", "a/b")


@pytest.mark.parametrize("key", ["CPU", "rayscale.io/vc/", "rayscale.io/vc//x", "rayscale.io/vc/a/", "vc/a"])
def test_parse_resource_refuses_other_names(key: str) -> None:
    assert parse_resource(key) is None


def test_label_and_finalizer_names() -> None:
    assert VC_LABEL == "rayscale.io/virtual-cluster"
    assert JOB_LABEL == "rayscale.io/job-cluster"
    assert FINALIZER == "rayscale.io/virtual-cluster"


# ---- spec_errors ----


def _raycluster(*groups: tuple[str, int | None], autoscaling: Any = True) -> RayClusterSpec:
    """The typed spec of a RayCluster with worker groups of (name, numOfHosts; None: not set)."""
    workers = []
    for name, hosts in groups:
        worker: dict[str, Any] = {"groupName": name, "template": {}}
        if hosts is not None:
            worker["numOfHosts"] = hosts
        workers.append(worker)
    spec: dict[str, Any] = {"headGroupSpec": {"template": {}}, "workerGroupSpecs": workers}
    if autoscaling is not None:
        spec["enableInTreeAutoscaling"] = autoscaling
    return RayClusterSpec.model_validate(spec)


def _spec(*names: str) -> dict[str, Any]:
    return {"rayClusterName": "demo", "groups": [{"groupName": n, "nodes": 1} for n in names]}


def test_spec_errors_none_for_a_valid_spec() -> None:
    rc = _raycluster(("cpu", 1), ("gpu", None), ("tpu", 4))
    assert spec_errors(_spec("cpu", "gpu"), rc) == []
    assert spec_errors(RayVirtualClusterSpec.model_validate(_spec("cpu")), rc) == []


def test_spec_errors_unknown_group() -> None:
    (error,) = spec_errors(_spec("cpu", "big"), _raycluster(("cpu", 1), ("gpu", 1)))
    assert error.startswith("spec.groups[1].groupName: ")
    assert '"big"' in error
    assert "cpu, gpu" in error


def test_spec_errors_multi_host_group() -> None:
    (error,) = spec_errors(_spec("tpu"), _raycluster(("tpu", 4)))
    assert error.startswith("spec.groups[0].groupName: ")
    assert "numOfHosts 4" in error
    assert "multi-host groups are not supported in virtual clusters" in error


def test_spec_errors_group_twice() -> None:
    (error,) = spec_errors(_spec("cpu", "cpu"), _raycluster(("cpu", 1)))
    assert error.startswith("spec.groups[1].groupName: ")
    assert "more than once" in error


@pytest.mark.parametrize("autoscaling", [None, False, "false"])
def test_spec_errors_needs_in_tree_autoscaling(autoscaling: Any) -> None:
    (error,) = spec_errors(_spec("cpu"), _raycluster(("cpu", 1), autoscaling=autoscaling))
    assert error.startswith("spec.rayClusterName: ")
    assert "spec.enableInTreeAutoscaling: true" in error
    assert "autoscaler" in error


def test_spec_errors_no_raycluster_and_every_error_at_once() -> None:
    (missing,) = spec_errors(_spec("cpu"), None)
    assert missing.startswith("spec.rayClusterName: ")
    assert '"demo"' in missing
    rc = _raycluster(("tpu", 2), autoscaling=False)
    errors = spec_errors(_spec("tpu", "cpu", "tpu"), rc)
    assert [e.split(":", 1)[0] for e in errors] == [
        "spec.rayClusterName",
        "spec.groups[0].groupName",
        "spec.groups[1].groupName",
        "spec.groups[2].groupName",
    ]
