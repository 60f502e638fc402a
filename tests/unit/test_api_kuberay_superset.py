"""rayscale's ray.io CRDs against KubeRay's own (v1.6.2, from its Go module): every version KubeRay
serves is served, with a schema that admits whatever KubeRay's admits (a superset: every property
path KubeRay has, of the same type and default, enum values included, no rule or bound KubeRay lacks),
KubeRay's names, categories, printer columns and subresources.

RayJob and RayCronJob are KubeRay's field for field besides (the RayCluster inside them is rayscale's
RayCluster, and their added fields are RayCronJob's spec.timeZone and status.conditions); their enums
and the constants of rayscale.api.rayjob are KubeRay's Go constants; KubeRay's sample RayJobs and
RayCronJobs parse into the models and dump back unchanged.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.kuberay.oracle import module_dir

from rayscale.api import rayjob
from rayscale.api.crd import CrdDefinition, crd_manifest
from rayscale.api.raycronjob import RayCronJobSpec
from rayscale.api.rayjob import RayJobSpec
from rayscale.api.registry import CRDS, RAYCLUSTER, RAYCRONJOB, RAYJOB

# What a schema node says about its values (descriptions and nested nodes aside).
FACETS = (
    "type", "format", "default", "enum", "nullable", "pattern", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "minItems", "maxItems", "uniqueItems",
    "minProperties", "maxProperties", "x-kubernetes-int-or-string", "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys", "x-kubernetes-map-type", "x-kubernetes-validations",
    "x-kubernetes-embedded-resource",
)  # fmt: skip
PRESERVE = "x-kubernetes-preserve-unknown-fields"
# Bounds a node may lack where KubeRay's has them (without one, more values are admitted).
BOUNDS = (
    "format", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
)  # fmt: skip
# The keywords of apiextensions.k8s.io/v1 JSONSchemaProps: the API server drops any other.
SCHEMA_KEYWORDS = frozenset(FACETS) | {
    "description", "properties", "items", "additionalProperties", "required", "anyOf", "allOf", "oneOf",
    "not", "x-kubernetes-preserve-unknown-fields", "example", "externalDocs",
}  # fmt: skip

# (definition, version): what KubeRay's CRD of the same name serves.
VERSIONS = [
    (RAYCLUSTER, "v1"),
    (RAYCLUSTER, "v1alpha1"),
    (RAYJOB, "v1"),
    (RAYJOB, "v1alpha1"),
    (RAYCRONJOB, "v1"),
]
# Where rayscale is knowingly stricter than KubeRay: (definition, version, path, facet) -> why.
STRICTER = {
    ("rayclusters.ray.io", "v1", "", "required"): "rayscale's RayCluster requires spec (KubeRay's does not)",
}
# Paths of the RayJob and RayCronJob schemas that hold a RayCluster (rayscale's, a superset of
# KubeRay's: compared by the superset test only) or a pod template (preserved).
CLUSTER_PARTS = (".spec.rayClusterSpec", ".status.rayClusterStatus", ".spec.jobTemplate.rayClusterSpec")


def _kuberay_crd(defn: CrdDefinition) -> dict[str, Any]:
    """KubeRay's CRD of the same name (parsed once: the files are long; never modified)."""
    return _parsed(module_dir() / "config" / "crd" / "bases" / defn.filename)


@functools.cache
def _parsed(path: Path) -> dict[str, Any]:
    crd: dict[str, Any] = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return crd


def _version(crd: dict[str, Any], name: str) -> dict[str, Any]:
    version: dict[str, Any] = next(v for v in crd["spec"]["versions"] if v["name"] == name)
    return version


def _schema(crd: dict[str, Any], name: str) -> dict[str, Any]:
    schema: dict[str, Any] = _version(crd, name)["schema"]["openAPIV3Schema"]
    return schema


