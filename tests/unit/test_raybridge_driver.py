"""The e2e Ray driver's replies never mix with what Ray prints (e2e/raybridge/driver.py, replies.py).

The real driver_main.py runs with a stand-in ``ray`` package (first on PYTHONPATH) that prints
lines which look exactly like replies, the way Ray does: on stdout and stderr at import and while
commands run, from a child process that inherited them, and through a copy of stdout taken at
import (as Ray's C++ core and its loggers hold one). None of it may be taken for a reply; all of it
is kept in the driver's log. Before the replies had a channel of their own, the import-time line
was read as the "ready" reply and the copy of stdout fed the reader a forged reply.
"""

from __future__ import annotations

import asyncio
import os
import textwrap
from pathlib import Path

import pytest
from e2e.raybridge.driver import DriverError, RayDriver
from e2e.raybridge.replies import FrameError, ReplyReader, encode_frame

NOISE = '{"ok": true, "value": "noise from ray", "id": 1}'

FAKE_RAY = {
    "ray/__init__.py": f'''
        """A stand-in for Ray that writes reply-like lines wherever Ray's output can go."""
        import os
        import subprocess
        import sys
        import time
        from pathlib import Path

        from ray import job_config

        NOISE = {NOISE!r}
        print(NOISE, flush=True)  # at import, on stdout
        print(NOISE, file=sys.stderr, flush=True)
        _held_stdout = os.dup(1)  # a logger's own copy of the process's stdout
        _calls = []


        def remote(thing=None, **_):
            return thing


        def init(**_):
            print(NOISE, flush=True)
            os.write(_held_stdout, (NOISE + "\\n").encode())


        def nodes():
            _calls.append(1)
            gate = os.environ.get("FAKE_RAY_GATE")
            if gate and len(_calls) == 1:  # the first call blocks until the test opens the gate
                while not Path(gate).exists():
                    time.sleep(0.01)
            os.write(_held_stdout, (NOISE + "\\n").encode())
            print(NOISE, flush=True)
            print(NOISE, file=sys.stderr, flush=True)
            subprocess.run([sys.executable, "-c", f"print({{NOISE!r}})"], check=True)  # a child's output
            node = f"n{{len(_calls)}}"
            return [{{"NodeID": node, "Alive": True, "Resources": {{"CPU": 1.0}}, "Labels": {{}}}}]
    ''',
    "ray/job_config.py": """
        class JobConfig:
            def __init__(self, **_):
                pass
    """,
    "ray/autoscaler/__init__.py": "",
    "ray/autoscaler/sdk.py": """
        def request_resources(**_):
            pass
    """,
    "ray/util/__init__.py": "",
    "ray/util/placement_group.py": """
        def placement_group(*_, **__):
            pass


        def placement_group_table(*_):
            pass


        def remove_placement_group(*_):
            pass
    """,
}


def node(name: str) -> list[dict[str, object]]:
    return [{"node_id": name, "alive": True, "resources": {"CPU": 1.0}, "labels": {}}]


@pytest.fixture
def fake_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "fake-ray"
    for name, text in FAKE_RAY.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.setenv("PYTHONPATH", str(root))
    return root


async def test_replies_are_never_read_from_rays_output(fake_ray: Path, tmp_path: Path) -> None:
    log = tmp_path / "driver.log"
    async with RayDriver.start("127.0.0.2:1", log, timeout=60) as driver:
        assert await driver.call("nodes", timeout=60) == node("n1")
        assert await driver.call("nodes", timeout=60) == node("n2")
    # Ray's lines are kept for failures: import (2), init (2), and 4 for each call.
    assert log.read_text().count("noise from ray") == 12


async def test_a_late_reply_is_not_taken_for_the_next_one(
    fake_ray: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = tmp_path / "gate"
    monkeypatch.setenv("FAKE_RAY_GATE", str(gate))
    async with RayDriver.start("127.0.0.2:1", tmp_path / "driver.log", timeout=60) as driver:
        with pytest.raises(DriverError, match="did not answer in 0s"):
            await driver.call("nodes", timeout=0.3)  # blocked in the driver
        gate.touch()
        assert await driver.call("nodes", timeout=60) == node("n2")  # not the first call's late "n1"


async def test_a_driver_that_dies_is_reported_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken-ray"
    (broken / "ray").mkdir(parents=True)
    (broken / "ray" / "__init__.py").write_text("print('Ray cannot start here')\nraise SystemExit(3)\n")
    monkeypatch.setenv("PYTHONPATH", str(broken))
    with pytest.raises(DriverError, match=r"exited \(3\)[\s\S]*Ray cannot start here"):
        async with RayDriver.start("127.0.0.2:1", tmp_path / "driver.log", timeout=60):
            pass


async def read_all(data: bytes) -> list[object]:
    """What a ReplyReader makes of `data` written to a pipe and closed."""
    read_fd, write_fd = os.pipe()
    reader = await ReplyReader.open(read_fd)

    def write() -> None:  # more than a pipe holds blocks until the reader reads: not on the loop
        with os.fdopen(write_fd, "wb") as out:
            out.write(data)

    writing = asyncio.create_task(asyncio.to_thread(write))
    found: list[object] = []
    try:
        while (reply := await reader.get(10)) is not None:
            found.append(reply)
    except FrameError as exc:
        found.append(exc)
    finally:
        await writing
        await reader.close()
    return found


async def test_frames_are_read_whole_and_in_order() -> None:
    assert await read_all(encode_frame({"id": 1}) + encode_frame({"id": 2, "value": "x" * 100_000})) == [
        {"id": 1},
        {"id": 2, "value": "x" * 100_000},
    ]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (NOISE.encode() + b"\n", "not framed JSON"),  # a line of text where frames belong
        (encode_frame({"id": 1})[:-2], "ended inside a frame"),
        (b"\x00\x00\x00\x02[]", "not a JSON object"),
    ],
)
async def test_what_is_not_a_frame_breaks_the_channel_loudly(data: bytes, error: str) -> None:
    *before, last = await read_all(data)
    assert before == []
    assert isinstance(last, FrameError)
    assert error in str(last)


async def test_a_reader_that_waits_gives_up_without_losing_a_frame() -> None:
    read_fd, write_fd = os.pipe()
    reader = await ReplyReader.open(read_fd)
    try:
        with pytest.raises(TimeoutError):
            await reader.get(0.05)
        frame = encode_frame({"id": 7})
        os.write(write_fd, frame[:3])  # half a header, then the rest
        with pytest.raises(TimeoutError):
            await reader.get(0.05)
        os.write(write_fd, frame[3:])
        assert await reader.get(10) == {"id": 7}
    finally:
        os.close(write_fd)
        await reader.close()
