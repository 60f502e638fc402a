"""Every allowlist entry is narrow: a deliberately broken copy of the fields it covers is a
difference it does not explain. Each case is a difference the entry explains (what rayscale does on
purpose) beside broken ones (what a bug in the same fields would look like), classified against the
real tests/kuberay/allowlist.yaml; the autoscaler entry is also judged on real answers for KubeRay's
autoscaler sample, with the user's own ServiceAccount, log volume and sidecar in KubeRay's pod."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.kuberay import documents, entries, oracle, runner
from tests.kuberay.compare import ABSENT, Difference, compare
from tests.kuberay.oracle import OracleError
from tests.kuberay.rayscale_side import render as render_rayscale

LIFECYCLE_DELETE = "lifecycle:gcs-ft-delete@delete"
HASH = "ray.io/upgrade-strategy-recreate-hash"
V2 = "spec.containers[ray-head].env[RAY_enable_autoscaler_v2]"
USAGE = "spec.containers[ray-head].env[RAY_USAGE_STATS_EXTRA_TAGS].value"
TAGS = "kuberay_version=v1.6.2;kuberay_crd=RayCluster"
OUR_TAGS = "kuberay_version=rayscale-0.1.0;kuberay_crd=RayCluster"
V2_TRUE = {"name": "RAY_enable_autoscaler_v2", "value": "true"}
V2_FALSE = {"name": "RAY_enable_autoscaler_v2", "value": "false"}
JOB = "Job/ft-options-redis-cleanup"
SPEC_VALID = [{"lastTransitionTime": "<time>", "message": "m", "observedGeneration": 1,
               "reason": "InvalidRayClusterSpec", "status": "False", "type": "SpecValid"}]  # fmt: skip
SECRET = {"kind": "Secret", "name": "generated-2"}
OWNER = [{"apiVersion": "ray.io/v1", "blockOwnerDeletion": True, "controller": True, "kind": "RayCluster",
          "name": "ft-options", "uid": "u"}]  # fmt: skip

# (entry, document, refused, object, path, explained (kuberay, rayscale), broken [(kuberay, rayscale)])
CASES: list[tuple[str, str, bool, str, str, tuple[Any, Any], list[tuple[Any, Any]]]] = [
    ("rayscale-version", "doc", False, "Pod/head", "metadata.annotations[ray.io/kuberay-version]",
     ("v1.6.2", "rayscale-0.1.0"), [("v1.6.2", ABSENT), ("v1.6.2", "v1.6.3"), ("v1.6.2", "")]),
    ("rayscale-version", "doc", False, "Pod/head", USAGE,
     (TAGS, OUR_TAGS), [(TAGS, OUR_TAGS.replace("RayCluster", "RayJob")), (TAGS, ABSENT)]),
    ("recreate-hash-value", "doc", False, "Pod/head", f"metadata.annotations[{HASH}]",
     ("B31QG9DIB6TKCSPNCO9V3UKO91JLLT1V", "9DR27PPDSP0ADBLBBJ9S1FJA6SO6OF02"),
     [("B31QG9DIB6TKCSPNCO9V3UKO91JLLT1V", ABSENT)]),
    ("autoscaler-v2-by-default", "doc", False, "Pod/head", V2,
     (ABSENT, V2_TRUE), [(ABSENT, V2_FALSE), (V2_FALSE, V2_TRUE)]),
    ("spec-valid-condition", "doc", True, "RayCluster", "status.conditions", (ABSENT, SPEC_VALID),
     [(ABSENT, [{**SPEC_VALID[0], "type": "Ready", "status": "True"}])]),
    ("spec-valid-condition", "doc", True, "RayCluster", "status.observedGeneration", (ABSENT, 1),
     [(2, 1)]),
    ("condition-observed-generation", "doc", False, "RayCluster",
     "status.conditions[HeadPodReady].observedGeneration", (ABSENT, 1), [(1, 2)]),
    ("headless-service-cluster-label", "doc", False, "Service/headless", "metadata.labels[ray.io/cluster]",
     (ABSENT, "multi-host"), [("multi-host", "other")]),
    ("redis-cleanup-job-template", LIFECYCLE_DELETE, False, JOB, "spec.template.metadata.generateName",
     ("ft-options-head-", ABSENT), [("ft-options-head-", "ft-options-")]),
    ("redis-cleanup-job-template", LIFECYCLE_DELETE, False, JOB, "spec.template.metadata.ownerReferences",
     (OWNER, ABSENT), [([{**OWNER[0], "kind": "Pod"}], ABSENT), (OWNER, [{**OWNER[0], "uid": "v"}])]),
    ("redis-cleanup-deletions-told", LIFECYCLE_DELETE, False, "Events", "Normal DeletedPod", (ABSENT, 2),
     [(1, ABSENT)]),
    ("unused-auth-secret", "generated:2", False, "Secret/auth-token", "", (SECRET, ABSENT),
     [(ABSENT, SECRET)]),
    ("serve-service-error-keeps-pods", "generated:3", False, "Pod/head", "",
     (ABSENT, {"kind": "Pod", "name": "generated-3-head-<random>"}),
     [({"kind": "Pod", "name": "generated-3-head-<random>"}, ABSENT)]),
]  # fmt: skip


def _unexplained(diffs: list[Difference], refused: bool = False) -> list[Difference]:
    report = runner.classify([("x", refused, diffs)], entries.load_allowlist(), entries.load_known())
    return report.unexplained


@pytest.mark.parametrize(("entry", "doc", "refused", "obj", "path", "explained", "broken"), CASES)
def test_an_entry_explains_its_difference_and_no_broken_copy(
    entry: str, doc: str, refused: bool, obj: str, path: str,
    explained: tuple[Any, Any], broken: list[tuple[Any, Any]],
) -> None:  # fmt: skip
    report = runner.classify(
        [(doc, refused, [Difference(doc, obj, path, *explained)])],
        entries.load_allowlist(),
        entries.load_known(),
    )
    assert list(report.allowed) == [entry]
    for kuberay, rayscale in broken:
        d = Difference(doc, obj, path, kuberay, rayscale)
        assert _unexplained([d], refused) == [d], f"{entry} explains a broken {obj} {path}: {d}"


@pytest.mark.parametrize(
    "d",
    [
        Difference("lifecycle:suspend@suspend", "Events", "Normal DeletedPod", ABSENT, 2),
        Difference("generated:0", "Secret/auth-token", "", {"kind": "Secret", "name": "generated-0"}, ABSENT),
        Difference("sample:x.yaml", "Pod/head", "", ABSENT, {"kind": "Pod", "name": "x-head-<random>"}),
    ],
)
def test_entries_for_some_documents_hold_only_there(d: Difference) -> None:
    assert _unexplained([d]) == [d]


def test_every_allowlist_entry_has_a_broken_case() -> None:
    assert {e.id for e in entries.load_allowlist()} - {c[0] for c in CASES} == {"embedded-autoscaler"}


# ----------------------------------------------------------------------------- embedded-autoscaler

SAMPLE = "ray-cluster.autoscaler.yaml"


@pytest.fixture(scope="module")
def answers() -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        built = oracle.build()
    except OracleError as exc:
        pytest.fail(str(exc), pytrace=False)
    (doc,) = documents.rayclusters(built.samples_dir / SAMPLE, "sample", built.samples_dir)
    (kuberay,) = built.render([doc.body])
    return kuberay, render_rayscale(doc.body)


def _head(answer: dict[str, Any]) -> dict[str, Any]:
    return next(
        o
        for o in answer["objects"]
        if o["kind"] == "Pod" and o["metadata"]["labels"]["ray.io/node-type"] == "head"
    )


def _broken(answers: tuple[dict[str, Any], dict[str, Any]], edit: Any) -> list[Difference]:
    """The unexplained differences once KubeRay's head pod has what `edit` gives it (rayscale's has
    not: as if rayscale dropped it)."""
    kuberay, rayscale = copy.deepcopy(answers[0]), answers[1]
    edit(_head(kuberay)["spec"])
    return _unexplained(compare("x", kuberay, rayscale))


def test_the_autoscaler_entry_explains_kuberays_sidecar(
    answers: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    report = runner.classify(
        [("x", False, compare("x", *answers))], entries.load_allowlist(), entries.load_known()
    )
    assert report.unexplained == []
    assert len(report.allowed["embedded-autoscaler"]) == 7


def _users_service_account(spec: dict[str, Any]) -> None:
    spec["serviceAccountName"] = "my-service-account"


def _users_log_volume(spec: dict[str, Any]) -> None:
    (volume,) = [v for v in spec["volumes"] if v["name"] == "ray-logs"]
    volume["hostPath"] = {"path": "/var/log/ray"}


def _users_log_mount(spec: dict[str, Any]) -> None:
    mounts = spec["containers"][0]["volumeMounts"]
    (mount,) = [m for m in mounts if m["mountPath"] == "/tmp/ray"]
    mount["name"] = "my-logs"


def _users_sidecar(spec: dict[str, Any]) -> None:
    (sidecar,) = [c for c in spec["containers"] if c["name"] == "autoscaler"]
    sidecar.update(args=["my-autoscaler"], image="example.com/my-autoscaler:1")


def _other_field(spec: dict[str, Any]) -> None:
    spec["nodeSelector"] = {"pool": "ray"}


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (_users_service_account, "spec.serviceAccountName"),
        (_users_log_volume, "spec.volumes[ray-logs]"),
        (_users_log_mount, "spec.containers[ray-head].volumeMounts[/tmp/ray]"),
        (_users_sidecar, "spec.containers[autoscaler]"),
        (_other_field, "spec.nodeSelector"),
    ],
)
def test_the_autoscaler_entry_does_not_explain_a_dropped_user_field(
    answers: tuple[dict[str, Any], dict[str, Any]], edit: Any, path: str
) -> None:
    assert [(d.object, d.path) for d in _broken(answers, edit)] == [("Pod/head", path)]
