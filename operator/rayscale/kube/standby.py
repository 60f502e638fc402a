"""The liveness endpoint of a replica waiting for leadership.

kopf serves ``--liveness`` only once it runs, which a standby replica does not yet: without this,
its liveness probe would fail and the kubelet would restart it over and over. A waiting replica is
alive (it polls the Lease), so it answers 200 on the same address and path until it leads; then
the server closes and kopf opens its own there.
"""

from __future__ import annotations

import urllib.parse

from aiohttp import web


async def serve(endpoint: str) -> web.AppRunner:
    """Answer GET on `endpoint`'s path (``http://host:port/path``); close with ``runner.cleanup()``."""
    url = urllib.parse.urlsplit(endpoint)

    async def alive(_: web.Request) -> web.Response:
        return web.json_response({"standby": "waiting for leadership"})

    app = web.Application()
    app.add_routes([web.get(url.path or "/", alive)])
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, url.hostname, url.port or 80, reuse_address=True).start()
    return runner
