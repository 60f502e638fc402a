"""rayscale's RayJob controller against KubeRay v1.6.2's own RayJob reconciler, step by step, field
by field.

Each scripted case of tests/kuberay/rayjob_cases/ runs through the oracle (KubeRay's reconciler,
`rayjob_oracle`) and through rayscale's plan in the same in-memory world (tests.support.rayjob_sim).
After every step the two are compared whole (tests/kuberay/rayjob_compare.py): the RayJob's status
(every field, messages, times on the virtual clock), finalizers, requeue and failure; every
RayCluster, submitter Job and RayJob head Service (metadata, labels, annotations, owner references,
spec); every Event's reason, type and message; every call to Ray with the submit's address and
body. A difference fails the case unless an entry of tests/kuberay/rayjob_allowlist.yaml explains
it (deliberate, narrow, with its reason); an entry that explains nothing fails too. The self-tests
at the end plant differences and stale entries to show the judge fails both ways.
"""

from __future__ import annotations

import copy
import functools
from collections import Counter
from typing import Any

import pytest

from rayscale.api.crd import object_schema
from rayscale.api.registry import RAYJOB
from tests.kuberay import rayjob_allowlist, rayjob_compare, rayjob_oracle
from tests.kuberay.compare import Difference
from tests.kuberay.entries import Entry, Pattern
from tests.kuberay.rayscale_side import structural_default
from tests.support.rayjob_sim import run_case

EPOCH_MS = 1_767_225_600_000  # the simulated world's first "now" (2026-01-01T00:00:00Z)


def _ours(case: dict[str, Any]) -> dict[str, Any]:
    """The case as rayscale's side runs it: the RayJob as rayscale's CRD stores it (its defaults, as
    the oracle applies KubeRay's), and Ray's job times as Unix ms (the oracle takes milliseconds
    before now)."""
    case = copy.deepcopy(case)
    structural_default(case["rayjob"], object_schema(RAYJOB))
    now_ms = EPOCH_MS
    for step in case.get("steps") or []:
        now_ms += int(float(step.get("age") or 0) * 1000)
        info = step.get("job_info")
        for key in ("startTime", "endTime") if info else ():
            if info.get(key) and info[key] < 1e12:
                info[key] = int(now_ms - info[key])
    return run_case(case)


@functools.cache
def _cases() -> list[rayjob_oracle.ScriptedCase]:
    return rayjob_oracle.load_cases()


@functools.cache
def _kuberay() -> list[dict[str, Any]]:
    return rayjob_oracle.run_rayjob_cases([copy.deepcopy(c.case) for c in _cases()])


@functools.cache
def _answers() -> dict[str, tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]]:
    """Case file stem -> (the case, KubeRay's steps, rayscale's steps)."""
    return {
        c.path.stem: (c.case, theirs["steps"], _ours(c.case)["steps"])
        for c, theirs in zip(_cases(), _kuberay(), strict=True)
    }


@functools.cache
def differences() -> dict[str, list[Difference]]:
    out = {}
    for stem, (case, theirs, ours) in _answers().items():
        assert len(ours) == len(theirs), stem
        out[stem] = rayjob_compare.compare_case(case, theirs, ours)
    return out


def _names() -> list[str]:
    return sorted(p.stem for p in rayjob_oracle.CASES_DIR.glob("*.yaml"))


def _shown(differences: list[Difference]) -> str:
    return "\n".join(f"{d.document} {d}" for d in differences)


@pytest.mark.parametrize("name", _names())
def test_rayjob_steps_as_kuberay(name: str) -> None:
    verdict = rayjob_allowlist.judge(differences()[name], rayjob_allowlist.load())
    assert not verdict.unexplained, "\n" + _shown(verdict.unexplained)


def test_every_allowlist_entry_explains_a_difference() -> None:
    allowlist = rayjob_allowlist.load()
    verdict = rayjob_allowlist.judge((d for ds in differences().values() for d in ds), allowlist)
    assert verdict.stale(allowlist) == []


def test_allowlist_entries_are_narrow() -> None:
    assert [p for e in rayjob_allowlist.load() for p in rayjob_allowlist.too_broad(e)] == []


def tally() -> dict[str, int]:
    """The differential's figures: steps, fields compared, differing, allowlisted."""
    allowlist = rayjob_allowlist.load()
    counts: Counter[str] = Counter()
    for stem, (case, theirs, ours) in _answers().items():
        counts["cases"] += 1
        counts["steps"] += len(theirs)
        counts["fields"] += rayjob_compare.fields(case, theirs, ours)
        verdict = rayjob_allowlist.judge(differences()[stem], allowlist)
        counts["allowlisted"] += sum(verdict.used.values())
        counts["unexplained"] += len(verdict.unexplained)
    counts["agreeing"] = counts["fields"] - counts["allowlisted"] - counts["unexplained"]
    return dict(counts)


def test_the_tally_adds_up() -> None:
    figures = tally()
    assert figures["steps"] >= 169
    assert figures["fields"] > 10 * figures["steps"]
    assert figures["unexplained"] == 0
    assert figures["agreeing"] > 0


# ----------------------------------------------------------------------------- the judge fails


def _planted(mutate: Any) -> list[Difference]:
    """The differences of k8sjob-happy-path once ``mutate`` changed rayscale's steps."""
    case, theirs, ours = _answers()["k8sjob-happy-path"]
    ours = copy.deepcopy(ours)
    mutate(ours)
    verdict = rayjob_allowlist.judge(rayjob_compare.compare_case(case, theirs, ours), rayjob_allowlist.load())
    return verdict.unexplained


