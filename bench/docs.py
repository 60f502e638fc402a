"""Writes the "Scheduler" section of docs/benchmarks.md from bench results, keeping other sections."""

from __future__ import annotations

import argparse
import json
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

TITLE = "## Scheduler"

INTRO = """\
One decision of rayscale's scheduler against Ray {ray}'s `ResourceDemandScheduler` (autoscaler v2)
on the same input: four worker groups (8 CPU/32Gi; 32 CPU/128Gi; 8 CPU + 1 GPU/32Gi; 8 CPU +
4 TPU/32Gi), pending tasks and actors in a fixed mix of eight shapes (CPU-only with and
without memory, GPU and TPU work; `bench/workload.py`), and 0 or 500 running hosts that are
0-90% used. Ray gets the `SchedulingRequest` its reconciler builds: node type configs,
one instance per host with its GCS node state, and the demand grouped by shape with counts,
as GCS reports it. Times are for the decision alone: rayscale after a warm-up, median of 3;
Ray in a subprocess, median of 3 when one run takes under 1 s, else one run; the
subprocess is stopped after {timeout:.0f} s of wall time (Ray's import and request building, a few
seconds, included). Hosts are the new hosts each launches. Lower bounds on
new hosts: *per resource* (total demand minus free capacity over the largest host, per
resource) and *subset* (demand that only some groups can host needs hosts of those groups;
the rest must still fit; `bench/bounds.py`).

Measured on {machine}. Reproduce with `make bench`.
"""


def _seconds(value: float | None) -> str:
    if value is None:
        return "> 120 (stopped)"
    return f"{value:.4f}" if value < 1 else f"{value:.2f}"


def render(results: dict[str, Any]) -> str:
    lines = [
        TITLE,
        "",
        INTRO.format(
            ray=results["ray_version"], timeout=results["timeout_seconds"], machine=results["machine"]
        ),
        "| requests | running hosts | rayscale s | Ray s | Ray / rayscale | rayscale hosts | Ray hosts"
        " | bound per resource | bound subset | rayscale over subset bound |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results["rows"]:
        ratio = "—" if r["ray_seconds"] is None else f"{r['ray_seconds'] / r['rayscale_seconds']:.0f}x"
        if r["ray_seconds"] is None:
            ratio = f"> {results['timeout_seconds'] / r['rayscale_seconds']:.0f}x"
        gap = "0%" if not r["bound_subset"] else f"{(r['rayscale_hosts'] / r['bound_subset'] - 1) * 100:.2f}%"
        ray_hosts = "—" if r["ray_hosts"] is None else str(r["ray_hosts"])
        lines.append(
            f"| {r['requests']:,} | {r['running']} | {_seconds(r['rayscale_seconds'])}"
            f" | {_seconds(r['ray_seconds'])}"
            f" | {ratio} | {r['rayscale_hosts']:,} | {ray_hosts} | {r['bound_per_resource']:,}"
            f" | {r['bound_subset']:,} | {gap} |"
        )
    return "\n".join(lines) + "\n\n" + summary(results) + "\n"


def summary(results: dict[str, Any]) -> str:
    """What the table says, in words, computed from the same results."""
    rows = results["rows"]
    finished = [r for r in rows if r["ray_seconds"] is not None]
    worst = max(rows, key=lambda r: r["rayscale_seconds"])
    text = [
        f"Slowest rayscale decision: {worst['rayscale_seconds']:.3f} s"
        f" ({worst['requests']:,} requests, {worst['running']} running hosts)."
    ]
    if finished:
        ratios = [r["ray_seconds"] / r["rayscale_seconds"] for r in finished]
        fewer = sum(1 for r in finished if r["rayscale_hosts"] < r["ray_hosts"])
        more = sum(1 for r in finished if r["rayscale_hosts"] > r["ray_hosts"])
        text.append(
            f"Ray finished {len(finished)} of {len(rows)} cases within {results['timeout_seconds']:.0f} s;"
            f" on those rayscale was {min(ratios):.0f}x to {max(ratios):.0f}x faster and launched fewer hosts"
            f" in {fewer}, as many in {len(finished) - fewer - more} and more in {more}."
        )
    gaps = [r["rayscale_hosts"] / r["bound_subset"] - 1 for r in rows if r["bound_subset"]]
    if gaps:
        text.append(f"rayscale's largest gap over the subset lower bound: {max(gaps) * 100:.2f}%.")
    return " ".join(text)


def write_section(path: Path, results: dict[str, Any], notes: str = "") -> None:
    """Replace (or append) the Scheduler section; every other section stays as it is."""
    section = render(results) + (("\n" + notes.strip() + "\n") if notes.strip() else "")
    replace_section(path, TITLE, section)


def replace_section(path: Path, title: str, section: str) -> None:
    """Replace (or append) the section headed `title` with `section`; every other section stays."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section.rstrip("\n") + "\n\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")


def paragraphs(title: str, *texts: str) -> list[str]:
    """A section's heading and its paragraphs, wrapped at 100 columns, as lines ending in a blank."""
    lines = [title, ""]
    for text in texts:
        lines += [textwrap.fill(text, width=100, break_on_hyphens=False), ""]
    return lines


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """--note, --out, --write-docs and --docs-from, as every benchmark that writes a section has them."""
    parser.add_argument("--note", default="", help="a sentence for the docs, e.g. what else ran")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--docs-from", type=Path, help="only rewrite the docs from a JSON of --out")


def finish(
    args: argparse.Namespace,
    measure: Callable[[], dict[str, Any]],
    write: Callable[[dict[str, Any]], None],
    shown: Callable[[dict[str, Any]], Any] = lambda results: results,
) -> int:
    """What a benchmark's main does after parsing add_output_options' flags.

    --docs-from: only `write` the saved results (with --note, when given). Else `measure`, print
    (what `shown` keeps of) the results, save them with --out and `write` them with --write-docs.
    """
    if args.docs_from:
        saved = json.loads(args.docs_from.read_text())
        write(saved | ({"note": args.note} if args.note else {}))
        return 0
    results = measure()
    print(json.dumps(shown(results), indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    if args.write_docs:
        write(results)
    return 0
