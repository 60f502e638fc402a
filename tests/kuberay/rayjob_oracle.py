"""KubeRay's RayJob controller as an oracle: the ``-rayjob`` mode of tools/kuberay-oracle (rayjob.go).

``run_rayjob_cases`` sends scripted cases to KubeRay's own RayJobReconciler, one reconcile per step,
and returns its answers (the input and output formats are rayjob.go's header comment). The binary is
built, or found in the cache, by tests/kuberay/oracle.py's ``build``.

``load_cases`` reads the scripted cases of tests/kuberay/rayjob_cases/, one case per YAML file (its
name, when not given, the file's stem). Beyond the oracle's keys a case file may use:

- ``sample: <file of KubeRay's config/samples>`` for the RayJob instead of ``rayjob``: that file's
  RayJob document, with ``patch``, a JSON merge patch onto the whole manifest, applied;
- in ``objects``, ``{sample: <file>, kind: <kind, default RayCluster>, patch: {...}}`` likewise;
- in a step, ``expect`` (never sent to the oracle): what must hold after the step, checked by
  ``check``: ``status`` (a subset of the RayJob's status as the oracle prints it, or ``deleted``),
  ``events`` (reasons among the step's Events), ``calls`` (the dashboard calls' ops, in order),
  ``objects`` (``{kind: count}`` of the RayClusters, Jobs and Services, every kind not named 0),
  ``finalizers``, ``requeueAfter`` and ``error`` (``null`` for none, else a substring of it).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from tests.kuberay import oracle
from tests.kuberay.oracle import Oracle, OracleError
from tests.kuberay.rayscale_side import merge_patch  # RFC 7386, as the oracle applies a step's spec

CASES_DIR = Path(__file__).resolve().parent / "rayjob_cases"
_ORACLE_STEP_KEYS = {
    "age", "spec", "delete", "cluster_delete", "cluster_status", "head_pod", "submitter", "job_info",
    "dashboard_error",
}  # fmt: skip
_EXPECT_KEYS = {"status", "events", "calls", "objects", "finalizers", "requeueAfter", "error"}


@dataclasses.dataclass(frozen=True)
class ScriptedCase:
    path: Path
    case: dict[str, Any]  # as the oracle takes it
    expect: list[dict[str, Any]]  # one per step ({} for none)


@functools.cache
def _built() -> Oracle:
    return oracle.build()


def run_rayjob_cases(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """KubeRay's RayJob controller on each case (rayjob.go), in order: ``{"name", "steps": [...]}``."""
    results: list[dict[str, Any]] = _built().run(["-rayjob"], json.dumps(cases))
    if len(results) != len(cases):
        raise OracleError(f"sent {len(cases)} RayJob cases, got {len(results)} answers")
    return results


def _sample(samples_dir: Path, name: str, kind: str, patch: Any) -> dict[str, Any]:
    docs = yaml.safe_load_all((samples_dir / name).read_text(encoding="utf-8"))
    found = [d for d in docs if isinstance(d, dict) and d.get("kind") == kind]
    if not found:
        raise ValueError(f"{name} holds no {kind}")
    body: dict[str, Any] = merge_patch(found[0], patch or {})
    return body


def load_case(path: Path, samples_dir: Path) -> ScriptedCase:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a case is a mapping")
    unknown = set(raw) - {"name", "sample", "patch", "rayjob", "objects", "steps"}
    if unknown or ("sample" in raw) == ("rayjob" in raw):
        raise ValueError(f"{path}: give exactly one of sample and rayjob (unknown keys: {sorted(unknown)})")
    if "sample" in raw:
        rayjob = _sample(samples_dir, raw["sample"], "RayJob", raw.get("patch"))
    else:
        rayjob = merge_patch(raw["rayjob"], raw.get("patch") or {})
    objects = []
    for obj in raw.get("objects") or []:
        if "sample" in obj:
            objects.append(
                _sample(samples_dir, obj["sample"], obj.get("kind", "RayCluster"), obj.get("patch"))
            )
        else:
            objects.append(obj)
    steps, expect = [], []
    for i, step in enumerate(raw.get("steps") or []):
        step = dict(step or {})
        wanted = step.pop("expect", None) or {}
        if set(step) - _ORACLE_STEP_KEYS or set(wanted) - _EXPECT_KEYS:
            raise ValueError(f"{path}: step {i}: unknown keys {sorted(set(step) - _ORACLE_STEP_KEYS)}")
        steps.append(step)
        expect.append(wanted)
    case = {"name": raw.get("name", path.stem), "rayjob": rayjob, "objects": objects, "steps": steps}
    return ScriptedCase(path, case, expect)


def load_cases(samples_dir: Path | None = None, cases_dir: Path = CASES_DIR) -> list[ScriptedCase]:
    """Every case of tests/kuberay/rayjob_cases/, by file name; samples from KubeRay's module."""
    samples = samples_dir if samples_dir is not None else _built().samples_dir
    return [load_case(path, samples) for path in sorted(cases_dir.glob("*.yaml"))]


def _subset(wanted: Any, got: Any, where: str) -> list[str]:
    if isinstance(wanted, dict):
        if not isinstance(got, dict):
            return [f"{where}: want a mapping {wanted}, got {got!r}"]
        out = []
        for key, value in wanted.items():
            out += _subset(value, got.get(key), f"{where}.{key}")
        return out
    return [] if wanted == got else [f"{where}: want {wanted!r}, got {got!r}"]


def check(expect: dict[str, Any], step: dict[str, Any]) -> list[str]:
    """What of ``expect`` (a step's ``expect``) the oracle's answer for the step does not show."""
    problems: list[str] = []
    if "status" in expect:
        problems += _subset(expect["status"], step["status"], "status")
    if "events" in expect:
        reasons = [e.split(" ", 2)[1] for e in step["events"]]
        problems += [f"no {r} Event among {reasons}" for r in expect["events"] if r not in reasons]
    if "calls" in expect:
        ops = [c["op"] for c in step["dashboard_calls"]]
        if ops != expect["calls"]:
            problems.append(f"dashboard calls: want {expect['calls']}, got {ops}")
    if "objects" in expect:
        counts = Counter(o["kind"] for o in step["objects"])
        kinds = set(counts) | set(expect["objects"])
        if any(counts[k] != expect["objects"].get(k, 0) for k in kinds):
            problems.append(f"objects: want {expect['objects']}, got {dict(counts)}")
    if "finalizers" in expect and step["finalizers"] != expect["finalizers"]:
        problems.append(f"finalizers: want {expect['finalizers']}, got {step['finalizers']}")
    if "requeueAfter" in expect and step["result"]["requeueAfter"] != expect["requeueAfter"]:
        problems.append(f"requeueAfter: want {expect['requeueAfter']}, got {step['result']['requeueAfter']}")
    if "error" in expect:
        error = step["result"]["error"]
        if expect["error"] is None and error is not None:
            problems.append(f"error: want none, got {error!r}")
        elif expect["error"] is not None and (error is None or expect["error"] not in error):
            problems.append(f"error: want one with {expect['error']!r}, got {error!r}")
    return problems