def _job(steps: list[dict[str, Any]], i: int) -> dict[str, Any]:
    (job,) = [o for o in steps[i]["objects"] if o["kind"] == "Job"]
    found: dict[str, Any] = job
    return found


def test_a_planted_difference_is_caught() -> None:
    def env(steps: list[dict[str, Any]]) -> None:
        container = _job(steps, 2)["spec"]["template"]["spec"]["containers"][0]
        container["env"][1]["value"] = "elsewhere:8265"

    def message(steps: list[dict[str, Any]]) -> None:
        steps[4]["events"].append("Warning Planted a planted Event")
        steps[4]["status"]["message"] = "planted"

    def label(steps: list[dict[str, Any]]) -> None:
        _job(steps, 2)["metadata"]["labels"]["planted"] = "yes"

    assert _planted(lambda steps: None) == []
    (d,) = _planted(env)
    assert (d.document, d.object) == ("k8sjob-happy-path#2", "Job/rayjob-sample-shutdown")
    assert d.path == "spec.template.spec.containers[ray-job-submitter].env[RAY_DASHBOARD_ADDRESS].value"
    assert [(d.object, d.path) for d in _planted(message)] == [
        ("RayJob", "status.message"),
        ("Event/Planted", ""),
    ]
    assert [d.path for d in _planted(label)] == ["metadata.labels.planted"]


def test_generated_names_are_mapped_not_dropped() -> None:
    """The job id and the cluster name are random on both sides, but one used for the other is a
    difference."""

    def swap(steps: list[dict[str, Any]]) -> None:
        status = steps[3]["status"]
        status["jobId"], status["rayClusterName"] = status["rayClusterName"], status["jobId"]

    found = {d.path for d in _planted(swap) if d.document == "k8sjob-happy-path#3"}
    assert {"status.jobId", "status.rayClusterName"} <= found


def test_a_stale_or_broad_entry_fails() -> None:
    stale = Entry("stale", "explains nothing", (Pattern("RayJob", "status.nothing", "<absent>", '"x"'),))
    verdict = rayjob_allowlist.judge(
        (d for ds in differences().values() for d in ds), [*rayjob_allowlist.load(), stale]
    )
    assert verdict.stale([stale]) == ["stale"]
    broad = Entry("broad", "too broad", (Pattern("RayCluster/*", "**"),))
    assert len(rayjob_allowlist.too_broad(broad)) == 3  # **, any field anywhere, no value pinned


_K_YAML = "failed to unmarshal RuntimeEnvYAML: pip: [x: error converting YAML to JSON: yaml: line 1: oops"
_R_YAML = "failed to unmarshal RuntimeEnvYAML: pip: [x: expected ',' in line 1, column 6"
_REQUEST = {
    "apiVersion": "rayscale.io/v1alpha1",
    "kind": "RayResourceRequest",
    "metadata": {"labels": {"ray.io/originated-from-crd": "RayJob"}, "name": "x-<2>-demand"},
}
_ABSENT = rayjob_compare.ABSENT
# (entry, document, object, path, explained (kuberay, rayscale), broken: [(document, kuberay, rayscale)])
NARROW: list[tuple[str, str, str, str, tuple[Any, Any], list[tuple[str, Any, Any]]]] = [
    ("worker-group-priority", "c#1", "RayCluster/x-<1>", "spec.workerGroupSpecs[0].priority", (_ABSENT, 0),
     [("c#1", _ABSENT, 5), ("c#1", 1, 0)]),
    ("runtime-env-yaml-parse-error", "c#0", "RayJob", "status.message", (_K_YAML, _R_YAML),
     [("c#0", _K_YAML, "failed to unmarshal RuntimeEnvYAML: x"), ("c#0", _ABSENT, _R_YAML)]),
    ("delete-workers-with-autoscaling", "deletion-rules-autoscaling#0", "RayJob",
     "status.jobDeploymentStatus", ("ValidationFailed", "Initializing"),
     [("deletion-rules#0", "ValidationFailed", "Initializing"),
      ("deletion-rules-autoscaling#0", "ValidationFailed", "Running")]),
    ("entrypoint-resources-checked-up-front", "entrypoint-resources-not-json#0", "RayJob",
     "status.jobDeploymentStatus", ("Initializing", "ValidationFailed"),
     [("http-mode#0", "Initializing", "ValidationFailed"),
      ("entrypoint-resources-not-json#0", "Initializing", "Failed")]),
    ("job-demand-resource-request", "demand-autoscaled-resources#1", "RayResourceRequest/x-<2>-demand", "",
     (_ABSENT, _REQUEST),
     [("k8sjob-happy-path#1", _ABSENT, _REQUEST),
      ("demand-autoscaled-resources#1", _ABSENT, {**_REQUEST, "kind": "RayCluster"})]),
]  # fmt: skip


@pytest.mark.parametrize("entry", [n[0] for n in NARROW])
def test_an_entry_fails_a_broken_copy(entry: str) -> None:
    """Each entry explains what rayscale does on purpose, not the same fields broken otherwise."""
    (_, document, obj, path, (kuberay, rayscale), broken) = next(n for n in NARROW if n[0] == entry)
    allowlist = rayjob_allowlist.load()
    verdict = rayjob_allowlist.judge([Difference(document, obj, path, kuberay, rayscale)], allowlist)
    assert (verdict.unexplained, dict(verdict.used)) == ([], {entry: 1})
    wrong = [Difference(doc, obj, path, a, b) for doc, a, b in broken]
    assert rayjob_allowlist.judge(wrong, allowlist).unexplained == wrong


def test_every_entry_is_checked_narrow() -> None:
    assert sorted(n[0] for n in NARROW) == sorted(e.id for e in rayjob_allowlist.load())
