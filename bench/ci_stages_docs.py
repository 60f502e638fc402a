"""The tables of `python -m bench.ci_stages` in docs/development.md: one generated block per mode.

`render` turns the stored results (bench/results/ci_stages_fresh.json, ci_stages_warm.json) into
the block; `pytest_counts` reads the passed / failed / skipped counts from a stage's output. Both
are pure: `python -m bench.ci_stages --render-only [--fresh-caches]` renders again from the file.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.docs import Block, measured, paragraphs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "development.md"
MODES = ("fresh", "warm")
RESULTS = {mode: ROOT / "bench" / "results" / f"ci_stages_{mode}.json" for mode in MODES}
BLOCKS = {
    "fresh": Block(
        "bench.ci_stages:fresh",
        "bench/results/ci_stages_fresh.json",
        rerender="python -m bench.ci_stages --fresh-caches --render-only",
    ),
    "warm": Block(
        "bench.ci_stages:warm",
        "bench/results/ci_stages_warm.json",
        rerender="python -m bench.ci_stages --render-only",
    ),
}
TITLES = {
    "fresh": "### `make test` stage by stage, every cache empty (a new machine)",
    "warm": "### `make test` stage by stage, the machine's caches",
}
REPRODUCE = {"fresh": "`make ci-timings CI_ARGS=--fresh-caches`", "warm": "`make ci-timings`"}
CACHES = {
    "fresh": (
        "Every cache empty, as on a new machine: `HOME`, `XDG_CACHE_HOME`, `GOPATH`, `GOMODCACHE`,"
        " `GOCACHE` and `PIP_CACHE_DIR` point into a temporary directory (`RAYSCALE_CACHE` unset), so Go"
        " downloads and builds every module and pip fetches every package; configuration stays the"
        " machine's (`XDG_CONFIG_HOME`: Go's env file, pip's)."
    ),
    "warm": (
        "The machine's caches as they were (Go's module and build caches, ~/.cache/rayscale with the"
        " control plane's binaries, the oracle and Helm, pip's cache): only the clone and its `.venv`"
        " are new."
    ),
}
# where the caches of a run are, in the order the docs list them (the keys of results["disk_bytes"])
DISK_LABELS = {
    "gomodcache": "Go module cache",
    "gocache": "Go build cache",
    "rayscale_cache": "~/.cache/rayscale",
    "pip_cache": "pip cache",
    "venv": "the clone's `.venv`",
}

_WORDS = "passed|failed|skipped|deselected|xfailed|xpassed|warnings?|errors?|rerun"
_SUMMARY = re.compile(
    rf"^=*\s*(no tests ran|(?:\d+ (?:{_WORDS}), )*\d+ (?:{_WORDS})) in \d+(?:\.\d+)?s\b.*$", re.M
)
_COUNT = re.compile(rf"(\d+) ({_WORDS})")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PLURAL = {"error": "errors", "warning": "warnings"}


def pytest_counts(output: str) -> dict[str, int] | None:
    """The counts of every pytest summary line in `output`, added up ("448 passed, 3 skipped in
    40.1s"); None when pytest did not run."""
    counts: dict[str, int] | None = None
    for line in _SUMMARY.finditer(_ANSI.sub("", output)):
        counts = counts or {"passed": 0, "failed": 0, "skipped": 0}
        for number, word in _COUNT.findall(line.group(1)):
            key = _PLURAL.get(word, word)
            counts[key] = counts.get(key, 0) + int(number)
    return counts


_BUILT = re.compile(r"^(?P<name>[\w.-]+): built in (?P<seconds>\d+)s$", re.M)


def build_times(output: str) -> dict[str, int]:
    """What the build scripts say they took ("localk8s: built in 412s"), by script, in order."""
    return {found["name"]: int(found["seconds"]) for found in _BUILT.finditer(_ANSI.sub("", output))}


def _builds(stages: Sequence[Mapping[str, Any]]) -> list[str]:
    """A sentence per stage that built something: its builds' own times (they overlap)."""
    return [
        f"Inside `{s['command']}` (side by side, so they overlap), the builds took: "
        + ", ".join(f"{name} {seconds} s" for name, seconds in s["builds"].items())
        + "."
        for s in stages
        if s.get("builds")
    ]


def _fill(text: str) -> str:
    return textwrap.fill(text, width=100, break_on_hyphens=False)


def _seconds(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}" if value >= 1 else f"{value:.2f}"


def _load(value: float | None) -> str:
    return "not recorded" if value is None else f"{value:.2f}"


def _tests(counts: Mapping[str, int] | None) -> str:
    if counts is None:
        return "—"
    text = f"{counts['passed']} / {counts['failed']} / {counts['skipped']}"
    errors = counts.get("errors", 0)
    return text + (f" ({errors} errors)" if errors else "")


def _size(count: int | None) -> str:
    if count is None:
        return "none"
    return f"{count / 1e9:.2f} GB" if count >= 1e9 else f"{count / 1e6:.{0 if count >= 1e6 else 1}f} MB"


def _total(stages: Sequence[Mapping[str, Any]], test_stages: Sequence[str]) -> str | None:
    """The row of `make test` (every stage but the demo), when every one of them ran and passed."""
    ran = [s for s in stages if s["stage"] in test_stages]
    if [s["stage"] for s in ran] != list(test_stages) or any(s["exit"] for s in ran):
        return None
    counts: dict[str, int] = {}
    for s in ran:
        for key, value in (s["tests"] or {}).items():
            counts[key] = counts.get(key, 0) + value
    wall = sum(s["wall_s"] for s in ran)
    cpu = sum(s["cpu_s"] for s in ran)
    return (
        f"| **`make test`**: the stages above but `make demo` | **{_seconds(wall)}** | **{_seconds(cpu)}**"
        f" | 0 | {_tests(counts)} | {_load(ran[0]['load_start'])} → {_load(ran[-1]['load_end'])} |"
    )


def render(results: Mapping[str, Any]) -> str:
    """The block of one mode's results; results without stages render as "not measured yet"."""
    mode = results.get("mode", "fresh")
    stages: list[Mapping[str, Any]] = results.get("stages", [])
    test_stages: list[str] = results.get("test_stages", [])
    builds = (
        "first `make builds`, which builds everything the tests need side by side, one row"
        if any(s["stage"] == "builds" for s in stages)
        else "the builds first; Helm, which the tests build when it is absent, as a stage of its own"
    )
    about = (
        f"`make test`'s stages (the targets its `test:` rule needs, {builds}), then `make demo`, each"
        " run alone as `make <stage>` in a fresh `git clone` of the committed HEAD, as `.ci/run` runs"
        " `make test`."
        f" {CACHES[mode]} CPU s: user and system time of the stage's processes that ended within it"
        " (`getrusage(RUSAGE_CHILDREN)`); tests: pytest's summary, passed / failed / skipped."
    )
    if results.get("pip_find_links"):
        about += f" pip also took wheels from `PIP_FIND_LINKS` ({results['pip_find_links']})."
    lines = paragraphs(TITLES[mode], about)
    if not stages:
        lines += [f"Not measured yet: {REPRODUCE[mode]} measures it.", ""]
    else:
        lines += [
            "| stage | wall s | CPU s | exit | tests | load average (1 min) start → end |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for s in stages:
            lines.append(
                f"| `{s['command']}` | {_seconds(s['wall_s'])} | {_seconds(s['cpu_s'])} | {s['exit']}"
                f" | {_tests(s['tests'])} | {_load(s['load_start'])} → {_load(s['load_end'])} |"
            )
        total = _total(stages, test_stages)
        lines += [*([total] if total else []), ""]
        notes = _builds(stages)
        failed = next((s for s in stages if s["exit"]), None)
        if failed:
            notes.append(f"Stopped at `{failed['command']}` (exit {failed['exit']}): the rest did not run.")
        elif total is None:
            notes.append(
                f"Only {', '.join(s['stage'] for s in stages)} ran (`--stages`): not the whole of"
                " `make test`, so no total."
            )
        disk = results.get("disk_bytes", {})
        owner = (
            "in the temporary directory"
            if mode == "fresh"
            else "the machine's, with whatever else is in them"
        )
        sizes = ", ".join(f"{label} {_size(disk.get(key))}" for key, label in DISK_LABELS.items())
        in_all = sum(disk.get(key) or 0 for key in DISK_LABELS)
        notes.append(f"Disk used at the end by the caches ({owner}): {sizes}; {_size(in_all)} in all.")
        lines += [_fill(" ".join(notes)), ""]
    lines.append(_fill(measured(results, REPRODUCE[mode])))
    return "\n".join(lines).rstrip("\n") + "\n"


def write(results: Mapping[str, Any], page: Path = DOCS) -> None:
    """Rewrite the block of the results' mode in `page`; the other mode's block stays."""
    mode = results.get("mode", "fresh")
    BLOCKS[mode].write(page, render(results))
