"""The test side of driver_main.py: a long-lived Ray driver subprocess that takes commands.

One driver per test replaces the one-shot scripts of KubeRay's e2e suite (create_detached_actor.py,
terminate_detached_actor.py, ...): importing Ray costs seconds of CPU, so it is paid once.

    async with RayDriver.start(bridge.gcs_address, log) as ray:
        await ray.call("actor", name="a1", num_cpus=1)
        node_id = await eventually(lambda: ray.call("actor_node", name="a1"), timeout=60)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from e2e.raybridge import rayproc

__all__ = ["DriverError", "RayDriver"]

MAIN = Path(__file__).with_name("driver_main.py")


class DriverError(AssertionError):
    """The driver failed a command or died; the message carries its log tail."""


class RayDriver:
    def __init__(self, process: asyncio.subprocess.Process, log: Path) -> None:
        self.process = process
        self.log = log
        self._lock = asyncio.Lock()

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
        with log.open("ab") as err:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                str(MAIN),
                gcs_address,
                rayproc.NODE_IP,
                env=rayproc.driver_env({"E2E_JOB_SUBMISSION_ID": submission_id} if submission_id else None),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                start_new_session=True,
                preexec_fn=rayproc.set_parent_death_signal,
                limit=16 * 1024 * 1024,
            )
        driver = cls(process, log)
        try:
            ready = await driver._read(timeout)
            if not ready.get("ready"):
                raise DriverError(f"unexpected first line {ready!r}")
            yield driver
        finally:
            await driver.close()

    async def call(self, op: str, *, timeout: float = 60, **kwargs: Any) -> Any:  # noqa: ASYNC109
        """Run one command; its value, or DriverError with the driver's error."""
        assert self.process.stdin is not None
        async with self._lock:
            self.process.stdin.write((json.dumps({"op": op, **kwargs}) + "\n").encode())
            await self.process.stdin.drain()
            reply = await self._read(timeout)
        if not reply.get("ok"):
            raise DriverError(f"{op} {kwargs}: {reply.get('error')}\n{reply.get('trace', '')}")
        return reply.get("value")

    async def _read(self, timeout: float) -> dict[str, Any]:  # noqa: ASYNC109
        assert self.process.stdout is not None
        try:
            raw = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        except TimeoutError:
            raise DriverError(f"the Ray driver did not answer in {timeout:.0f}s:\n{self.tail()}") from None
        if not raw:
            await self.process.wait()
            raise DriverError(f"the Ray driver exited ({self.process.returncode}):\n{self.tail()}")
        reply: dict[str, Any] = json.loads(raw)
        return reply

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    async def close(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 30)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()