def _children(node: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    out = [(f"{path}.{key}", child) for key, child in node.get("properties", {}).items()]
    if isinstance(node.get("items"), dict):
        out.append((f"{path}[]", node["items"]))
    if isinstance(node.get("additionalProperties"), dict):
        out.append((f"{path}{{}}", node["additionalProperties"]))
    return out


def _stricter(
    theirs: dict[str, Any], ours: dict[str, Any] | None, path: str = ""
) -> dict[tuple[str, str], Any]:
    """Where `ours` may refuse what `theirs` admits: (path, facet) -> (theirs, ours). Nothing is
    compared below a node `ours` preserves (it admits any object there)."""
    if ours is None:
        return {(path, "missing"): (sorted(theirs), None)}
    found: dict[tuple[str, str], Any] = {}
    if theirs.get(PRESERVE) and not ours.get(PRESERVE):
        found[(path, "preserved")] = (True, False)
    if ours.get(PRESERVE) and not ours.get("properties"):
        return found
    for facet in ("type", "default", "x-kubernetes-int-or-string"):
        if theirs.get(facet) != ours.get(facet):
            found[(path, facet)] = (theirs.get(facet), ours.get(facet))
    for facet in BOUNDS:
        if facet in ours and ours[facet] != theirs.get(facet):
            found[(path, facet)] = (theirs.get(facet), ours[facet])
    if "enum" in ours and ("enum" not in theirs or not set(theirs["enum"]) <= set(ours["enum"])):
        found[(path, "enum")] = (theirs.get("enum"), ours["enum"])
    if not set(ours.get("required", ())) <= set(theirs.get("required", ())):
        found[(path, "required")] = (theirs.get("required"), ours["required"])
    theirs_rules = theirs.get("x-kubernetes-validations", [])
    rules = [r for r in ours.get("x-kubernetes-validations", []) if r not in theirs_rules]
    if rules:
        found[(path, "x-kubernetes-validations")] = (theirs.get("x-kubernetes-validations"), rules)
    # A map (or set) list refuses two items of one key; an atomic list (the default) does not.
    mine_type, their_type = (
        ours.get("x-kubernetes-list-type", "atomic"),
        theirs.get("x-kubernetes-list-type", "atomic"),
    )
    if mine_type not in ("atomic", their_type):
        found[(path, "x-kubernetes-list-type")] = (their_type, mine_type)
    # A null where ours is not nullable is dropped (pruned before validation), not refused.
    mine = dict(_children(ours, path))
    for child_path, child in _children(theirs, path):
        found.update(_stricter(child, mine.get(child_path), child_path))
    return found


def _nodes(node: dict[str, Any], path: str = "") -> dict[str, dict[str, Any]]:
    """Every schema node by path with its facets (and `required`, `preserved`)."""
    facets = {k: node[k] for k in FACETS if k in node}
    if node.get("required"):
        facets["required"] = sorted(node["required"])
    if node.get("x-kubernetes-preserve-unknown-fields"):
        facets["preserved"] = True
    out = {path: facets}
    for child_path, child in _children(node, path):
        out.update(_nodes(child, child_path))
    return out


@pytest.mark.parametrize(("defn", "version"), VERSIONS, ids=[f"{d.names.kind}-{v}" for d, v in VERSIONS])
def test_schema_is_a_superset_of_kuberays(defn: CrdDefinition, version: str) -> None:
    theirs = _schema(_kuberay_crd(defn), version)
    ours = _schema(crd_manifest(defn), version)
    found = _stricter(theirs, ours)
    known = {(p, f) for d, v, p, f in STRICTER if (d, v) == (defn.name, version)}
    assert {k: v for k, v in found.items() if k not in known} == {}
    assert known <= set(found), "STRICTER lists what is no longer stricter"


@pytest.mark.parametrize("defn", [RAYCLUSTER, RAYJOB, RAYCRONJOB], ids=lambda d: d.names.kind)
def test_versions_names_columns_and_subresources_are_kuberays(defn: CrdDefinition) -> None:
    theirs, ours = _kuberay_crd(defn), crd_manifest(defn)
    assert ours["metadata"]["name"] == theirs["metadata"]["name"]
    assert ours["spec"]["names"] == theirs["spec"]["names"]  # kind, plural, categories, no short names
    assert ours["spec"]["group"] == theirs["spec"]["group"]
    assert ours["spec"]["scope"] == theirs["spec"]["scope"]
    assert ("conversion" in ours["spec"]) == ("conversion" in theirs["spec"])

    def served(crd: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(v["name"], v["served"], v["storage"], v.get("deprecated"), v.get("subresources"))
                for v in crd["spec"]["versions"]]  # fmt: skip

    assert served(ours) == served(theirs)
    storage = next(v["name"] for v in theirs["spec"]["versions"] if v["storage"])
    columns = [
        {**c, "priority": c.get("priority", 0)} for c in _version(theirs, storage)["additionalPrinterColumns"]
    ]
    assert _version(ours, storage)["additionalPrinterColumns"] == columns


@pytest.mark.parametrize("defn", CRDS, ids=lambda d: d.names.kind)
def test_schemas_use_only_the_keywords_a_crd_has(defn: CrdDefinition) -> None:
    """A keyword JSONSchemaProps lacks (pydantic's `const`, `title`, `$ref`) is dropped by the API
    server: the schema would not say what it seems to."""
    for version in crd_manifest(defn)["spec"]["versions"]:

        def unknown(node: dict[str, Any], path: str) -> list[str]:
            found = [f"{path}: {k}" for k in node if k not in SCHEMA_KEYWORDS]
            for child_path, child in _children(node, path):
                found += unknown(child, child_path)
            return found

        assert unknown(version["schema"]["openAPIV3Schema"], version["name"]) == []


_FIELDS = ("type", "status", "observedGeneration", "lastTransitionTime", "reason", "message")
_CONDITION = (".status.conditions", ".status.conditions[]", *(f".status.conditions[].{f}" for f in _FIELDS))


@pytest.mark.parametrize(
    ("defn", "added"),
    [(RAYJOB, set()), (RAYCRONJOB, {".spec.timeZone", *_CONDITION})],
    ids=["RayJob", "RayCronJob"],
)
def test_rayjob_and_raycronjob_are_kuberays_field_for_field(defn: CrdDefinition, added: set[str]) -> None:
    """Outside the RayCluster they hold: the same paths, types, formats, defaults, enums, bounds,
    required fields and CEL rules as KubeRay's v1 (preserved pod templates cut where KubeRay
    describes them), and the added fields."""

    def flat(crd: dict[str, Any], cut: frozenset[str]) -> dict[str, dict[str, Any]]:
        nodes = _nodes(_schema(crd, "v1"))
        return {
            p: ({"type": "object"} if p in cut else f)
            for p, f in nodes.items()
            if not any(p.startswith(c) and p != c for c in (*CLUSTER_PARTS, *cut))
        }

    ours_all = _nodes(_schema(crd_manifest(defn), "v1"))
    preserved = frozenset(
        p for p, f in ours_all.items() if f.get("preserved") and not p.startswith(CLUSTER_PARTS)
    )
    assert {p.rsplit(".", 1)[-1] for p in preserved} == {"submitterPodTemplate"}
    mine, kuberay = flat(crd_manifest(defn), preserved), flat(_kuberay_crd(defn), preserved)
    for part in CLUSTER_PARTS:  # the RayCluster's own: compared as rayscale's RayCluster is
        mine.pop(part, None)
        kuberay.pop(part, None)
    assert set(mine) - set(kuberay) == added
    assert {p: (f, kuberay[p]) for p, f in mine.items() if p in kuberay and f != kuberay[p]} == {}
    assert set(kuberay) <= set(mine)


def test_raycronjob_time_zone_is_optional_and_documented() -> None:
    spec = _schema(crd_manifest(RAYCRONJOB), "v1")["properties"]["spec"]
    assert spec["required"] == ["jobTemplate", "schedule"]
    zone = spec["properties"]["timeZone"]
    assert zone["type"] == "string"
    assert "batch/v1 CronJob" in zone["description"]
    assert "KubeRay" in zone["description"]


# ---- the words of the API: KubeRay's Go constants ----


def _go_constants() -> dict[str, dict[str, str]]:
    """Go type -> {constant name: value} of rayjob_types.go's string constants."""
    text = (module_dir() / "apis" / "ray" / "v1" / "rayjob_types.go").read_text()
    out: dict[str, dict[str, str]] = {}
    for name, go_type, value in re.findall(r'^\s*(\w+)\s+(\w+)\s*=\s*"([^"]*)"', text, re.MULTILINE):
        out.setdefault(go_type, {})[name] = value
    return out


def _go_terminal(function: str) -> set[str]:
    """The values a terminal-status function of rayjob_types.go lists."""
    text = (module_dir() / "apis" / "ray" / "v1" / "rayjob_types.go").read_text()
    body = text.split(f"func {function}(", 1)[1].split("\n}\n", 1)[0]
    values = {n: v for constants in _go_constants().values() for n, v in constants.items()}
    return {values[name] for name in re.findall(r"(\w+):\s*\{\}", body)}


@pytest.mark.parametrize(
    ("enum", "go_type"),
    [
        (rayjob.JobDeploymentStatus, "JobDeploymentStatus"),
        (rayjob.JobStatus, "JobStatus"),
        (rayjob.JobFailedReason, "JobFailedReason"),
        (rayjob.JobSubmissionMode, "JobSubmissionMode"),
        (rayjob.DeletionPolicyType, "DeletionPolicyType"),
    ],
)
def test_enums_are_kuberays_constants(enum: type[Any], go_type: str) -> None:
    assert sorted(m.value for m in enum) == sorted(_go_constants()[go_type].values())


def test_enum_members_and_terminal_sets() -> None:
    status, deployment = rayjob.JobStatus, rayjob.JobDeploymentStatus
    assert (status.NEW.value, deployment.NEW.value) == (
        "",
        "",
    )  # KubeRay's JobStatusNew, JobDeploymentStatusNew
    assert [status.PENDING, status.RUNNING, status.STOPPED, status.SUCCEEDED, status.FAILED] == [
        "PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED",
    ]  # fmt: skip
    assert [deployment.INITIALIZING, deployment.WAITING, deployment.RUNNING, deployment.VALIDATION_FAILED,
            deployment.SUSPENDING, deployment.SUSPENDED, deployment.RETRYING] == [
        "Initializing", "Waiting", "Running", "ValidationFailed", "Suspending", "Suspended", "Retrying",
    ]  # fmt: skip
    reason = rayjob.JobFailedReason
    assert [reason.SUBMISSION_FAILED, reason.DEADLINE_EXCEEDED, reason.PRE_RUNNING_DEADLINE_EXCEEDED,
            reason.APP_FAILED, reason.TRANSITION_GRACE_PERIOD_EXCEEDED, reason.VALIDATION_FAILED] == [
        "SubmissionFailed", "DeadlineExceeded", "PreRunningDeadlineExceeded", "AppFailed",
        "JobDeploymentStatusTransitionGracePeriodExceeded", "ValidationFailed",
    ]  # fmt: skip
    mode = rayjob.JobSubmissionMode
    assert [mode.K8S_JOB, mode.HTTP, mode.INTERACTIVE, mode.SIDECAR] == [
        "K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode",
    ]  # fmt: skip
    policy = rayjob.DeletionPolicyType
    assert [policy.DELETE_CLUSTER, policy.DELETE_WORKERS, policy.DELETE_SELF, policy.DELETE_NONE] == [
        "DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone",
    ]  # fmt: skip
    assert set(rayjob.JOB_TERMINAL) == _go_terminal("IsJobTerminal")
    assert set(rayjob.DEPLOYMENT_TERMINAL) == _go_terminal("IsJobDeploymentTerminal")


# ---- KubeRay's samples through the models ----


def _samples() -> list[tuple[str, dict[str, Any]]]:
    """(file:name, document) of every RayJob and RayCronJob in KubeRay's sample files."""
    samples = module_dir() / "config" / "samples"
    files = [*sorted(samples.glob("ray-job.*.yaml")), samples / "ray-cronjob.sample.yaml"]
    out = []
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") in ("RayJob", "RayCronJob"):
                meta = doc["metadata"]
                out.append((f"{path.name}:{meta.get('name') or meta['generateName']}", doc))
    return out


def _spec_model(kind: str) -> type[RayJobSpec] | type[RayCronJobSpec]:
    return RayJobSpec if kind == "RayJob" else RayCronJobSpec


def test_samples_are_found() -> None:
    kinds = [doc["kind"] for _, doc in _samples()]
    assert kinds.count("RayCronJob") == 1
    assert kinds.count("RayJob") >= 15


@pytest.mark.parametrize(("sample", "doc"), _samples(), ids=[s for s, _ in _samples()])
def test_kuberay_samples_parse_and_dump_back_unchanged(sample: str, doc: dict[str, Any]) -> None:
    """Every field a sample sets is a field of the models, under KubeRay's name (runtimeEnvYAML,
    not runtimeEnvYaml): the models ignore unknown fields, so a dump that lost one would differ."""
    parsed = _spec_model(doc["kind"]).model_validate(doc["spec"])
    assert parsed.model_dump(by_alias=True, exclude_unset=True) == doc["spec"]


def test_defaults_of_an_empty_rayjob() -> None:
    spec = RayJobSpec.model_validate({})
    assert spec.submission_mode == rayjob.JobSubmissionMode.K8S_JOB
    assert (spec.backoff_limit, spec.ttl_seconds_after_finished) == (0, 0)
    status = rayjob.RayJobStatus.model_validate({"dashboardURL": "http://x:8265", "rayJobInfo": {}})
    assert status.dashboard_url == "http://x:8265"
    assert (status.succeeded, status.failed) == (0, 0)
    rule = rayjob.DeletionRule.model_validate({"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED"}})
    assert rule.policy is rayjob.DeletionPolicyType.DELETE_SELF
    assert rule.condition.ttl_seconds == 0
