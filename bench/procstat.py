"""What /proc says about a benchmarked process (Linux): CPU time, memory, load average.

`cpu_seconds` and `memory_kib` read one process. The `tree_` variants add its descendants, for an
operator that forks: the CPU time of the living ones and, through the process's own cutime and
cstime, of the children it already waited for; VmHWM summed over the living ones (each process's
own lifetime peak, so an upper bound of the tree's peak).
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def _stat_fields(pid: int, proc: Path = PROC) -> list[str]:
    """The fields of /proc/PID/stat after the command name, which may hold spaces and parentheses.

    Index 0 is the state (field 3 of proc(5)); utime is index 11, cutime 13.
    """
    return (proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()


def memory_kib(pid: int, proc: Path = PROC) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in KiB."""
    found: dict[str, int] = {}
    for line in (proc / str(pid) / "status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


def cpu_seconds(pid: int, proc: Path = PROC) -> float:
    """User plus system CPU time of a process so far."""
    fields = _stat_fields(pid, proc)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int, proc: Path = PROC) -> list[int]:
    """The living descendants of `pid` (children, their children, ...), from every /proc/N/stat."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int(_stat_fields(int(entry.name), proc)[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def tree_cpu_seconds(pid: int, proc: Path = PROC) -> float:
    """CPU time (user + system) of `pid`, its living descendants and the children it reaped."""
    fields = _stat_fields(pid, proc)
    ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    for child in descendants(pid, proc):
        try:
            child_fields = _stat_fields(child, proc)
        except OSError:
            continue  # exited meanwhile: its time moves to its parent's cutime once reaped
        ticks += int(child_fields[11]) + int(child_fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_memory_kib(pid: int, proc: Path = PROC) -> dict[str, int]:
    """VmRSS and VmHWM (each summed) of `pid` and its living descendants, in KiB; `processes`."""
    total = memory_kib(pid, proc) | {"processes": 1}
    for child in descendants(pid, proc):
        try:
            found = memory_kib(child, proc)
        except OSError:
            continue
        total["processes"] += 1
        for key in ("VmRSS", "VmHWM"):
            total[key] = total.get(key, 0) + found.get(key, 0)
    return total


def load_average(proc: Path = PROC) -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages of /proc/loadavg."""
    one, five, fifteen = (proc / "loadavg").read_text().split()[:3]
    return float(one), float(five), float(fifteen)
