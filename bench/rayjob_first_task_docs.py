"""The section "RayJobs: from apply to the first task, beside KubeRay's operator" of
docs/benchmarks.md, rendered from bench/rayjob_first_task.py's results (pure: no I/O but the file
written), and the milestones' summary (p50 and max per operator over the repetitions)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from bench.docs import Block, measured, paragraphs
from bench.operator_scale import DOCS

TITLE = "## RayJobs: from apply to the first task, beside KubeRay's operator"
BLOCK = Block("bench.rayjob_first_task", "bench/results/rayjob_first_task.json")
OPERATORS = ("rayscale", "kuberay")
LABELS = {"rayscale": "rayscale", "kuberay": "KubeRay + Ray's sidecar"}
MILESTONES = {
    "head_running": "head pod Running",
    "worker_created": "first worker pod created",
    "worker_running": "first worker pod Running",
    "second_worker_created": "second worker pod created",
    "job_running": "`jobStatus: RUNNING` in the RayJob",
    "first_task": "**first task running**",
    "complete": "`jobDeploymentStatus: Complete`",
}
FIRST_TASK = "first_task"
REPRODUCE = '`make bench-rayjob-first-task` (`FIRST_TASK_ARGS="--reps 3"` for fewer repetitions)'


def _runs(results: Mapping[str, Any], operator: str) -> list[Mapping[str, Any]]:
    return [r for r in results["runs"] if r["operator"] == operator]


def stat(values: Sequence[float | None]) -> dict[str, float | int] | None:
    """p50 (the median), min and max of the values reached, and how many were; None if none was."""
    kept = sorted(v for v in values if v is not None and not math.isnan(v))
    if not kept:
        return None
    return {"p50": statistics.median(kept), "min": kept[0], "max": kept[-1], "n": len(kept)}


def summary(results: Mapping[str, Any]) -> dict[str, dict[str, dict[str, float | int] | None]]:
    """Per operator that ran, per milestone: `stat` over its repetitions."""
    out: dict[str, dict[str, dict[str, float | int] | None]] = {}
    for operator in results["operators"]:
        runs = _runs(results, operator)
        if runs:
            out[operator] = {m: stat([r["milestones"].get(m) for r in runs]) for m in MILESTONES}
    return out


def ratio(results: Mapping[str, Any], milestone: str = FIRST_TASK) -> float | None:
    """KubeRay's p50 over rayscale's for `milestone`; None unless both reached it."""
    by = summary(results)
    ours, theirs = (by.get(o, {}).get(milestone) for o in OPERATORS)
    if ours is None or theirs is None or not ours["p50"]:
        return None
    return float(theirs["p50"]) / float(ours["p50"])


def _cell(s: Mapping[str, float | int] | None, key: str, reps: int, absent: str = "never") -> str:
    if s is None:
        return absent
    text = f"{s[key]:.1f}"
    return text if s["n"] == reps else f"{text} ({s['n']} of {reps})"


def table(results: Mapping[str, Any]) -> list[str]:
    by = summary(results)
    operators = list(by)
    reps = {o: len(_runs(results, o)) for o in operators}
    lines = [
        "| s from the create call | " + " | ".join(f"{LABELS.get(o, o)} p50 | max" for o in operators) + " |",
        "|---|" + "---:|---:|" * len(operators),
    ]
    for key, label in MILESTONES.items():
        cells = [
            f"{_cell(by[o][key], 'p50', reps[o])} | {_cell(by[o][key], 'max', reps[o])}" for o in operators
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    def row(label: str, by_run: Any) -> None:
        stats = {o: stat([by_run(r) for r in _runs(results, o)]) for o in operators}
        cells = [
            f"{_cell(stats[o], 'p50', reps[o], '—')} | {_cell(stats[o], 'max', reps[o], '—')}"
            for o in operators
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row("Ray's sidecar started (KubeRay: the head pod Running)", lambda r: r.get("sidecar_started_s"))
    row("1-min load average at the start", lambda r: r["load_start"][0])

    def count(label: str, of_run: Any) -> None:
        cells = [f"{sum(of_run(r) for r in _runs(results, o))} of {reps[o]} | —" for o in operators]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    count("runs that failed (no Complete or no task by the deadline)", lambda r: bool(r.get("error")))
    count("runs with a Ray bridge error", lambda r: bool(r.get("bridge_errors")))
    count(
        "runs in which Ray's sidecar exited (started again after 10 s)",
        lambda r: bool(r.get("sidecar_exits")),
    )
    return lines


def observations(results: Mapping[str, Any]) -> str:
    by = summary(results)
    if not all(o in by for o in OPERATORS):
        return ""
    ours, theirs = by["rayscale"], by["kuberay"]
    out = []
    factor = ratio(results)
    task_ours, task_theirs = ours[FIRST_TASK], theirs[FIRST_TASK]
    if factor is not None and task_ours is not None and task_theirs is not None:
        out.append(
            f"The first task ran {task_ours['p50']:.1f} s after the create call on rayscale and"
            f" {task_theirs['p50']:.1f} s on KubeRay with Ray's sidecar (p50): KubeRay/rayscale ="
            f" {factor:.2f}."
        )
    worker_ours, worker_theirs, head = ours["worker_created"], theirs["worker_created"], ours["head_running"]
    if worker_ours is not None and worker_theirs is not None and head is not None:
        out.append(
            f"rayscale created the worker pod {worker_ours['p50']:.1f} s after the create call (its head"
            f" pod Running at {head['p50']:.1f} s): from the entrypoint's declared CPU, in its first"
            f" autoscaler round. Ray's sidecar created it at {worker_theirs['p50']:.1f} s, once KubeRay"
            " had submitted the job and Ray reported the driver's pending CPU."
        )
    errors = sum(len(r.get("bridge_errors") or []) for r in results["runs"])
    calls = [r.get("proxied_calls", 0) for r in _runs(results, "kuberay")]
    out.append(
        f"KubeRay's operator made {statistics.median(calls):.0f} dashboard calls per run (median);"
        f" the Ray bridge reported {errors} error(s) over all runs."
    )
    return " ".join(out)


def render(results: Mapping[str, Any]) -> str:
    intro = (
        "One RayJob in K8sJobMode, the same for both operators: its cluster autoscaled"
        ' (`enableInTreeAutoscaling: true`), a head with `num-cpus: "0"`, one group of 1-CPU workers'
        " (`minReplicas: 0`, `replicas: 0`, `maxReplicas: 2`) and `entrypointNumCpus: 1`. The"
        " entrypoint runs one Ray task (`num_cpus=0`) that writes the moment it runs to a file, then"
        f" the job runs {results['hold_s']:g} s more and succeeds. The driver holds the entrypoint's"
        " CPU, so the job needs one worker; when it starts is the difference. (The task asks for no"
        " CPU because Ray's v1 autoscaler matches Ray nodes to pods by IP, and here every Ray node has"
        " the same one, 127.0.0.2: it would take the running worker for a node that never joined,"
        " with its CPU free, and never start a second worker for a task's CPU.) Ray is real on both sides"
        f" (Ray {results['ray_version']}, local processes): the Ray bridge starts each RayCluster's"
        " Ray head with its dashboard when the RayCluster appears, a Ray worker for each Running worker"
        " pod (kwok runs the pods), and runs the submitter Job's `ray job submit` on the machine once"
        " the head's dashboard answers (the head pod's readiness probe). The Ray head so starts"
        " before its pod, earlier than a head container would, on both sides alike."
        " rayscale: `rayscale run` (its defaults). KubeRay: its operator"
        f" ({results['kuberay_version']}, its defaults) with Ray's autoscaler sidecar (v1, KubeRay's"
        " default) started as a local process when the head pod is Running, as its container would"
        " start. Each milestone is the first moment a watch (pods, the RayJob) or the marker file"
        " shows it, in seconds from the create call. One operator at a time, in a fresh namespace"
        " and process, the order rotating with each repetition"
        f" ({results['reps']} each); p50 and max over the repetitions."
    )
    after = paragraphs("", observations(results), measured(results, REPRODUCE))[2:]
    return "\n".join([*paragraphs(TITLE, intro), *table(results), "", *after]).rstrip("\n") + "\n"


def shown(results: Mapping[str, Any]) -> dict[str, Any]:
    """What main prints: the summary and the ratio for the first task."""
    return {"summary": summary(results), "ratio_first_task_kuberay_over_rayscale": ratio(results)}


def write(results: Mapping[str, Any]) -> None:
    BLOCK.write(DOCS, render(results))
