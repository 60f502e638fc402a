"""The Ray driver's reply channel: framed JSON on a pipe of its own, which Ray never writes to.

The driver (driver_main.py) gets the pipe's write end as an extra file descriptor; its stdout and
stderr, where Ray, its C++ core and any library print whatever they like (log-to-driver lines,
raylet warnings, autoscaler notices), go to the driver's log file and are never parsed. Each reply
is one frame: a 4-byte big-endian length, then that many bytes of UTF-8 JSON (an object). A frame
cannot be confused with a line of text, and nothing but ``write_frame`` writes to the pipe.

Standard library only: driver_main.py imports it next to ``ray``, the test process next to
rayscale's protobuf bindings.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import struct
from typing import Any, BinaryIO

__all__ = ["HEADER", "MAX_FRAME", "FrameError", "ReplyReader", "encode_frame", "open_writer", "write_frame"]

HEADER = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024  # a reply larger than this is a broken channel, not a reply


class FrameError(RuntimeError):
    """The reply channel carried something that is not a frame of JSON."""


def encode_frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return HEADER.pack(len(body)) + body


def open_writer(fd: int) -> BinaryIO:
    """The reply pipe's write end, kept from every process the driver starts (not inherited)."""
    os.set_inheritable(fd, False)
    return os.fdopen(fd, "wb")


def write_frame(out: BinaryIO, message: dict[str, Any]) -> None:
    out.write(encode_frame(message))
    out.flush()


class ReplyReader:
    """Frames read from the pipe's read end, in order, by a task of its own.

    The task reads whole frames into a queue, so a caller that gives up waiting (a timeout) never
    leaves half a frame read. `get` returns None once the writer closed the pipe (the driver
    exited), and raises FrameError if the channel broke.
    """

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.ReadTransport) -> None:
        self._reader = reader
        self._transport = transport
        self._queue: asyncio.Queue[dict[str, Any] | BaseException | None] = asyncio.Queue()
        self._ended: BaseException | None = None  # why the channel ended, if it broke
        self._done = False
        self._task = asyncio.create_task(self._pump(), name="ray-driver-replies")

    @classmethod
    async def open(cls, fd: int) -> ReplyReader:
        """Read frames from `fd` (a pipe's read end; closed by `close`)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_FRAME)
        pipe = os.fdopen(fd, "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        return cls(reader, transport)

    async def _pump(self) -> None:
        end: BaseException | None = None
        try:
            while True:
                try:
                    header = await self._reader.readexactly(HEADER.size)
                except asyncio.IncompleteReadError as exc:
                    if exc.partial:
                        end = FrameError(f"the reply channel ended inside a frame header: {exc.partial!r}")
                    return
                (size,) = HEADER.unpack(header)
                if size > MAX_FRAME:
                    end = FrameError(f"a reply frame of {size} bytes: the channel is not framed JSON")
                    return
                try:
                    body = await self._reader.readexactly(size)
                except asyncio.IncompleteReadError:
                    end = FrameError(f"the reply channel ended inside a frame of {size} bytes")
                    return
                try:
                    message = json.loads(body)
                except ValueError as exc:
                    end = FrameError(f"a reply frame that is not JSON ({exc}): {body[:200]!r}")
                    return
                if not isinstance(message, dict):
                    end = FrameError(f"a reply frame that is not a JSON object: {body[:200]!r}")
                    return
                self._queue.put_nowait(message)
        finally:
            self._queue.put_nowait(end)

    async def get(self, timeout: float) -> dict[str, Any] | None:  # noqa: ASYNC109
        """The next reply; None when the driver closed the channel; TimeoutError after `timeout`."""
        if self._done:
            if isinstance(self._ended, BaseException):
                raise self._ended
            return None
        item = await asyncio.wait_for(self._queue.get(), timeout)
        if item is None or isinstance(item, BaseException):
            self._done, self._ended = True, item
            if isinstance(item, BaseException):
                raise item
            return None
        return item

    async def close(self) -> None:
        self._transport.close()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
