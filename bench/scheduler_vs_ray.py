"""rayscale's scheduler against Ray 2.60's ResourceDemandScheduler, on the same inputs.

    python -m bench.scheduler_vs_ray [--write-docs] [--sizes 100,1000] [--running 0,500]

Creates ~/.cache/rayscale/venv-ray-2.60.0 with ray==2.60.0 from PyPI on first use. For each
case it times one rayscale decision (after a warm-up, the median of 5 to 25 runs, the decision
alone) and one Ray decision in a subprocess (schedule() alone; median of 3 if under 1 s; capped
at 120 s), and reports the hosts each launches against two lower bounds. Results go to
bench/results/scheduler.json with the run's provenance (date, commit, machine, load, command);
--write-docs also rewrites the "Scheduler" section of docs/benchmarks.md, and --render-only only
rewrites it from the stored results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

from bench import provenance
from bench.bounds import lower_bounds
from bench.docs import write_section
from bench.workload import scenario
from rayscale.autoscaler.scenario import parse_scenario
from rayscale.autoscaler.scheduler import schedule

RAY_VERSION = "2.60.0"
RAY_VENV = Path(
    os.environ.get("RAYSCALE_RAY_VENV", Path.home() / ".cache/rayscale" / f"venv-ray-{RAY_VERSION}")
)
RAY_TIMEOUT = 120.0
MIN_RUNS, MAX_RUNS, RUN_SECONDS = 5, 25, 1.0  # rayscale's timed runs per case
HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "scheduler.json"
DOCS = HERE.parent / "docs" / "benchmarks.md"


def ray_python() -> Path:
    python = RAY_VENV / "bin" / "python"
    check = [str(python), "-c", f"import ray, sys; sys.exit(ray.__version__ != '{RAY_VERSION}')"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    print(f"installing ray=={RAY_VERSION} into {RAY_VENV} ...", file=sys.stderr)
    venv.create(RAY_VENV, with_pip=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"ray=={RAY_VERSION}"], check=True)
    return python


def run_rayscale(doc: dict[str, Any]) -> tuple[float, dict[str, int], int]:
    snapshot = parse_scenario(doc)
    schedule(snapshot)  # warm up
    times: list[float] = []
    # On a shared machine one run can lose its core for tens of milliseconds: the median of at
    # least 5 runs (as many as take 1 s, at most 25) is what a decision takes.
    while len(times) < MIN_RUNS or (sum(times) < RUN_SECONDS and len(times) < MAX_RUNS):
        start = time.perf_counter()
        decision = schedule(snapshot)
        times.append(time.perf_counter() - start)
    launch = {name: g.launch for name, g in decision.groups.items() if g.launch}
    unmet = sum(u.count for u in decision.unmet)
    return statistics.median(times), launch, unmet


def run_ray(python: Path, doc: dict[str, Any]) -> dict[str, Any] | None:
    try:
        done = subprocess.run(
            [str(python), str(HERE / "ray_runner.py")],
            input=json.dumps(doc),
            capture_output=True,
            text=True,
            timeout=RAY_TIMEOUT,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return None
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--running", default="0,500")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument(
        "--render-only",
        "--docs-only",
        dest="render_only",
        action="store_true",
        help=f"only rewrite the docs from the stored results ({RESULTS.relative_to(HERE.parent)})",
    )
    args = parser.parse_args(argv)
    if args.render_only:
        write_section(DOCS, json.loads(RESULTS.read_text()))
        return 0
    started = provenance.begin(provenance.command("bench.scheduler_vs_ray", argv))
    python = ray_python()
    rows = []
    for requests in (int(s) for s in args.sizes.split(",")):
        for running in (int(s) for s in args.running.split(",")):
            doc = scenario(requests, running)
            per_resource, subset = lower_bounds(doc)
            ours, launch, unmet = run_rayscale(doc)
            ray = run_ray(python, doc)
            row = {
                "requests": requests,
                "running": running,
                "rayscale_seconds": ours,
                "rayscale_launch": launch,
                "rayscale_hosts": sum(launch.values()),
                "rayscale_unmet": unmet,
                "ray_seconds": None if ray is None else ray["seconds"],
                "ray_launch": None if ray is None else ray["launch"],
                "ray_hosts": None if ray is None else sum(ray["launch"].values()),
                "bound_per_resource": per_resource,
                "bound_subset": subset,
            }
            rows.append(row)
            ray_text = "timeout" if ray is None else f"{ray['seconds']:.3f}s {row['ray_hosts']} hosts"
            print(
                f"{requests:>7} requests {running:>3} running:"
                f" rayscale {ours:.4f}s {row['rayscale_hosts']} hosts;"
                f" ray {ray_text}; bounds {per_resource}/{subset}",
                flush=True,
            )
    cpu = platform.processor() or platform.machine()
    machine = f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"
    results = {
        "ray_version": RAY_VERSION,
        "timeout_seconds": RAY_TIMEOUT,
        "machine": machine,
        "provenance": provenance.end(started),
        "rows": rows,
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    if args.write_docs:
        write_section(DOCS, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
