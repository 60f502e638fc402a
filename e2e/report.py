"""Turn the end-to-end scenarios' timings (e2e/.results/*.json) into a section of docs/benchmarks.md.

    .venv/bin/python -m e2e.report                # print the section
    .venv/bin/python -m e2e.report --write-docs   # replace it in docs/benchmarks.md
    .venv/bin/python -m e2e.report --render-only  # the same from the stored bench/results/e2e.json

`make e2e` runs every scenario and then this with --write-docs, which also stores the timings,
with the report's provenance (date, commit, machine, load average, command), in
bench/results/e2e.json: the docs' block is rendered from that file.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench import provenance
from bench.docs import Block, paragraphs
from e2e.harness import RESULTS

TITLE = "## End-to-end scenarios with a real Ray"
ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks.md"
BLOCK = Block("e2e.report", "bench/results/e2e.json")

# step -> what KubeRay's e2e suite (ray-operator/test/e2eautoscaler) allows for the same step.
KUBERAY_ALLOWS = {
    "demand -> pods created": "Medium, 2 min, to the desired count (Long, 5 min, in #3, #7, #15)",
    "pods -> Ray nodes alive": "not checked apart (the pods' readiness is inside the same 2-5 min)",
    "idle timeout -> pod deleted": "Medium, 2 min, for idle timeout plus removal (60 s default timeout)",
    "pods deleted by hand -> new Ray nodes alive": "Medium, 2 min, to the new pods (#13)",
    "request withdrawn -> pod deleted": "(not in KubeRay's suite)",
}


def load(results: Path = RESULTS) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(results.glob("*.json"))]


def _steps(runs: list[dict[str, Any]]) -> dict[str, list[float]]:
    by_step: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        for t in run["timings"]:
            by_step[t["step"]].append(float(t["seconds"]))
    return by_step


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} / {max(values):.1f}"


def stored(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The scenarios' results as bench/results/e2e.json keeps them, with this report's provenance:
    the scenarios ran just before it (`make e2e`), so its load average is the one at their end."""
    recorded = provenance.begin("make e2e (the scenarios, then python -m e2e.report --write-docs)")
    recorded["load_end"], recorded["load_start"] = recorded["load_start"], None
    machine = f"{platform.machine()}, {recorded['cores']} cores, Python {platform.python_version()}"
    return {"machine": machine, "provenance": recorded, "runs": runs}


def render(results: dict[str, Any]) -> str:
    runs: list[dict[str, Any]] = results["runs"]
    passed = [r for r in runs if r["outcome"] == "passed"]
    failed = sorted(r["test"] for r in runs if r["outcome"] != "passed")
    by_step = _steps(passed)
    pods: dict[str, int] = defaultdict(int)
    for run in passed:
        for t in run["timings"]:
            pods[t["step"]] += int(t["pods"])
    lines = paragraphs(
        TITLE,
        "KubeRay's autoscaler e2e scenarios (its `ray-operator/test/e2eautoscaler` suite) with a real "
        "Ray on the local control plane: `rayscale run --mode all --autoscaler-interval 1 "
        "--allow-gcs-address-override`, a real Ray head (PyPI `ray`) and, for "
        "every worker pod that kwok runs, a real `ray start` worker on this machine with the pod's "
        "resources, labels and name (e2e/raybridge). Demand comes from a Ray driver: actors, tasks, "
        "placement groups, `request_resources()`, and a RayResourceRequest. Each step is timed from "
        "what a watch of the pods and the GCS show: demand to the last new pod created; pods created "
        "to their Ray nodes alive in the GCS (mostly `ray start` on a busy 2-core machine); the end of "
        "the idle timeout to the pod's deletion (drain through the GCS, then delete); pods deleted by "
        "hand to their replacements' Ray nodes alive. Idle timeouts are 5-30 s instead of KubeRay's "
        "60 s default, to keep the suite short.",
        f"{provenance.sentence(results)} {len(passed)} scenarios passed"
        + (f", {len(failed)} failed ({', '.join(failed)})" if failed else "")
        + ". Reproduce with `make e2e` (every scenario, then this section).",
    )
    lines += [
        "| step | times | pods | median / max s | KubeRay's e2e suite allows |",
        "|---|---:|---:|---:|---|",
    ]
    for step, allows in KUBERAY_ALLOWS.items():
        values = by_step.pop(step, [])
        if values:
            lines.append(f"| {step} | {len(values)} | {pods[step]} | {_fmt(values)} | {allows} |")
    for step, values in sorted(by_step.items()):
        lines.append(f"| {step} | {len(values)} | {pods[step]} | {_fmt(values)} | |")
    medians = {step: statistics.median(v) for step, v in _steps(passed).items()}
    summary = [
        f"{medians[step]:.1f} s {label}"
        for step, label in (
            ("demand -> pods created", "from demand to the pods created"),
            ("pods -> Ray nodes alive", "from the pods to their Ray nodes alive"),
            ("idle timeout -> pod deleted", "from the end of the idle timeout to the pod deleted"),
        )
        if step in medians
    ]
    if summary:
        lines += [
            "",
            textwrap.fill(
                "Medians: " + "; ".join(summary) + ". KubeRay's suite gives each of these steps 2 "
                "minutes (5 for the largest), on kind with real images. The largest figures are "
                "Conservative upscaling's 10 workers, launched 5 at a time: the second 5 only once "
                "the first 5 run in Ray. KubeRay #10's workers take 15 s more to join on purpose "
                "(an init container sleeps).",
                width=100,
                break_on_hyphens=False,
            ),
        ]
    lines += ["", "Per scenario (seconds, in order):", "", "| scenario | timings |", "|---|---|"]
    for run in passed:
        steps = "; ".join(
            f"{t['step']} {t['seconds']:.1f} ({t['pods']})" + (f" [{t['detail']}]" if t["detail"] else "")
            for t in run["timings"]
        )
        lines.append(f"| `{run['test']}` | {steps or '-'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--write-docs", action="store_true", help=f"replace the section in {DOCS}")
    parser.add_argument(
        "--render-only", action="store_true", help=f"replace the section from {BLOCK.source} alone"
    )
    args = parser.parse_args(argv)
    if args.render_only:
        if not (ROOT / BLOCK.source).exists():
            parser.error(f"{BLOCK.source}: no stored results; run make e2e first")
        BLOCK.write(DOCS, render(json.loads((ROOT / BLOCK.source).read_text())))
        print(f"wrote {TITLE!r} to {DOCS} from {BLOCK.source}")
        return 0
    runs = load(args.results)
    if not runs:
        parser.error(f"no results in {args.results}: run the scenarios first (make e2e)")
    results = stored(runs)
    section = render(results)
    if args.write_docs:
        (ROOT / BLOCK.source).write_text(json.dumps(results, indent=2) + "\n")
        BLOCK.write(DOCS, section)
        print(f"wrote {TITLE!r} to {DOCS}")
    else:
        print(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
