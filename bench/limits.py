"""The "Measured limits of one operator" table of docs/scaling.md, from the side-by-side results.

    python -m bench.limits  # rewrite the table from bench/results/vs_kuberay.json

`python -m bench.vs_kuberay --write-docs` writes it too, from the run it just made. Every figure is
rayscale's median over the run's repetitions, the range (min-max) in brackets, as in the tables of
docs/benchmarks.md; KubeRay's operator's figures of the same run stand beside it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import provenance
from bench.docs import Block, paragraphs
from bench.vs_kuberay import OUT, cell, per_pod_ms, stat

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "scaling.md"
TITLE = "## Measured limits of one operator"
BLOCK = Block("bench.limits", "bench/results/vs_kuberay.json", rerender="python -m bench.limits")
OTHERS = {"kuberay-matched": "KubeRay matched", "kuberay": "KubeRay default"}


def _cell(runs: Sequence[Mapping[str, Any]], case: str, key: str, operator: str = "rayscale") -> str:
    return cell(stat(runs, case, operator, key))


def _others(runs: Sequence[Mapping[str, Any]], case: str, key: str, unit: str) -> str:
    """KubeRay's operator's figures of the same case, e.g. "KubeRay matched 146 s, KubeRay default 215 s"."""
    found = [
        f"{label} {_cell(runs, case, key, op)}{unit}"
        for op, label in OTHERS.items()
        if stat(runs, case, op, key)
    ]
    return ", ".join(found) or "not in this run"


def _kib_per_pod(runs: Sequence[Mapping[str, Any]]) -> str:
    small, large = (
        stat(runs, "a100", "rayscale", "rss_peak_mib"),
        stat(runs, "b1000", "rayscale", "rss_peak_mib"),
    )
    if small is None or large is None:
        return "—"
    pods = max(r["pods"] for r in runs if r["case"] == "b1000")
    return f"about {(large['median'] - small['median']) * 1024 / pods:.0f} KiB per pod above one cluster's"


def render(results: Mapping[str, Any]) -> str:
    runs = results["runs"]
    reps = max((int(r["rep"]) for r in runs if r["case"] == "b1000"), default=-1) + 1
    rows = [
        (
            "1,000 RayClusters / 10,000 pods created at once",
            f"all pods created in {_cell(runs, 'b1000', 'created_s')} s, all Running in"
            f" {_cell(runs, 'b1000', 'running_s')} s ({reps} repetitions; all pods created by KubeRay's"
            f" operator in the same run: {_others(runs, 'b1000', 'created_s', ' s')})",
            f"{_cell(runs, 'b1000', 'created_per_s')} pods/s created",
        ),
        (
            "operator CPU for those 10,000 pods",
            f"{_cell(runs, 'b1000', 'cpu_seconds')} CPU seconds (KubeRay's operator:"
            f" {_others(runs, 'b1000', 'cpu_seconds', '')})",
            f"{cell(per_pod_ms(runs, 'b1000', 'rayscale'))} ms per pod (one cluster 0 -> 1,000:"
            f" {cell(per_pod_ms(runs, 'a1000', 'rayscale'))}; 50 clusters of 11 pods:"
            f" {cell(per_pod_ms(runs, 'b50', 'rayscale'))})",
        ),
        (
            "operator memory, peak RSS",
            f"{_cell(runs, 'a100', 'rss_peak_mib')} MiB with one cluster of 100 workers,"
            f" {_cell(runs, 'b1000', 'rss_peak_mib')} MiB at 10,000 pods (KubeRay's operator:"
            f" {_others(runs, 'b1000', 'rss_peak_mib', ' MiB')})",
            _kib_per_pod(runs),
        ),
        (
            "one cluster 0 -> 1,000 workers",
            f"created in {_cell(runs, 'a1000', 'created_s')} s",
            f"{_cell(runs, 'a1000', 'created_per_s')} pods/s: the 100 requests/s limit after a burst of 200",
        ),
        (
            "1,000 -> 0 with `workersToDelete`",
            f"gone in {_cell(runs, 'd', 'gone_s')} s",
            f"{_cell(runs, 'd', 'gone_per_s')} pods/s: the same limit",
        ),
    ]
    about = (
        "From `make bench-vs-kuberay` ([benchmarks](benchmarks.md#side-by-side-with-kuberays-operator),"
        " the same run), one operator with the default settings on a machine that also runs the local"
        " control plane (etcd, kube-apiserver, kube-scheduler, kwok); the median of the repetitions,"
        " the range in brackets."
    )
    lines = [
        *paragraphs(TITLE, about, provenance.sentence(results)),
        "| what | measured | per unit |",
        "|---|---|---|",
    ]
    lines += [f"| {what} | {measured} | {unit} |" for what, measured, unit in rows]
    return "\n".join(lines) + "\n"


def write(results: Mapping[str, Any], docs: Path = DOCS) -> None:
    BLOCK.write(docs, render(results))


def main(argv: list[str] | None = None) -> int:
    source = Path(argv[0]) if argv else OUT
    write(json.loads(source.read_text()))
    print(f"wrote {TITLE!r} to {DOCS} from {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
