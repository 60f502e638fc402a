"""Where, when and how a measurement ran, recorded in its results and shown beside its table.

`begin` at the start of a run and `end` when it is done give a dict that goes into the results
JSON under "provenance": the date (UTC), the commit (`git rev-parse --short HEAD`, "-dirty" when
tracked files differ from it), the machine (cores, MemTotal), the 1-minute load average at the
start and at the end (/proc/loadavg), and the command. `sentence` renders it for the docs; a
field the results do not hold is rendered "not recorded", never guessed.
"""

from __future__ import annotations

import datetime
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOT_RECORDED = "not recorded"
# the labels `sentence` writes; the docs test looks for each of them in every generated block
LABELS = ("Recorded run:", "commit", "machine", "load average", "command")


def load_average() -> float | None:
    """The 1-minute load average from /proc/loadavg (None where there is none)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def memory_gib() -> float | None:
    """MemTotal from /proc/meminfo, in GiB."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def commit() -> str | None:
    """The short commit of the working tree, with "-dirty" when tracked files differ from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def command(module: str | None = None, argv: Sequence[str] | None = None) -> str:
    """The command line that ran `module` (by default this process's `python -m` module) with
    `argv` (by default this process's arguments)."""
    if module is None:
        script = Path(sys.argv[0]).resolve()
        if script.name == "__main__.py" and not script.is_relative_to(ROOT):  # python -m a package
            module = script.parent.name
        elif script.suffix != ".py" or not script.is_relative_to(ROOT):
            return shlex.join([script.name, *(sys.argv[1:] if argv is None else argv)])
        else:
            module = ".".join(script.relative_to(ROOT).with_suffix("").parts)
    args = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["python", "-m", module, *args])


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def begin(cmd: str) -> dict[str, Any]:
    """The provenance known at the start of a run."""
    return {
        "date": now(),
        "commit": commit(),
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(),
        "load_start": load_average(),
        "command": cmd,
    }


def end(started: Mapping[str, Any]) -> dict[str, Any]:
    """`started` with the load average at the end and the time the run ended."""
    return {**started, "load_end": load_average(), "ended": now()}


def _or_missing(value: Any, fmt: str = "{}") -> str:
    return NOT_RECORDED if value is None else fmt.format(value)


def sentence(results: Mapping[str, Any]) -> str:
    """One line for the docs from results["provenance"]; older results' "date", "machine" and
    "load" (the 1-minute load average at the start) stand in for what it lacks."""
    p: Mapping[str, Any] = results.get("provenance") or {}
    date = p.get("date", results.get("date"))
    gib = p.get("memory_gib")
    memory = f"memory {NOT_RECORDED}" if gib is None else f"{gib:.1f} GiB memory"
    if results.get("machine"):  # the generator's own description, e.g. "x86_64, 2 cores, Python 3.11.7"
        machine = f"{results['machine']}, {memory}"
    else:
        machine = f"{_or_missing(p.get('cores'))} cores, {memory}"
    start = p.get("load_start", results.get("load"))
    cmd = p.get("command")
    return (
        f"Recorded run: {_or_missing(date)}; commit {_or_missing(p.get('commit'))}; machine {machine};"
        f" load average (1 min) {_or_missing(start, '{:.2f}')} at the start,"
        f" {_or_missing(p.get('load_end'), '{:.2f}')} at the end;"
        f" command {NOT_RECORDED if cmd is None else '`' + cmd + '`'}."
    )
