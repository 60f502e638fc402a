"""The test side of driver_main.py: a long-lived Ray driver subprocess that takes commands.

One driver per test replaces the one-shot scripts of KubeRay's e2e suite (create_detached_actor.py,
terminate_detached_actor.py, ...): importing Ray costs seconds of CPU, so it is paid once.

    async with RayDriver.start(bridge.gcs_address, log) as ray:
        await ray.call("actor", name="a1", num_cpus=1)
        node_id = await eventually(lambda: ray.call("actor_node", name="a1"), timeout=60)

Commands go to the driver's stdin, one JSON object a line, each with an ``id``. Replies come back
on a pipe of their own as framed JSON (replies.py), each with the ``id`` of its command; a reply
to an earlier command (one whose caller timed out) is dropped. The driver's stdout and stderr,
where Ray prints whatever it likes, go to `log` only: they are kept (the tail is in every
DriverError) and never parsed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from e2e.raybridge import rayproc
from e2e.raybridge.replies import FrameError, ReplyReader
from hack.localk8s import launcher

__all__ = ["DriverError", "RayDriver"]

MAIN = Path(__file__).with_name("driver_main.py")
READY_ID = 0  # the id of the driver's first reply, once Ray is connected


class DriverError(AssertionError):
    """The driver failed a command or died; the message carries its log tail."""


class RayDriver:
    def __init__(self, process: asyncio.subprocess.Process, log: Path, replies: ReplyReader) -> None:
        self.process = process
        self.log = log
        self.replies = replies
        self._lock = asyncio.Lock()
        self._last_id = READY_ID

    @classmethod
    @contextlib.asynccontextmanager
    async def start(
        cls,
        gcs_address: str,
        log: Path,
        *,
        timeout: float = 120,  # noqa: ASYNC109
        submission_id: str | None = None,
    ) -> AsyncIterator[RayDriver]:
        log.parent.mkdir(parents=True, exist_ok=True)
        read_fd, write_fd = os.pipe()
        argv, preexec = launcher.dying_with_parent(
            [sys.executable, str(MAIN), gcs_address, rayproc.NODE_IP, str(write_fd)]
        )
        try:
            with log.open("ab") as out:
                process = await asyncio.create_subprocess_exec(
                    *argv,
                    env=rayproc.driver_env(
                        {"E2E_JOB_SUBMISSION_ID": submission_id} if submission_id else None
                    ),
                    stdin=asyncio.subprocess.PIPE,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    pass_fds=(write_fd,),
                    start_new_session=True,
                    preexec_fn=preexec,
                )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)  # the driver holds the only write end: its exit ends the channel
        driver = cls(process, log, await ReplyReader.open(read_fd))
        try:
            ready = await driver._reply(READY_ID, timeout)
            if not ready.get("ready"):
                raise DriverError(f"unexpected first reply {ready!r}\n{driver.tail()}")
            yield driver
        finally:
            await driver.close()

    async def call(self, op: str, *, timeout: float = 60, **kwargs: Any) -> Any:  # noqa: ASYNC109
        """Run one command; its value, or DriverError with the driver's error."""
        assert self.process.stdin is not None
        async with self._lock:
            self._last_id += 1
            command = {"id": self._last_id, "op": op, **kwargs}
            self.process.stdin.write((json.dumps(command) + "\n").encode())
            await self.process.stdin.drain()
            reply = await self._reply(self._last_id, timeout)
        if not reply.get("ok"):
            raise DriverError(f"{op} {kwargs}: {reply.get('error')}\n{reply.get('trace', '')}")
        return reply.get("value")

    async def _reply(self, wanted: int, timeout: float) -> dict[str, Any]:  # noqa: ASYNC109
        """The reply to command `wanted`; replies to earlier commands (late ones) are dropped."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                reply = await self.replies.get(max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                message = f"the Ray driver did not answer in {timeout:.0f}s"
                raise DriverError(f"{message}:\n{self.tail()}") from None
            except FrameError as exc:
                raise DriverError(f"the Ray driver's reply channel broke: {exc}\n{self.tail()}") from None
            if reply is None:
                await self.process.wait()
                raise DriverError(f"the Ray driver exited ({self.process.returncode}):\n{self.tail()}")
            if reply.get("id") == wanted:
                return reply
            if not isinstance(reply.get("id"), int) or reply["id"] > wanted:
                raise DriverError(f"a reply to no command sent: {reply!r}\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        """The end of the driver's log: what Ray and the driver printed."""
        return rayproc.file_tail(self.log, lines)

    async def close(self) -> None:
        await rayproc.end_process(self.process, 30)
        await self.replies.close()
