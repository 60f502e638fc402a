"""The local control plane's components listen on ports no outgoing connection can take first."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from hack.localk8s import launcher


def test_free_ports_are_distinct_listenable_and_below_the_ephemeral_range() -> None:
    low = launcher._ephemeral_low()
    ports = [launcher.free_port() for _ in range(20)]
    assert len(set(ports)) == len(ports)
    if low - launcher.PORT_FLOOR >= 1000:
        assert all(launcher.PORT_FLOOR <= p < low for p in ports)
    for port in ports[:3]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_no_room_below_the_range_falls_back_to_the_kernels_pick(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "ip_local_port_range"
    fake.write_text(f"{launcher.PORT_FLOOR + 10}\t60999\n")
    monkeypatch.setattr(launcher, "EPHEMERAL_RANGE", fake)
    assert launcher._ephemeral_low() == launcher.PORT_FLOOR + 10
    assert launcher.free_port() > 0


def test_an_unreadable_range_is_the_kernels_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(launcher, "EPHEMERAL_RANGE", tmp_path / "absent")
    assert launcher._ephemeral_low() == 32768


def test_a_preferred_port_is_taken_while_free_and_never_twice() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        preferred = int(s.getsockname()[1])
    assert launcher.free_port(preferred=preferred) == preferred
    assert launcher.free_port(preferred=preferred) != preferred  # handed out already


def test_a_busy_preferred_port_gives_another() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = int(busy.getsockname()[1])
        assert launcher.free_port(preferred=taken) != taken


def test_a_port_of_every_interface_is_free_on_every_interface() -> None:
    port = launcher.free_port("")
    with socket.socket() as s:
        s.bind(("", port))
