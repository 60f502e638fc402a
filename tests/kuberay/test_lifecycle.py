"""The lifecycle scripts (tests/kuberay/lifecycle.py) on both sides: what each step did, read off
KubeRay's answers and rayscale's, so that the judge in test_against_kuberay.py compares real
lifecycles (pods replaced, deleted by name, suspended, recreated, cleaned up) and not empty ones."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kuberay import lifecycle, oracle
from tests.kuberay.compare import normalise
from tests.kuberay.oracle import Oracle, OracleError

STEPS = 16


@pytest.fixture(scope="module")
def judged() -> lifecycle.Judged:
    try:
        built: Oracle = oracle.build()
    except OracleError as exc:
        pytest.fail(str(exc), pytrace=False)
    return lifecycle.run_all(built)


def _step(judged: lifecycle.Judged, doc: str) -> tuple[dict[str, Any], dict[str, Any]]:
    for name, kuberay, rayscale in judged:
        if name == f"lifecycle:{doc}":
            return kuberay, rayscale
    raise AssertionError(f"no step {doc}")


def _pods(answer: dict[str, Any]) -> list[str]:
    objects, _ = normalise(answer)
    return sorted(k for k in objects if k.startswith("Pod/"))


def _names(answer: dict[str, Any]) -> set[str]:
    return {o["metadata"]["name"] for o in answer["objects"] if o["kind"] == "Pod"}


def _reasons(answer: dict[str, Any]) -> set[str]:
    return {e.split(" ", 2)[1] for e in answer["events"]}


def test_every_script_step_is_judged(judged: lifecycle.Judged) -> None:
    assert len(judged) == sum(len(s.steps) for s in lifecycle.scripts()) == STEPS


def test_rayscale_settles_without_errors_at_every_step(judged: lifecycle.Judged) -> None:
    problems = [f"{doc}: {e}" for doc, _, rayscale in judged for e in rayscale["errors"]]
    problems += [
        f"{doc} (KubeRay): {e}" for doc, k, _ in judged for e in k["errors"] if "still changing" in e
    ]
    assert problems == []


def test_both_sides_hold_the_same_pods_by_name(judged: lifecycle.Judged) -> None:
    """Pod names are generated alike on both sides (lifecycle.go, lifecycle_side.py), so a choice
    by name (which surplus pod goes) is compared, not only how many."""
    assert [(doc, _names(k)) for doc, k, _ in judged] == [(doc, _names(r)) for doc, _, r in judged]


def test_scale_steps(judged: lifecycle.Judged) -> None:
    kuberay, _ = _step(judged, "scale@scale-up")
    assert len(_pods(kuberay)) == 1 + 3 * 3 + 3
    kuberay, rayscale = _step(judged, "scale@workers-to-delete-multi-host")
    slices = [p for p in _pods(kuberay) if p.startswith("Pod/worker/slice/")]
    assert slices == [f"Pod/worker/slice/{r}/{h}" for r in (0, 2) for h in range(3)]
    assert _reasons(kuberay) == _reasons(rayscale) == {"DeletedWorkerPod"}
    before, _ = _step(judged, "scale@workers-to-delete-multi-host")
    kuberay, _ = _step(judged, "scale@scale-down")
    cpu_before = sorted(n for n in _names(before) if "-cpu-" in n)
    assert sorted(n for n in _names(kuberay) if "-cpu-" in n) == cpu_before[2:]  # the first by name went


def test_suspend_and_resume(judged: lifecycle.Judged) -> None:
    kuberay, rayscale = _step(judged, "suspend@suspend")
    assert _pods(kuberay) == _pods(rayscale) == []
    assert kuberay["cluster"]["status"]["state"] == "suspended"
    assert _reasons(kuberay) == _reasons(rayscale) == {"DeletedPod"}
    kuberay, _ = _step(judged, "suspend@resume")
    assert len(_pods(kuberay)) == 3
    kuberay, rayscale = _step(judged, "suspend-group@suspend-group")
    assert _pods(kuberay) == _pods(rayscale) == ["Pod/head"]
    assert _reasons(kuberay) == _reasons(rayscale) == {"DeletedWorkerPod"}


def test_recreate_upgrade(judged: lifecycle.Judged) -> None:
    created, _ = _step(judged, "recreate@create")
    kuberay, rayscale = _step(judged, "recreate@head-image")
    assert not _names(kuberay) & _names(created)  # every pod was replaced
    assert _names(kuberay) == _names(rayscale)
    assert "DeletedPod" in _reasons(kuberay) & _reasons(rayscale)
    again, _ = _step(judged, "recreate@same-again")
    assert _names(again) == _names(kuberay)  # the same spec again replaces nothing


def test_deletion_with_gcs_fault_tolerance(judged: lifecycle.Judged) -> None:
    kuberay, rayscale = _step(judged, "gcs-ft-delete@create")
    assert kuberay["cluster"]["metadata"]["finalizers"] == ["ray.io/gcs-ft-redis-cleanup-finalizer"]
    kuberay, rayscale = _step(judged, "gcs-ft-delete@delete")
    assert (kuberay["cluster"], rayscale["cluster"]) == (None, None)  # the finalizer went: deleted
    assert _pods(kuberay) == _pods(rayscale) == []
    assert "Job/ft-options-redis-cleanup" in normalise(rayscale)[0]
    assert "CreatedRedisCleanupJob" in _reasons(kuberay) & _reasons(rayscale)
