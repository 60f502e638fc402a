"""What rayscale creates for a RayCluster, judged by KubeRay's own controller (the oracle).

Every RayCluster of KubeRay's samples, of examples/ and of tests/kuberay/cases/ is rendered by
both, and every step of the lifecycle scripts (tests/kuberay/lifecycle.py) is reconciled by both;
every difference must be deliberate (allowlist.yaml) or known (known.yaml), and every entry of both
must still explain something. ``make kuberay-diff`` runs this (``make test`` does too);
``python -m tests.kuberay`` prints the same report.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.kuberay import documents, entries, generated, lifecycle, runner
from tests.kuberay.compare import ABSENT, Difference, compare, normalise
from tests.kuberay.oracle import Oracle
from tests.kuberay.rayscale_side import render as render_rayscale

DOCS = documents.ROOT / "docs" / "controller.md"


@pytest.fixture(scope="module")
def rendered(built: Oracle) -> runner.Rendered:
    return runner.render_all(built)


@pytest.fixture(scope="module")
def judged(built: Oracle) -> lifecycle.Judged:
    return lifecycle.run_all(built)


@pytest.fixture(scope="module")
def report(rendered: runner.Rendered, judged: lifecycle.Judged) -> runner.Report:
    compared = runner.compare_all(rendered) + lifecycle.compare_all(judged)
    return runner.classify(compared, entries.load_allowlist(), entries.load_known())


def _answers(rendered: runner.Rendered, doc_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    for doc, kuberay, rayscale in rendered:
        if doc.id == doc_id:
            return kuberay, rayscale
    raise AssertionError(f"{doc_id} was not rendered")


# ----------------------------------------------------------------------------- the judge


def test_every_difference_is_deliberate_or_known(report: runner.Report) -> None:
    if report.unexplained:
        pytest.fail(
            "rayscale differs from KubeRay where neither tests/kuberay/allowlist.yaml nor known.yaml "
            "says so:\n" + report.summary(),
            pytrace=False,
        )


def test_no_entry_is_stale(report: runner.Report) -> None:
    if report.stale:
        pytest.fail(
            "entries that no longer explain any difference (fixed? remove them):\n" + "\n".join(report.stale),
            pytrace=False,
        )


def test_docs_show_the_lists() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert entries.docs_section(text, entries.load_allowlist(), entries.load_known()) == text, (
        "docs/controller.md does not show tests/kuberay/allowlist.yaml and known.yaml; run "
        "`python -m tests.kuberay --write-docs`"
    )


# ----------------------------------------------------------------------------- what is rendered


def test_every_sample_example_and_case_is_rendered(built: Oracle, rendered: runner.Rendered) -> None:
    ids = [doc.id for doc, _, _ in rendered]
    samples = [i for i in ids if i.startswith("sample:")]
    files = sorted(built.samples_dir.rglob("*.yaml"))
    declared = sum(p.read_text(encoding="utf-8").count("\nkind: RayCluster\n") for p in files)
    assert len(samples) == declared >= 30
    assert {"example:raycluster-basic.yaml", "example:raycluster-multihost-tpu.yaml"} <= set(ids)
    cases = {f"case:{p.name}" for p in documents.CASES.glob("*.yaml")}
    assert cases <= set(ids)
    assert len(cases) >= 12


def _errors(answer: dict[str, Any]) -> set[str]:
    return {e.split(": ", 1)[-1] for e in answer["errors"]}


def test_both_sides_settle_without_errors(rendered: runner.Rendered) -> None:
    """Reconciling stops changing anything, and neither controller reports an error (the oracle's
    stand-ins for the API server give KubeRay what it reads back), but for a generated RayCluster
    both find fault with in the same words."""
    problems = [
        f"{doc.id} {side}: {error}"
        for doc, kuberay, rayscale in rendered
        if not (doc.id.startswith("generated:") and _errors(kuberay) == _errors(rayscale))
        or any("still changing" in e for e in kuberay["errors"] + rayscale["errors"])
        for side, answer in (("kuberay", kuberay), ("rayscale", rayscale))
        for error in answer["errors"]
    ]
    assert problems == []


def test_generated_clusters_are_judged_and_the_same_every_run(rendered: runner.Rendered) -> None:
    ids = [doc.id for doc, _, _ in rendered if doc.id.startswith("generated:")]
    assert ids == [f"generated:{i}" for i in range(generated.COUNT)]
    assert generated.load() == generated.load()
    accepted = [doc.id for doc, kuberay, _ in rendered if doc.id in ids and kuberay["invalid"] is None]
    assert len(accepted) >= generated.COUNT // 2  # mostly clusters that run, not refusals


def test_oracle_renders_what_kuberay_creates(rendered: runner.Rendered) -> None:
    """Known KubeRay behaviour, read off the oracle's answer for examples/raycluster-basic.yaml."""
    kuberay, _ = _answers(rendered, "example:raycluster-basic.yaml")
    assert kuberay["invalid"] is None
    kinds = sorted(
        (o["kind"], o["metadata"].get("generateName", o["metadata"]["name"])) for o in kuberay["objects"]
    )
    assert kinds == [
        ("Pod", "raycluster-basic-cpu-worker-"),
        ("Pod", "raycluster-basic-cpu-worker-"),
        ("Pod", "raycluster-basic-head-"),
        ("Service", "raycluster-basic-head-svc"),
    ]
    workers = [
        o for o in kuberay["objects"] if o["metadata"].get("labels", {}).get("ray.io/node-type") == "worker"
    ]
    assert sorted(w["metadata"]["labels"]["ray.io/worker-group-replica-index"] for w in workers) == ["0", "1"]
    env = {e["name"]: e.get("value") for e in workers[0]["spec"]["containers"][0]["env"]}
    assert env["RAY_ADDRESS"] == "raycluster-basic-head-svc.default.svc.cluster.local:6379"
    assert kuberay["cluster"]["status"]["desiredWorkerReplicas"] == 2


