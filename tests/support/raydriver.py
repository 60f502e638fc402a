"""Ray drivers for the tests: ``python -c`` subprocesses that join a real Ray head.

``ray`` must not be imported in the test process (its generated protobuf modules declare the same
message names as rayscale's bindings): a driver runs Ray in a process of its own, prints "ready"
once its `body` ran, then runs its `tail` (by default it holds its work until its stdin closes).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from e2e.raybridge import rayproc

__all__ = ["HOLD", "RAY_WAIT", "Driver", "driver"]

RAY_WAIT = 90.0  # generous: `ray start`, `ray status` and drivers are slow on a busy 2-core machine

DRIVER = """
import os, sys, time
import ray
ray.init(address=sys.argv[1], _node_ip_address=sys.argv[2], log_to_driver=False)
{body}
print("ready", flush=True)
{tail}
"""
HOLD = "sys.stdin.read()  # keep the job (and its demand) alive until the test closes stdin"
_driver_ids = itertools.count()


class Driver:
    """A ``python -c`` Ray driver; `line` reads what it prints after "ready", `preamble` is before."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path) -> None:
        self.process = process
        self.log = log
        self.preamble: list[str] = []

    async def line(self, timeout: float = RAY_WAIT) -> str:  # noqa: ASYNC109
        assert self.process.stdout is not None
        try:
            raw = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"driver printed nothing in {timeout:.0f}s; log:\n{rayproc.file_tail(self.log)}"
            ) from None
        if not raw:
            await self.process.wait()
            raise AssertionError(
                f"driver exited ({self.process.returncode}); log:\n{rayproc.file_tail(self.log)}"
            )
        return raw.decode().strip()

    async def finish(self) -> None:
        """Close stdin (ends a holding driver), wait for the exit, kill after a deadline."""
        await rayproc.end_process(self.process, 60)


@contextlib.asynccontextmanager
async def driver(
    head: rayproc.RayNode,
    body: str,
    *args: str,
    tmp_path: Path,
    tail: str = HOLD,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[Driver]:
    """Run `body`, print "ready", run `tail` (default: hold until stdin closes). `env` is added
    to the driver's environment."""
    log = tmp_path / f"driver-{next(_driver_ids)}.log"
    script = DRIVER.format(body=body, tail=tail)
    with log.open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            script,
            head.address,
            rayproc.NODE_IP,
            *args,
            env=rayproc.driver_env(env),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            cwd=tmp_path,
        )
    d = Driver(process, log)
    try:
        while (line := await d.line()) != "ready":
            d.preamble.append(line)
        yield d
    finally:
        await d.finish()
