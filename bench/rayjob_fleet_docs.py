"""The section "RayJobs: a fleet at once, beside KubeRay's operator" of docs/benchmarks.md, rendered
from bench/rayjob_fleet.py's results (pure: no I/O but the file written)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from bench.docs import Block, measured, paragraphs
from bench.operator_scale import DOCS

TITLE = "## RayJobs: a fleet at once, beside KubeRay's operator"
BLOCK = Block("bench.rayjob_fleet", "bench/results/rayjob_fleet.json")
LABELS = {
    "rayscale": "rayscale",
    "rayscale-nopoll": "rayscale, no GCS poll",
    "rayscale-c16": "rayscale, 16 RayJob reconciles at once",
    "kuberay": "KubeRay default",
    "kuberay-matched": "KubeRay matched",
}


def _runs(results: Mapping[str, Any], operator: str) -> list[Mapping[str, Any]]:
    return [r for r in results["runs"] if r["operator"] == operator]


def _median(values: Sequence[float]) -> float:
    kept = [v for v in values if isinstance(v, int | float) and not math.isnan(v)]
    return statistics.median(kept) if kept else math.nan


def _num(value: float, digits: int = 1) -> str:
    return "—" if math.isnan(value) else f"{value:,.{digits}f}"


def _range(values: Sequence[float], digits: int = 1) -> str:
    """The median, and the spread when the repetitions differ: "12.3 (11.0-13.1)"."""
    kept = [v for v in values if not math.isnan(v)]
    if not kept:
        return "—"
    mid = _num(statistics.median(kept), digits)
    low, high = _num(min(kept), digits), _num(max(kept), digits)
    return mid if low == high else f"{mid} ({low}-{high})"


def figures(results: Mapping[str, Any], operator: str) -> dict[str, list[float]]:
    """Each figure of the table, one value per repetition of `operator`."""
    runs = _runs(results, operator)
    out: dict[str, list[float]] = {
        "complete_s": [r["complete_s"] for r in runs],
        "submitted_last_s": [r["submitted_last_s"] for r in runs],
        "cpu_seconds": [r["cpu_seconds"] for r in runs],
        "cores": [r["cores"] for r in runs],
        "rss_peak_mib": [r["rss_peak_mib"] for r in runs],
        "load_end": [r["load_end"][0] for r in runs],
    }
    for status in ("RUNNING", "SUCCEEDED"):
        for q in ("p50_s", "p99_s"):
            out[f"{status}_{q}"] = [r["lag"][status][q] for r in runs]
        out[f"{status}_skipped"] = [float(r["lag"][status]["skipped"]) for r in runs]
    for call in ("dashboard_status", "dashboard_submit", "proxied", "gcs_kv_get", "gcs_state"):
        out[call] = [float(r["calls"].get(call, 0)) for r in runs]
    for kind in ("kv", "state", "kv_only"):
        out[f"connections_{kind}"] = [float(r.get("gcs_connections", {}).get(kind, math.nan)) for r in runs]
    return out


ROWS = (
    ("every RayJob Complete, s from the first create", "complete_s", 1),
    ("last job submitted, s", "submitted_last_s", 1),
    ("lag to RUNNING, p50 s", "RUNNING_p50_s", 2),
    ("lag to RUNNING, p99 s", "RUNNING_p99_s", 2),
    ("lag to SUCCEEDED, p50 s", "SUCCEEDED_p50_s", 2),
    ("lag to SUCCEEDED, p99 s", "SUCCEEDED_p99_s", 2),
    ("jobs whose RUNNING was never shown", "RUNNING_skipped", 0),
    ("dashboard job-status calls", "dashboard_status", 0),
    ("dashboard submits", "dashboard_submit", 0),
    ("of the dashboard calls, through the proxy", "proxied", 0),
    ("GCS job-record reads", "gcs_kv_get", 0),
    ("GCS state reads (autoscaler rounds)", "gcs_state", 0),
    ("GCS connections with job-record reads", "connections_kv", 0),
    ("of those, with no autoscaler read", "connections_kv_only", 0),
    ("operator CPU seconds", "cpu_seconds", 1),
    ("operator cores (CPU s / wall s)", "cores", 2),
    ("operator VmHWM, MiB", "rss_peak_mib", 0),
    ("1-min load average at the end", "load_end", 1),
)


def table(results: Mapping[str, Any]) -> list[str]:
    operators = [o for o in results["operators"] if _runs(results, o)]
    by = {o: figures(results, o) for o in operators}
    lines = [
        "| | " + " | ".join(LABELS.get(o, o) for o in operators) + " |",
        "|---|" + "---:|" * len(operators),
    ]
    for label, key, digits in ROWS:
        lines.append(f"| {label} | " + " | ".join(_range(by[o][key], digits) for o in operators) + " |")
    return lines


def observations(results: Mapping[str, Any]) -> str:
    """What the table says, computed from the same results."""
    out = []
    ours = figures(results, "rayscale") if _runs(results, "rayscale") else None
    theirs = figures(results, "kuberay") if _runs(results, "kuberay") else None
    quiet = figures(results, "rayscale-nopoll") if _runs(results, "rayscale-nopoll") else None
    if ours is not None:
        worst = max(ours["RUNNING_p99_s"] + ours["SUCCEEDED_p99_s"], default=math.nan)
        reads, rounds = _median(ours["gcs_kv_get"]), _median(ours["gcs_state"])
        times = rounds / reads if reads else math.nan
        out.append(
            f"rayscale made {_num(max(ours['dashboard_status'], default=0), 0)} dashboard status calls"
            f" in any run; it read {_num(reads, 0)} job records from the GCS per run (median), beside"
            f" {_num(rounds, 0)} reads of Ray's state by its autoscaler ({_num(times, 0)} times as"
            " many: a full round every 5 s and reads between rounds, every second for each cluster"
            " up to `--gcs-poll-budget` reads a second over all of them, less often beyond)."
        )
        own = _median(ours["connections_kv_only"])
        if not math.isnan(own):
            out.append(
                f"The job records came on {_num(_median(ours['connections_kv']), 0)} connections (told"
                " apart by the client's address and port, so two may count once), and"
                f" {_num(own, 0)} of them carried no autoscaler read: one connection per cluster, shared."
            )
        out.append(
            f"Its worst p99 lag was {_num(worst, 2)} s (the target: one autoscaler round, 5 s);"
            f" {_num(_median(ours['RUNNING_skipped']), 0)} jobs (median) were never shown RUNNING (a job"
            f" runs {results['running_s']:g} s)."
        )
    if quiet is not None:
        out.append(
            "With the autoscaler reading Ray only in its rounds (`--gcs-poll-interval 0`), the lag to"
            f" RUNNING was {_num(_median(quiet['RUNNING_p50_s']), 2)} s at p50 and"
            f" {_num(_median(quiet['RUNNING_p99_s']), 2)} s at p99,"
            f" {_num(_median(quiet['RUNNING_skipped']), 0)} jobs never shown RUNNING,"
            f" {_num(_median(quiet['cpu_seconds']))} CPU seconds."
        )
    if ours is not None and theirs is not None:
        out.append(
            f"KubeRay's operator made {_num(_median(theirs['dashboard_status']), 0)} dashboard status"
            f" calls per run (median; {_num(_median(theirs['proxied']), 0)} dashboard calls went through"
            f" the proxy). CPU seconds: rayscale {_num(_median(ours['cpu_seconds']))},"
            f" KubeRay {_num(_median(theirs['cpu_seconds']))}; VmHWM {_num(_median(ours['rss_peak_mib']), 0)}"
            f" MiB against {_num(_median(theirs['rss_peak_mib']), 0)} MiB."
        )
    return " ".join(out)


def render(results: Mapping[str, Any]) -> str:
    intro = (
        f"{results['jobs']:,} RayJobs in HTTPMode created at once on one operator, each with its own"
        " RayCluster (a head, kwok runs it, and an autoscaled worker group that stays empty); Ray is"
        f" faked in the benchmark's process: each job PENDING {results['pending_s']:g} s, RUNNING"
        f" {results['running_s']:g} s, then SUCCEEDED, one schedule for both operators. rayscale reads"
        " the job records from the (fake) GCS's key-value store, as Ray's job manager writes them,"
        " through the autoscaler's connection to each cluster; KubeRay's operator"
        f" ({results['kuberay_version']}, its defaults) polls each cluster's dashboard, here a fake one"
        " it reaches as an HTTP proxy (its requests counted). Lag: from the schedule's change to a"
        " watch seeing `status.jobStatus` change (rayscale reads a running job's record every 2 s,"
        " KubeRay's operator polls the dashboard every 3 s; the"
        " watch runs in a process of its own, so the fake Ray's work does not delay what it sees). One"
        " operator at a time, in a fresh namespace and process, the order rotating with each"
        f" repetition ({results['reps']} each). Medians, with the range of the repetitions in brackets."
    )
    waits = [run["settle_s"] for run in results["runs"] if run.get("settle_s")]
    if any("settle_s" in run for run in results["runs"]):
        intro += (
            " Each run after the first began once the 1-min load average was below"
            f" {results.get('settle_load', 1.5):g} (the control"
            " plane cleans up the last run's clusters after its namespace is gone); the waits were"
            f" {min(waits, default=0):.0f} to {max(waits, default=0):.0f} s."
        )
    lines = paragraphs(TITLE, intro)
    lines += [*table(results), ""]
    text = observations(results)
    reproduce = '`make bench-rayjob-fleet` (`RAYJOB_ARGS="--jobs 100"` for a quick run)'
    lines += paragraphs("", text, measured(results, reproduce))[2:]
    return "\n".join(lines).rstrip("\n") + "\n"


def shown(results: Mapping[str, Any]) -> dict[str, Any]:
    """What main prints: per operator, the median of each figure."""
    return {
        o: {k: round(_median(v), 3) for k, v in figures(results, o).items()}
        for o in results["operators"]
        if _runs(results, o)
    }


def write(results: Mapping[str, Any]) -> None:
    BLOCK.write(DOCS, render(results))
