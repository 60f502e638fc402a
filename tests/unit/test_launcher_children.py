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
