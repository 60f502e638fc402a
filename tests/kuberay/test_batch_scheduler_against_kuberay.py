"""rayscale's ``--batch-scheduler`` judged by KubeRay's own batch scheduler plugins (the oracle with
``-batch-scheduler``, tools/kuberay-oracle/batch.go).

Every RayCluster of KubeRay's samples, of examples/, of tests/kuberay/cases/ and of
tests/kuberay/batch_cases/ (scheduler labels and annotations) is rendered by both, once for each of
KubeRay's four batch schedulers: the PodGroups and the pods (schedulerName, labels, annotations)
must match, or differ as allowlist.yaml, batch_allowlist.yaml or known.yaml says.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rayscale.batch.registry import NAMES
from tests.kuberay import batch_allowlist, documents, entries, runner
from tests.kuberay.compare import ABSENT, Difference, normalise
from tests.kuberay.oracle import Oracle
from tests.kuberay.rayscale_side import render as render_rayscale

CASES = Path(__file__).resolve().parent / "batch_cases"
Runs = dict[str, runner.Rendered]


def _documents(built: Oracle) -> list[documents.Document]:
    docs = documents.load(built.samples_dir)
    for path in sorted(CASES.glob("*.yaml")):
        docs += documents.rayclusters(path, "batch-case", CASES)
    return docs


@pytest.fixture(scope="module")
def runs(built: Oracle) -> Runs:
    docs = _documents(built)
    out: Runs = {}
    for name in NAMES:
        answers = built.render([d.body for d in docs], batch=name)
        out[name] = [(d, a, render_rayscale(d.body, batch=name)) for d, a in zip(docs, answers, strict=True)]
    return out


@pytest.fixture(scope="module")
def reports(runs: Runs) -> dict[str, runner.Report]:
    extra = batch_allowlist.load()
    allowlist, known = entries.load_allowlist(), entries.load_known()
    return {
        name: runner.classify(runner.compare_all(rendered), allowlist + extra.get(name, []), known)
        for name, rendered in runs.items()
    }


def _answer(rendered: runner.Rendered, doc_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    for doc, kuberay, rayscale in rendered:
        if doc.id == doc_id:
            return kuberay, rayscale
    raise AssertionError(f"{doc_id} was not rendered")


def _objects(answer: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [o for o in answer["objects"] if o["kind"] == kind]


def test_every_difference_is_deliberate_or_known(reports: dict[str, runner.Report]) -> None:
    failing = {name: r for name, r in reports.items() if r.unexplained}
    if failing:
        text = "\n".join(f"--batch-scheduler {name}:\n{r.summary()}" for name, r in failing.items())
        pytest.fail("rayscale differs from KubeRay's batch scheduler plugins:\n" + text, pytrace=False)


def test_no_batch_entry_is_stale(reports: dict[str, runner.Report]) -> None:
    """Each batch_allowlist.yaml pattern explains a difference under one of its schedulers."""
    mine = {e.id for entries_ in batch_allowlist.load().values() for e in entries_}
    stale_everywhere = set.intersection(
        *({s for s in r.stale if s.split(":", 1)[0] in mine} for r in reports.values())
    )
    assert not stale_everywhere, sorted(stale_everywhere)


def test_requests_from_limits_are_the_limits(runs: Runs, reports: dict[str, runner.Report]) -> None:
    """requests-from-limits-before-defaulting (batch_allowlist.yaml) explains only requests that the
    API server's defaulting gives rayscale's pod too: its container's limit of that resource."""
    for name, report in reports.items():
        for d in report.allowed.get("requests-from-limits-before-defaulting", []):
            _, rayscale = _answer(runs[name], d.document)
            objects, _ = normalise(rayscale)
            container_name, resource = re.findall(r"\[([^\]]*)\]", d.path)
            (container,) = [c for c in objects[d.object]["spec"]["containers"] if c["name"] == container_name]
            assert container["resources"]["limits"][resource] == d.kuberay, (name, d)


def test_every_document_is_judged_under_every_scheduler(runs: Runs) -> None:
    assert sorted(runs) == sorted(NAMES)
    assert len(NAMES) == 4
    for rendered in runs.values():
        ids = [doc.id for doc, _, _ in rendered]
        assert len([i for i in ids if i.startswith("sample:")]) >= 30
        assert {f"batch-case:{p.name}" for p in CASES.glob("*.yaml")} <= set(ids)


