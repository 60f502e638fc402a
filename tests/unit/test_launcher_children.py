"""Children of test processes die with them, and start with no Python between fork and exec."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest
from hack.localk8s import launcher
from tests.support.builders import ROOT
from tests.support.polling import eventually_sync

INTERMEDIATE = """
import subprocess, sys
from hack.localk8s import launcher
argv, preexec = launcher.dying_with_parent(["sleep", "600"])
child = subprocess.Popen(argv, preexec_fn=preexec)
print(child.pid, flush=True)
sys.stdin.read()
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"  # a zombie has died
    except FileNotFoundError:
        return False


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip()
    except FileNotFoundError:
        return ""


def test_no_preexec_fn_when_setpriv_is_there() -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("no util-linux setpriv on this machine")
    argv, preexec = launcher.dying_with_parent(["sleep", "1"])
    assert preexec is None, "a preexec_fn runs Python's fork handlers (gRPC's crash the child)"
    assert argv[-2:] == ["sleep", "1"]


def test_the_child_dies_with_its_parent() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", INTERMEDIATE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        assert _alive(child)
        # setpriv asks for the death signal, then execs sleep: kill the parent only once the
        # child runs sleep, or the parent may die before there is anything to signal the child
        eventually_sync(lambda: _command(child) == "sleep", timeout=10, interval=0.05, message="sleep runs")
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        eventually_sync(
            lambda: not _alive(child), timeout=10, interval=0.05, message="the child dies with its parent"
        )
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


IGNORES_SIGTERM = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(600)
"""


def test_end_stops_a_process_with_sigterm_and_reaps_it() -> None:
    proc = subprocess.Popen(["sleep", "600"])
    assert launcher.end(proc, 10)
    assert proc.returncode == -signal.SIGTERM


def test_end_kills_a_process_that_ignores_sigterm_after_the_grace() -> None:
    proc = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    assert not launcher.end(proc, 0.2)
    assert proc.returncode == -signal.SIGKILL
    proc.stdout.close()


def test_end_of_an_exited_process_is_true() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert launcher.end(proc, 10)
