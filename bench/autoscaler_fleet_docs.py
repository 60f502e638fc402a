"""Renders bench/results/autoscaler_fleet.json (bench.autoscaler_fleet) into docs/benchmarks.md and
docs/scaling.md: one operator autoscaling a fleet, and what Ray's autoscaler costs as a sidecar."""

from __future__ import annotations

import statistics
import textwrap
from collections.abc import Callable
from typing import Any

from bench.docs import Block, measured, paragraphs
from bench.operator_scale import ROOT

BENCHMARKS = ROOT / "docs" / "benchmarks.md"
SCALING = ROOT / "docs" / "scaling.md"
SOURCE = "bench/results/autoscaler_fleet.json"
RERENDER = "python -m bench.autoscaler_fleet --render-only"
BLOCK = Block("bench.autoscaler_fleet", SOURCE, RERENDER)
SCALING_BLOCK = Block("bench.autoscaler_fleet_docs", SOURCE, RERENDER)
TITLE = "## Autoscaling a fleet beside Ray's autoscaler sidecars"
SCALING_TITLE = "## Autoscaling many clusters"
COMMAND = ".venv/bin/python -m bench.autoscaler_fleet --write-docs"
TARGET_P99 = 2.0  # seconds, demand to patch
TARGET_RATIO = 10.0  # less CPU and memory per autoscaled cluster than the sidecar


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """The median, and the range in brackets when there are several."""
    med = fmt.format(statistics.median(values))
    if len(values) < 2:
        return med
    return f"{med} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def by_size(results: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for run in results["fleet"]:
        out.setdefault(int(run["clusters"]), []).append(run)
    return dict(sorted(out.items()))


def each(runs: list[dict[str, Any]], get: Callable[[dict[str, Any]], float]) -> list[float]:
    return [get(r) for r in runs]


def per_cluster(results: dict[str, Any], size: int, runs: list[dict[str, Any]]) -> dict[str, float]:
    """Cost per autoscaled cluster at `size` (medians of the repetitions) beside the sidecar's, and
    whether the operator read every cluster's GCS about once a second (`kept_up`)."""
    side = results["sidecar"]
    cores = statistics.median(each(runs, lambda r: r["operator_cores"])) / size
    rss = statistics.median(each(runs, lambda r: r["operator_rss_peak_mib"])) / size
    reads = statistics.median(each(runs, lambda r: r["rounds_per_s"])) / size
    side_cores, side_rss = side["cpu_seconds_per_minute"] / 60, side["vm_hwm_mib"]
    return {"size": size, "cores": cores, "rss": rss, "side_cores": side_cores, "side_rss": side_rss,
            "cpu_ratio": side_cores / cores, "rss_ratio": side_rss / rss, "reads": reads,
            "kept_up": float(reads >= 0.9 / results["settings"].get("poll", 1.0))}  # fmt: skip


