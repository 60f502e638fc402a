"""The status servers on the operator's event loop: the JSON API (``--status-port``) and, with
``--status-page``, the status page on its own port (``--status-page-port``), which also answers
the API's paths so that one port-forward is enough.

Read-only: GET and HEAD only (405 otherwise). Errors are JSON under ``/api/`` and a small HTML
page elsewhere. Every answer says not to cache it and not to sniff its type; HTML pages also
carry a Content-Security-Policy that allows nothing but their own inline style and their one
refresh script.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from rayscale.web import api, page

__all__ = ["make_app", "start"]

COMMON_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _error(request: web.Request, status: int, body: dict[str, object], *, html: bool) -> web.Response:
    if html and not request.path.startswith("/api/"):
        return page.error_page(status, body)
    return api.json_response(body, status)


def _middleware(*, html: bool) -> Middleware:
    @web.middleware
    async def answer(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except api.Refused as refused:
            response = _error(request, refused.status, refused.body, html=html)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            response = _error(request, exc.status, {"error": exc.reason}, html=html)
            if "Allow" in exc.headers:  # 405: what is allowed
                response.headers["Allow"] = exc.headers["Allow"]
        response.headers.update(COMMON_HEADERS)
        return response

    return answer


def make_app(served: api.Served, *, html: bool = False) -> web.Application:
    """The API alone, or (`html`) the status page with the API beside it."""
    app = web.Application(middlewares=[_middleware(html=html)])
    app[api.SERVED] = served
    app.add_routes(api.routes())
    if html:
        app.add_routes(page.routes())
    return app


async def start(served: api.Served, address: str, port: int, *, html: bool = False) -> web.AppRunner:
    """Serve on `address`:`port`; stop with ``await runner.cleanup()``. A port taken fails here,
    before the operator does anything else."""
    runner = web.AppRunner(
        make_app(served, html=html), handle_signals=False, access_log=None, shutdown_timeout=1.0
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, address, port).start()
    except OSError:
        await runner.cleanup()
        raise
    return runner