def test_oracle_reports_kuberays_validation(rendered: runner.Rendered) -> None:
    kuberay, rayscale = _answers(rendered, "case:invalid-replicas.yaml")
    assert kuberay["invalid"]["reason"] == "InvalidRayClusterSpec"
    assert "minReplicas 3 greater than maxReplicas 1" in kuberay["invalid"]["message"]
    assert kuberay["objects"] == []
    assert rayscale["invalid"]["reason"] == "InvalidRayClusterSpec"


def test_oracle_multi_host_replicas(rendered: runner.Rendered) -> None:
    kuberay, _ = _answers(rendered, "case:multi-host.yaml")
    objects, _ = normalise(kuberay)
    slice_pods = sorted(k for k in objects if k.startswith("Pod/worker/slice/"))
    assert slice_pods == [f"Pod/worker/slice/{r}/{h}" for r in range(2) for h in range(3)]
    assert "Service/headless" in objects


# ----------------------------------------------------------------------------- the harness can fail


def test_compare_catches_changed_missing_and_extra_fields(rendered: runner.Rendered) -> None:
    kuberay, rayscale = _answers(rendered, "example:raycluster-basic.yaml")
    before = {str(d) for d in compare("x", kuberay, rayscale)}
    worse = copy.deepcopy(rayscale)
    pods = [o for o in worse["objects"] if o["kind"] == "Pod"]
    head = next(p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "head")
    container = head["spec"]["containers"][0]
    next(e for e in container["env"] if e["name"] == "RAY_PORT")["value"] = "6380"
    del head["metadata"]["labels"]["ray.io/is-ray-node"]
    head["spec"].setdefault("volumes", []).append({"name": "extra", "emptyDir": {}})
    container["env"].reverse()
    new = [d for d in compare("x", kuberay, worse) if str(d) not in before]
    assert sorted((d.object, d.path) for d in new) == [
        ("Pod/head", "metadata.labels[ray.io/is-ray-node]"),
        ("Pod/head", "spec.containers[ray-head].env(order)"),
        ("Pod/head", "spec.containers[ray-head].env[RAY_PORT].value"),
        ("Pod/head", "spec.volumes[extra]"),
    ]
    label = next(d for d in new if d.path.startswith("metadata.labels"))
    assert (label.kuberay, label.rayscale) == ("yes", ABSENT)
    report = runner.classify([("x", False, new)], entries.load_allowlist(), entries.load_known())
    assert len(report.unexplained) == 4