def fleet_table(results: dict[str, Any]) -> list[str]:
    lines = [
        "| clusters | runs | GCS reads/s | full rounds/s | demand to patch s: median / p90 / p99"
        " | waves patched | operator CPU cores | per cluster | operator peak RSS MiB"
        " | control plane CPU cores | load (1 min) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, runs in by_size(results).items():
        d = [r["demand_to_patch"] for r in runs]
        share = [r["operator_cores"] / size for r in runs]
        lines.append(
            f"| {size:,} | {len(runs)} | {spread(each(runs, lambda r: r['rounds_per_s']), '{:.0f}')}"
            f" | {spread(each(runs, lambda r: r['full_rounds_per_s']), '{:.0f}')}"
            f" | {spread([x['median_s'] for x in d])} / {spread([x['p90_s'] for x in d])} /"
            f" {spread([x['p99_s'] for x in d])}"
            f" | {sum(x['patched'] for x in d):,} of {sum(x['needing_patch'] for x in d):,}"
            f" | {spread(each(runs, lambda r: r['operator_cores']))}"
            f" | {spread(share, '{:.5f}')}"
            f" | {spread(each(runs, lambda r: r['operator_rss_peak_mib']), '{:.0f}')}"
            f" | {spread(each(runs, lambda r: (r['control_plane_cpu_s'] or 0) / r['duration_s']))}"
            f" | {spread(each(runs, lambda r: r['load_start'][0]), '{:.1f}')} to"
            f" {spread(each(runs, lambda r: r['load_end'][0]), '{:.1f}')} |"
        )
    return lines


def sidecar_table(results: dict[str, Any]) -> list[str]:
    s = results["sidecar"]
    lat = [x for x in s["latencies"] if not x["already_covered"]]
    req = s["kuberay_sidecar_resources"]["requests"]
    return [
        "| Ray's autoscaler sidecar (one cluster) | measured |",
        "|---|---:|",
        f"| Ray, autoscaler | {s['ray_version']}, {s['autoscaler_version']} |",
        f"| CPU over {s['window_seconds']:.0f} s of changing demand | {s['cpu_seconds']:.2f} s"
        f" ({s['cpu_seconds_per_minute'] / 60:.4f} cores) |",
        f"| CPU to start (to its second round) | {s['startup_cpu_seconds']:.2f} s |",
        f"| peak RSS | {s['vm_hwm_mib']:.0f} MiB |",
        f"| Kubernetes requests | {s['k8s_requests_per_minute']:.0f} a minute |",
        f"| demand to patch, each scale-up | {', '.join(format(x['seconds'], '.2f') for x in lat)} s |",
        f"| KubeRay's requests (and limits) for the sidecar, on every head"
        f" | {req['cpu']} CPU, {req['memory']} |",
    ]


def verdicts(results: dict[str, Any]) -> str:
    sizes = by_size(results)
    parts = []
    for size, runs in sizes.items():
        c = per_cluster(results, size, runs)
        kept = (
            ""
            if c["kept_up"]
            else (
                f"; the operator read only {c['reads']:.2f} times a second per cluster instead of once, on"
                " a machine it shared with everything else, so this share is below what the work needs"
            )
        )
        parts.append(
            f"at {size:,} clusters {c['cores']:.5f} cores and {c['rss']:.2f} MiB each ({c['cpu_ratio']:.0f}x"
            f" less CPU and {c['rss_ratio']:.0f}x less memory than the sidecar{kept})"
        )
    first = per_cluster(results, *next(iter(sizes.items())))
    text = (
        "Per autoscaled cluster, the whole operator (its controller included) divided by the clusters: "
        + "; ".join(parts)
        + f". Ray's sidecar used {first['side_cores']:.4f} cores and {first['side_rss']:.0f} MiB for its one"
        f" cluster (target: {TARGET_RATIO:.0f}x less of both). KubeRay reserves 500m CPU and 512Mi on every"
        " head for the sidecar; one rayscale pod asks for 100m and 256Mi for the whole fleet."
    )
    p99 = {
        size: statistics.median(r["demand_to_patch"]["p99_s"] for r in runs) for size, runs in sizes.items()
    }
    met = [f"{size:,}" for size, value in p99.items() if value < TARGET_P99]
    missed = [f"{size:,} ({value:.1f} s)" for size, value in p99.items() if value >= TARGET_P99]
    text += f" Demand to patch, p99 under {TARGET_P99:.0f} s:"
    text += f" met at {', '.join(met)} clusters" if met else " met at no size"
    text += f"; not met at {', '.join(missed)}." if missed else "."
    return text


def where_time_went(results: dict[str, Any]) -> list[str]:
    """What the operator's own metrics said during the runs (results from before they were recorded
    give no table)."""
    sizes = {size: runs for size, runs in by_size(results).items() if all("gcs_read" in r for r in runs)}
    if not sizes:
        return []
    lines = [
        "| clusters | API requests/s | `status` patches | of them `status.autoscaler` (reports)"
        " | `replicas` patches | rate-limit wait p99, cluster / report | GCS read p50 / p99"
        " | rounds in flight | benchmark process CPU cores |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, runs in sizes.items():
        api = [r["api_requests_per_s"] for r in runs]
        reports = [
            r["rate_limit_wait"].get("report", {}).get("requests", 0.0) / r["duration_s"] for r in runs
        ]
        lines.append(
            f"| {size:,} | {spread([sum(a.values()) for a in api], '{:.0f}')}"
            f" | {spread([a.get('patch rayclusters/status', 0.0) for a in api], '{:.0f}')}"
            f" | {spread(reports, '{:.0f}')}"
            f" | {spread([a.get('patch rayclusters', 0.0) for a in api], '{:.0f}')}"
            f" | <= {_worst(runs, 'rate_limit_wait', 'cluster')}"
            f" / <= {_worst(runs, 'rate_limit_wait', 'report')}"
            f" | <= {_worst(runs, 'gcs_read', None, 'p50_le_s')} / <= {_worst(runs, 'gcs_read', None)}"
            f" | {spread([r['autoscaler_busy'] for r in runs], '{:.0f}')}"
            f" | {spread([r['bench_process_cores'] for r in runs])} |"
        )
    about = (
        "What the operator's metrics said in the same runs (`rayscale_kube_requests_total`,"
        " `rayscale_kube_rate_limit_wait_seconds`, `rayscale_autoscaler_gcs_read_seconds` as bucket"
        ' bounds, `controller_runtime_active_workers{controller="autoscaler"}` sampled every 15 s):'
    )
    return [*paragraphs("", about)[2:], *lines, ""]


def _worst(runs: list[dict[str, Any]], field: str, series: str | None, bound: str = "p99_le_s") -> str:
    """The largest bucket bound of `field` (of its `series`) over the runs, in seconds."""
    values = [(r[field].get(series, {}) if series else r[field]).get(bound, 0.0) for r in runs]
    return f"{max(values):g} s"


def render(results: dict[str, Any]) -> str:
    settings = results["settings"]
    about = (
        "One `rayscale run --namespace NS` (default settings: a round of every cluster at least every"
        " 5 s and on every change, Ray's state read every second in between, 64 rounds in flight, client"
        " rate limit 100 requests/s) on the local control plane (kwok fake nodes) autoscales N"
        " RayClusters: a head and one group of 1-CPU workers, 0 to 3 replicas, idle timeout 30 s. Each"
        f" cluster has its own GCS: {settings['real_heads']} a real Ray head (local processes), the rest a"
        " fake GCS in the benchmark's process answering as Ray 2.60's does (a Ray node for each Running"
        " worker pod, tasks placed on free CPUs, the rest pending demand, idle times, drains;"
        " bench/fake_gcs_fleet.py). Once every head runs, demand changes for"
        f" {settings['duration']:.0f} s: every cluster gets a wave every {settings['period']:.0f} s (its"
        f" own random phase) of 1 to 3 tasks of {{CPU: 1}} running {settings['task_seconds']:.0f} s (on a"
        " real head: `request_resources` of that many CPUs, cleared after the same time). A wave that"
        " needs more workers than the cluster asked for starts a clock, stopped when a watch sees"
        " `replicas` cover it (demand to patch). GCS reads are the fake GCSes' calls; full rounds are"
        " the operator's decisions (`rayscale_autoscaler_decision_duration_seconds_count`). The"
        " benchmark, its fake GCSes and the control plane share the machine with the operator."
    )
    side = (
        "Beside it, in the same run: Ray's own autoscaler as KubeRay runs it (`ray kuberay-autoscaler`"
        " with the in-cluster settings KubeRay gives it) for one RayCluster with a real Ray head, rayscale"
        " `--mode controller` creating the pods it asks for, and the same kind of waves"
        " (`request_resources`), measured from its second round on (bench/ray_sidecar.py). Its"
        " workers are kwok pods that never join Ray, so it scales up but never finds them idle."
    )
    lines = [
        *paragraphs(TITLE, about, side, measured(results, f"`make bench-autoscaler-fleet` (or `{COMMAND}`)")),
        *fleet_table(results),
        "",
        *where_time_went(results),
        *sidecar_table(results),
        "",
        *paragraphs("", verdicts(results))[2:],
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


def render_scaling(results: dict[str, Any]) -> str:
    cost = per_cluster(results, *list(by_size(results).items())[-1])
    lines = paragraphs(
        SCALING_TITLE,
        "From `make bench-autoscaler-fleet`"
        " ([benchmarks](benchmarks.md#autoscaling-a-fleet-beside-rays-autoscaler-sidecars)): one operator"
        " autoscaling clusters whose demand changes every minute, with default settings.",
        measured(results, f"`make bench-autoscaler-fleet` (or `{COMMAND}`)"),
    )
    return "\n".join([*lines, *fleet_table(results), "", *paragraphs("", verdicts(results))[2:]]).rstrip() + (
        "\n\n"
        + textwrap.fill(
            "In reserved resources: KubeRay's sidecar asks for 500m CPU and 512Mi on every head, so"
            f" {cost['size']:,.0f} autoscaled clusters reserve {cost['size'] * 0.5:,.0f} CPUs and"
            f" {cost['size'] * 0.5:,.0f} GiB for autoscaling alone.",
            width=100,
        )
        + "\n"
    )


def write_docs(results: dict[str, Any]) -> None:
    BLOCK.write(BENCHMARKS, render(results))
    SCALING_BLOCK.write(SCALING, render_scaling(results))
