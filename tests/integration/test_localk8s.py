"""The local control plane's launcher: loopback only, clean start and stop, no leftovers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hack.localk8s import launcher
from hack.localk8s.testcluster import ClusterHandle

from tests.support.polling import eventually_sync

LAUNCHER = Path(launcher.__file__).resolve()
SMALL = ["--scale", "cpu=1", "--scale", "gpu=1", "--scale", "tpu=0"]


def listening_sockets(pid: int) -> list[str]:
    """The local addresses on which process `pid` listens (TCP, IPv4 and IPv6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A = LISTEN
                found.append(decode_address(local))
    return found


def decode_address(hex_addr: str) -> str:
    addr, port = hex_addr.split(":")
    raw = bytes.fromhex(addr)
    if len(raw) == 4:
        host = ".".join(str(b) for b in reversed(raw))
    else:  # IPv6: four little-endian 32-bit words
        words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
        host = ":".join(b"".join(words)[i : i + 2].hex() for i in range(0, 16, 2))
    return f"{host}:{int(port, 16)}"


def component_pids(state: dict[str, object]) -> list[int]:
    comps = state["components"]
    assert isinstance(comps, list)
    return [int(c["pid"]) for c in comps]


def test_every_listener_is_on_loopback(cluster: ClusterHandle) -> None:
    if cluster.state_dir is None:
        pytest.skip("not the local control plane")
    state = cluster.state()
    pids = component_pids(state)
    assert len(pids) == 5  # etcd, apiserver, controller-manager, scheduler, kwok
    seen = []
    for pid in pids:
        for address in listening_sockets(pid):
            seen.append(address)
            host = address.rsplit(":", 1)[0]
            assert host in ("127.0.0.1", "0000:0000:0000:0000:0000:0000:0000:0001"), (
                f"PID {pid} listens on {address}"
            )
    assert len(seen) >= 5, seen


def test_up_reuses_a_running_cluster_and_down_stops_exactly_its_processes(
    cluster: ClusterHandle, tmp_path: Path
) -> None:
    state_dir = tmp_path / "c"
    up = [
        sys.executable,
        str(LAUNCHER),
        "up",
        "--dir",
        str(state_dir),
        "--bindir",
        str(cluster.bindir),
        *SMALL,
    ]
    first = subprocess.run(up, capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"export KUBECONFIG={state_dir / 'kubeconfig'}"
    state = json.loads((state_dir / "state.json").read_text())
    pids = [int(state["supervisor"]), *component_pids(state)]
    assert all(launcher.pid_alive(p) for p in pids)

    second = subprocess.run(up, capture_output=True, text=True, timeout=60, check=False)
    assert second.returncode == 0, second.stderr
    assert "reusing" in second.stderr
    assert json.loads((state_dir / "state.json").read_text())["supervisor"] == state["supervisor"]

    down = subprocess.run(
        [sys.executable, str(LAUNCHER), "down", "--dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert down.returncode == 0, down.stderr
    eventually_sync(
        lambda: not any(launcher.pid_alive(p) for p in pids),
        timeout=30,
        interval=0.1,
        message="all processes gone",
    )
    assert not state_dir.exists()


def test_killing_the_test_process_stops_the_whole_control_plane(
    cluster: ClusterHandle, tmp_path: Path
) -> None:
    """A test run killed with SIGKILL leaves no control-plane process behind."""
    state_dir = tmp_path / "c"
    # Stand-in for pytest: a parent that starts the supervisor as testcluster does.
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(600)",
            sys.executable,
            str(LAUNCHER),
            "run",
            "--dir",
            str(state_dir),
            "--bindir",
            str(cluster.bindir),
            "--parent-death-signal",
            *SMALL,
        ],
    )
    try:
        eventually_sync(
            lambda: (state_dir / "ready").exists(), timeout=300, interval=0.1, message="control plane ready"
        )
        state = json.loads((state_dir / "state.json").read_text())
        pids = [int(state["supervisor"]), *component_pids(state)]
        assert all(launcher.pid_alive(p) for p in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        eventually_sync(
            lambda: not any(launcher.pid_alive(p) for p in pids),
            timeout=60,
            interval=0.1,
            message="all processes gone",
        )
        eventually_sync(
            lambda: not state_dir.exists(), timeout=30, interval=0.1, message="state directory removed"
        )
    finally:
        if parent.poll() is None:
            parent.kill()
