"""An in-process gRPC server on 127.0.0.1 for tests that stand in for Ray's GCS (or a listener)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc


@contextlib.asynccontextmanager
async def serving(*handlers: grpc.GenericRpcHandler) -> AsyncIterator[str]:
    """Serve `handlers` on a free port of 127.0.0.1; yields its ``host:port``, stops on the way out."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(handlers)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        with contextlib.suppress(Exception):
            await server.stop(grace=None)