def test_normalisation_keeps_real_differences(rendered: runner.Rendered) -> None:
    kuberay, rayscale = _answers(rendered, "example:raycluster-basic.yaml")
    worse = copy.deepcopy(rayscale)
    pods = [o for o in worse["objects"] if o["kind"] == "Pod"]
    pods[0]["metadata"]["name"] = "fixed-name"  # not generateName + 5 characters
    pods[1]["metadata"]["generateName"] = "other-"
    worker = next(p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker")
    script = worker["spec"]["initContainers"][0]["args"]
    script[0] = script[0].replace("sleep 5", "sleep 5; exit 1")
    paths = {(d.object, d.path) for d in compare("x", kuberay, worse)}
    assert any(p.endswith("metadata.name") for _, p in paths)
    assert any(p.endswith("metadata.generateName") for _, p in paths)
    assert any("initContainers[wait-gcs-ready].args[0]" in p for _, p in paths)


def test_unused_entries_are_stale() -> None:
    diff = Difference("case:x.yaml", "Pod/head", "spec.nodeName", "a", "b")
    used = entries.Entry("used", "r", (entries.Pattern("Pod/head", "spec.nodeName"),), ("case:x.yaml",))
    unused = entries.Entry(
        "unused", "r", (entries.Pattern("Pod/head", "spec.nodeName"), entries.Pattern("Pod/head", "spec.x"))
    )
    report = runner.classify([("case:x.yaml", False, [diff])], [], [used, unused])
    assert report.known == {"used": [diff]}
    assert report.unexplained == []
    assert report.stale == [
        "unused: pattern Pod/head: spec.nodeName",
        "unused: pattern Pod/head: spec.x",
        "unused: where *",
    ]


def test_globs() -> None:
    assert entries.glob_match("spec.containers[*].env[RAY_PORT]", "spec.containers[ray-head].env[RAY_PORT]")
    assert entries.glob_match("metadata.annotations[*]", "metadata.annotations[ray.io/ft-enabled]")
    assert not entries.glob_match("spec.*", "spec.containers[ray-head]")
    assert entries.glob_match("spec.**", "spec.containers[ray-head].env[X]")
    assert entries.glob_match('"*ulimit -n 65536;"', '"echo a.b && ulimit -n 65536;"', value=True)


def test_rayscale_side_is_rayscales_controller() -> None:
    """The rayscale side honours rayscale's own CRD defaults and refusals."""
    doc = copy.deepcopy(
        documents.rayclusters(documents.EXAMPLES / "raycluster-basic.yaml", "e", documents.EXAMPLES)[0]
    )
    del doc.body["spec"]["workerGroupSpecs"][0]["minReplicas"]  # defaulted to 0 by rayscale's CRD
    answer = render_rayscale(doc.body)
    assert answer["invalid"] is None
    assert len([o for o in answer["objects"] if o["kind"] == "Pod"]) == 3
    doc.body["metadata"]["name"] = "x" * 60
    assert render_rayscale(doc.body)["invalid"]["reason"] == "InvalidRayClusterMetadata"


# ----------------------------------------------------------------------------- --mode controller

# Entries about rayscale's embedded autoscaler: in --mode controller the head runs Ray's own.
EMBEDDED_ONLY = {"embedded-autoscaler", "autoscaler-v2-by-default"}


def test_controller_mode_runs_rays_autoscaler_as_kuberay_does(rendered: runner.Rendered) -> None:
    """Every autoscaling RayCluster rendered as `rayscale run --mode controller` renders it: the
    autoscaler sidecar, its log volume, ServiceAccount, Role and RoleBinding as KubeRay makes them."""
    autoscaling = [
        (d, k)
        for d, k, _ in rendered
        if (d.body.get("spec") or {}).get("enableInTreeAutoscaling") and k["invalid"] is None
        and any("-head-" in str(o["metadata"]) for o in k["objects"] if o["kind"] == "Pod")
    ]  # fmt: skip
    assert len(autoscaling) >= 5, "too few autoscaling documents to judge"
    compared = []
    for doc, kuberay in autoscaling:
        mine = render_rayscale(doc.body, sidecar=True)
        head = next(o for o in mine["objects"] if o["kind"] == "Pod" and "-head-" in str(o["metadata"]))
        assert "autoscaler" in [c["name"] for c in head["spec"]["containers"]], doc.id
        refused = bool(kuberay.get("invalid")) and bool(mine.get("invalid"))
        compared.append((doc.id, refused, compare(doc.id, kuberay, mine)))
    allowlist = [e for e in entries.load_allowlist() if e.id not in EMBEDDED_ONLY]
    report = runner.classify(compared, allowlist, entries.load_known())
    if report.unexplained:
        pytest.fail("--mode controller differs from KubeRay:\n" + report.summary(), pytrace=False)
