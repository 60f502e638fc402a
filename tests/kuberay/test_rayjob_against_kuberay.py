"""rayscale's RayJob state machine against KubeRay v1.6.2's own RayJob reconciler, step by step.

Each scripted case of tests/kuberay/rayjob_cases/ runs through the oracle (KubeRay's reconciler,
`rayjob_oracle`) and through rayscale's plan in the same in-memory world (tests.support.rayjob_sim).
After every step both must agree on: the deployment status, Ray's job status, the reason, the
failed and succeeded counts, the finalizers, the kinds of objects made for the RayJob (RayCluster,
submitter Job, the RayJob's head Service), the Event reasons, the calls to Ray (submit, stop; the
oracle's status reads are rayscale's GCS reads), and whether the step failed.

Not compared yet: the whole status (messages, times), the objects' contents.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest

from tests.kuberay import rayjob_oracle
from tests.support.rayjob_sim import run_case

EPOCH_MS = 1_767_225_600_000  # the simulated world's "now" (2026-01-01T00:00:00Z)
FACTS = (
    "jobDeploymentStatus",
    "jobStatus",
    "reason",
    "failed",
    "succeeded",
    "finalizers",
    "objects",
    "events",
    "calls",
    "error",
)


def _ours(case: dict[str, Any]) -> dict[str, Any]:
    """The oracle gives Ray's job times as milliseconds before now; the simulation as Unix ms."""
    case = copy.deepcopy(case)
    for step in case.get("steps") or []:
        info = step.get("job_info")
        for key in ("startTime", "endTime") if info else ():
            if info.get(key) and info[key] < 1e12:
                info[key] = int(EPOCH_MS - info[key])
    return run_case(case)


def _made_for_the_job(obj: dict[str, Any]) -> bool:
    """RayClusters, Jobs and the RayJob's Service (the oracle also stands in the cluster's own)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return obj["kind"] != "Service" or labels.get("ray.io/originated-from-crd") == "RayJob"


def facts(step: dict[str, Any]) -> dict[str, Any]:
    status = step["status"]
    if status == "deleted":
        return {"jobDeploymentStatus": "deleted"}
    return {
        "jobDeploymentStatus": status.get("jobDeploymentStatus", ""),
        "jobStatus": status.get("jobStatus", ""),
        "reason": status.get("reason", ""),
        "failed": status.get("failed"),
        "succeeded": status.get("succeeded"),
        "finalizers": list(step["finalizers"]),
        "objects": sorted(o["kind"] for o in step["objects"] if _made_for_the_job(o)),
        "events": sorted(e.split(" ")[1] for e in step["events"]),
        "calls": [c["op"] for c in step["dashboard_calls"] if c["op"] != "GetJobInfo"],
        "error": bool(step["result"]["error"]),
    }


@functools.cache
def _cases() -> list[rayjob_oracle.ScriptedCase]:
    return rayjob_oracle.load_cases()


@functools.cache
def _kuberay() -> list[dict[str, Any]]:
    return rayjob_oracle.run_rayjob_cases([copy.deepcopy(c.case) for c in _cases()])


def _names() -> list[str]:
    return sorted(p.stem for p in rayjob_oracle.CASES_DIR.glob("*.yaml"))


@pytest.mark.parametrize("name", _names())
def test_rayjob_steps_as_kuberay(name: str) -> None:
    index = next(i for i, c in enumerate(_cases()) if c.path.stem == name)
    theirs = _kuberay()[index]["steps"]
    ours = _ours(_cases()[index].case)["steps"]
    assert len(ours) == len(theirs)
    for i, (kuberay, rayscale) in enumerate(zip(theirs, ours, strict=True)):
        assert facts(rayscale) == facts(kuberay), f"{name}: step {i}"


def test_facts_are_compared() -> None:
    """The judge can fail: a step whose deployment status differs is told apart."""

    def step(state: str) -> dict[str, Any]:
        return {
            "status": {"jobDeploymentStatus": state},
            "finalizers": [],
            "objects": [],
            "events": [],
            "dashboard_calls": [],
            "result": {"error": None},
        }

    assert facts(step("Running")) != facts(step("Failed"))
    assert set(facts(step("Running"))) == set(FACTS)
