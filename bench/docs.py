"""Writes the "Scheduler" section of docs/benchmarks.md from bench results, keeping other sections,
and the generated blocks every measurement writes into the docs (`Block`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench import provenance

TITLE = "## Scheduler"

INTRO = """\
One decision of rayscale's scheduler against Ray {ray}'s `ResourceDemandScheduler` (autoscaler v2)
on the same input: four worker groups (8 CPU/32Gi; 32 CPU/128Gi; 8 CPU + 1 GPU/32Gi; 8 CPU +
4 TPU/32Gi), pending tasks and actors in a fixed mix of eight shapes (CPU-only with and
without memory, GPU and TPU work; `bench/workload.py`), and 0 or 500 running hosts that are
0-90% used. Ray gets the `SchedulingRequest` its reconciler builds: node type configs,
one instance per host with its GCS node state, and the demand grouped by shape with counts,
as GCS reports it. Times are for the decision alone: rayscale after a warm-up, median of 5 to 25 runs;
Ray in a subprocess, median of 3 when one run takes under 1 s, else one run; the
subprocess is stopped after {timeout:.0f} s of wall time (Ray's import and request building, a few
seconds, included). Hosts are the new hosts each launches. Lower bounds on
new hosts: *per resource* (total demand minus free capacity over the largest host, per
resource) and *subset* (demand that only some groups can host needs hosts of those groups;
the rest must still fit; `bench/bounds.py`). rayscale fills existing hosts with Ray's own best-node
greedy algorithm (`autoscaler/scheduling/greedy.py`) and packs the new hosts by shape
(`autoscaler/scheduling/packing.py`) where that places all Ray's greedy would on fewer hosts.

{recorded}
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
            ray=results["ray_version"],
            timeout=results["timeout_seconds"],
            recorded=textwrap.fill(
                provenance.sentence(results) + " Reproduce with `make bench`.",
                width=100,
                break_on_hyphens=False,
            ),
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
    return (
        "\n".join(lines) + "\n\n" + textwrap.fill(summary(results), width=100, break_on_hyphens=False) + "\n"
    )


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


@dataclasses.dataclass(frozen=True)
class Block:
    """A generated block of a docs page: what `generator` renders from `source`, between markers.

    Only the text between the markers is the generator's; the section's heading and any prose
    after the end marker stay as they are when the block is written again.
    """

    generator: str  # the module that measures and renders, e.g. "bench.scheduler_vs_ray"
    source: str  # the stored results it renders from, relative to the repository
    rerender: str = ""  # the command that renders the block again from `source` alone

    def begin(self) -> str:
        again = self.rerender or f"python -m {self.generator} --render-only"
        return (
            f"<!-- BEGIN GENERATED by {self.generator} from {self.source}; render again with"
            f" `{again}`; edit the generator, not this block -->"
        )

    def end(self) -> str:
        return f"<!-- END GENERATED by {self.generator} -->"

    def pattern(self) -> re.Pattern[str]:
        name = re.escape(self.generator)
        return re.compile(rf"<!-- BEGIN GENERATED by {name} .*?<!-- END GENERATED by {name} -->", re.S)

    def wrap(self, section: str) -> str:
        """`section` (its heading first) as the block: the markers around all but the heading."""
        body = section.split("\n", 1)[1].strip("\n") if "\n" in section else ""
        return f"{self.begin()}\n{body}\n{self.end()}"

    def find(self, text: str) -> str | None:
        """The block as it stands in `text`, markers included."""
        found = self.pattern().search(text)
        return None if found is None else found.group(0)

    def write(self, path: Path, section: str) -> None:
        """Replace the block in `path`; where there is none yet, the section headed as `section` is."""
        text = path.read_text() if path.exists() else ""
        if self.find(text) is not None:
            path.write_text(self.pattern().sub(lambda _: self.wrap(section), text, count=1))
            return
        title = section.split("\n", 1)[0]
        replace_section(path, title, f"{title}\n\n{self.wrap(section)}\n")


SCHEDULER = Block("bench.scheduler_vs_ray", "bench/results/scheduler.json")


def write_section(path: Path, results: dict[str, Any]) -> None:
    """Replace the Scheduler section's generated block; everything else stays as it is."""
    SCHEDULER.write(path, render(results))


def replace_section(path: Path, title: str, section: str) -> None:
    """Replace (or append) the section headed `title` with `section`; every other section stays."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section.rstrip("\n") + "\n\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")


def measured(results: Mapping[str, Any], reproduce: str) -> str:
    """The sentence of a section on where, when and how its figures were measured."""
    note = f" {results['note'].strip().rstrip('.')}." if results.get("note") else ""
    return f"{provenance.sentence(results)}{note} Reproduce with {reproduce}."


def paragraphs(title: str, *texts: str) -> list[str]:
    """A section's heading and its paragraphs, wrapped at 100 columns, as lines ending in a blank."""
    lines = [title, ""]
    for text in texts:
        lines += [textwrap.fill(text, width=100, break_on_hyphens=False), ""]
    return lines


def add_output_options(parser: argparse.ArgumentParser, stored: Path) -> None:
    """--note, --out, --write-docs, --docs-from and --render-only, as every benchmark that writes a
    section has them; the results are kept in `stored` unless --out says elsewhere."""
    parser.add_argument("--note", default="", help="a sentence for the docs, e.g. what else ran")
    parser.add_argument(
        "--out", type=Path, default=stored, help=f"write the results as JSON here ({stored.name})"
    )
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--docs-from", type=Path, help="only rewrite the docs from a JSON of --out")
    parser.add_argument(
        "--render-only", action="store_true", help="only rewrite the docs from the stored results (--out)"
    )


def finish(
    args: argparse.Namespace,
    measure: Callable[[], dict[str, Any]],
    write: Callable[[dict[str, Any]], None],
    shown: Callable[[dict[str, Any]], Any] = lambda results: results,
) -> int:
    """What a benchmark's main does after parsing add_output_options' flags.

    --docs-from (--render-only: from --out): only `write` the saved results (with --note, when
    given). Else `measure`, print (what `shown` keeps of) the results, save them in --out and
    `write` them with --write-docs.
    """
    source = args.out if args.render_only else args.docs_from
    if source and not source.exists():
        raise SystemExit(f"{source}: no stored results; run the benchmark first")
    if source:
        saved = json.loads(source.read_text())
        write(saved | ({"note": args.note} if args.note else {}))
        return 0
    results = measure()
    print(json.dumps(shown(results), indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    if args.write_docs:
        write(results)
    return 0