def _accepted(rendered: runner.Rendered) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    return [(d.id, k, r) for d, k, r in rendered if k["invalid"] is None and _objects(k, "Pod")]


@pytest.mark.parametrize("name", NAMES)
def test_every_pod_goes_to_the_scheduler_on_both_sides(runs: Runs, name: str) -> None:
    """The oracle did run KubeRay's plugin (its pods name the scheduler), and so did rayscale."""
    accepted = _accepted(runs[name])
    assert len(accepted) >= 30
    wanted = {"scheduler-plugins": "scheduler-plugins-scheduler"}.get(name, name)
    for doc_id, kuberay, rayscale in accepted:
        for side, answer in (("kuberay", kuberay), ("rayscale", rayscale)):
            names = {p["spec"].get("schedulerName") for p in _objects(answer, "Pod")}
            assert names == {wanted}, (doc_id, side)


def test_volcano_podgroups(runs: Runs) -> None:
    """Every accepted cluster has its PodGroup ray-<name>-pg on both sides (not a RayJob's)."""
    for doc_id, kuberay, rayscale in _accepted(runs["volcano"]):
        expected = [] if doc_id == "batch-case:rayjob-cluster.yaml" else [f"ray-{kuberay['name']}-pg"]
        for answer in (kuberay, rayscale):
            assert [g["metadata"]["name"] for g in _objects(answer, "PodGroup")] == expected, doc_id
    kuberay, rayscale = _answer(runs["volcano"], "batch-case:volcano-queue.yaml")
    (group,) = _objects(kuberay, "PodGroup")
    assert group["spec"]["queue"] == "team-a"
    assert group["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    assert _objects(rayscale, "PodGroup")[0]["spec"]["minMember"] == group["spec"]["minMember"]


def test_a_bad_tier_makes_no_pod_on_either_side(runs: Runs) -> None:
    kuberay, rayscale = _answer(runs["volcano"], "batch-case:volcano-bad-tier.yaml")
    for answer in (kuberay, rayscale):
        assert _objects(answer, "Pod") == []
        assert _objects(answer, "PodGroup") == []
        assert any("failed to convert volcano.sh/network-topology-highest-tier-allowed" in e
                   for e in answer["errors"]), answer["errors"]  # fmt: skip


def test_gangs_of_scheduler_plugins_and_yunikorn(runs: Runs) -> None:
    kuberay, rayscale = _answer(runs["scheduler-plugins"], "batch-case:gang.yaml")
    for answer in (kuberay, rayscale):
        assert [g["metadata"]["name"] for g in _objects(answer, "PodGroup")] == ["gang"]
        labels = {p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] for p in _objects(answer, "Pod")}
        assert labels == {"gang"}
    kuberay, rayscale = _answer(runs["yunikorn"], "batch-case:gang.yaml")
    texts = {
        side: {p["metadata"]["annotations"]["yunikorn.apache.org/task-groups"] for p in _objects(a, "Pod")}
        for side, a in (("kuberay", kuberay), ("rayscale", rayscale))
    }
    assert len(texts["kuberay"]) == 1
    assert texts["rayscale"] == texts["kuberay"]


def test_the_batch_entry_is_narrow() -> None:
    """It explains a request rayscale's pod lacks, never another value, a limit or an init container."""
    loaded = batch_allowlist.load()
    assert "kai-scheduler" not in loaded  # KAI's plugin sums no resources
    (entry,) = loaded["volcano"]
    requests = "spec.containers[ray-head].resources.requests[cpu]"

    def explains(path: str, kuberay: Any, rayscale: Any) -> bool:
        return entry.pattern_for(Difference("doc", "Pod/head", path, kuberay, rayscale), False) is not None

    assert explains(requests, "1", ABSENT)
    assert not explains(requests, "1", "2")
    assert not explains(requests, ABSENT, "1")
    assert not explains("spec.containers[ray-head].resources.limits[cpu]", "1", ABSENT)
    assert not explains("spec.initContainers[init].resources.requests[cpu]", "1", ABSENT)
