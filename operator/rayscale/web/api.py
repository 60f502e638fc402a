"""The JSON API: what the autoscaler sees about each cluster (docs/status-page.md).

    GET /api/v1/clusters                                       {"clusters": [fleet entry], "leader": true,
                                                                "observedAt": time}
    GET /api/v1/clusters/{namespace}/{name}                    the cluster's view
    GET /api/v1/clusters/{namespace}/{name}/decisions/{i}/scenario
                                                               the scenario document of its i-th newest
                                                               decision (0: the latest)

The documents are rayscale.autoscaler.view's. Errors are ``{"error": message}``: 404 for a
cluster (or scenario) that is not there and in ``--mode controller`` (no autoscaler), 503 on a
replica that is not the leader (with ``"leader"``: the Lease holder, when known) or whose
autoscaler has not started yet, 405 for any method but GET and HEAD.

Every handler builds its answer from memory, synchronously, on the operator's event loop (where
the autoscaler's rounds change what it reads between their awaits); a cluster's view, the one that
can be large, is serialised in a thread, and a large body is compressed off the loop (aiohttp's
executor) when the client accepts gzip.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from aiohttp import web

from rayscale.common.timefmt import rfc3339
from rayscale.common.types import ClusterKey

__all__ = [
    "API",
    "NO_AUTOSCALER",
    "SERVED",
    "AutoscalerView",
    "Refused",
    "Served",
    "autoscaler_of",
    "cluster_key",
    "json_response",
    "routes",
    "view_of",
]

API = "/api/v1/clusters"
NO_AUTOSCALER = "the autoscaler does not run in this operator (--mode controller): there is nothing to show"


class AutoscalerView(Protocol):
    """What the server reads (rayscale.autoscaler.loop.Autoscaler): cheap, synchronous, no I/O."""

    def view(self, key: ClusterKey) -> dict[str, Any] | None: ...

    def fleet(self) -> list[dict[str, Any]]: ...

    def history_scenario(self, key: ClusterKey, index: int = 0) -> dict[str, Any] | None: ...


def _no_autoscaler() -> AutoscalerView | None:
    return None


def _always() -> bool:
    return True


def _nobody() -> str:
    return ""


def _now() -> datetime:
    return datetime.now(UTC)


@dataclasses.dataclass
class Served:
    """Where the server finds what it serves. `rayscale run` makes it before anything else runs
    (the server answers from the start, a standby too) and fills it in as the operator starts and
    leads."""

    autoscaling: bool = True  # False: --mode controller, no autoscaler in this operator
    autoscaler: Callable[[], AutoscalerView | None] = _no_autoscaler  # once kopf's startup made it
    leading: Callable[[], bool] = _always  # without leader election every replica leads
    holder: Callable[[], str] = _nobody  # the Lease holder as last seen ("": not known)
    wall_clock: Callable[[], datetime] = _now


SERVED = web.AppKey("served", Served)


class Refused(Exception):
    """The answer is an error: `status` and a JSON body ``{"error": ...}`` (the page renders it)."""

    def __init__(self, status: int, error: str, **more: Any) -> None:
        super().__init__(error)
        self.status = status
        self.body: dict[str, Any] = {"error": error, **more}


def autoscaler_of(served: Served) -> AutoscalerView:
    """The autoscaler to read, or `Refused` when this replica has none to answer from."""
    if not served.autoscaling:
        raise Refused(404, NO_AUTOSCALER)
    if not served.leading():
        raise Refused(503, "not the leader", leader=served.holder() or None)
    scaler = served.autoscaler()
    if scaler is None:
        raise Refused(503, "the autoscaler is starting")
    return scaler


def cluster_key(request: web.Request) -> ClusterKey:
    return request.match_info["namespace"], request.match_info["name"]


def view_of(request: web.Request) -> dict[str, Any]:
    """The view of the request's cluster, or `Refused` (404 when it is not autoscaled here)."""
    key = cluster_key(request)
    view = autoscaler_of(request.app[SERVED]).view(key)
    if view is None:
        raise Refused(404, f"RayCluster {key[0]}/{key[1]} is not autoscaled here (or had no round yet)")
    return view


def json_response(body: Any, status: int = 200) -> web.Response:
    response = web.Response(
        text=json.dumps(body, separators=(",", ":")), status=status, content_type="application/json"
    )
    response.enable_compression()  # only when the client accepts it
    return response


async def clusters(request: web.Request) -> web.Response:
    served = request.app[SERVED]
    scaler = autoscaler_of(served)
    return json_response(
        {"clusters": scaler.fleet(), "leader": served.leading(), "observedAt": rfc3339(served.wall_clock())}
    )


async def cluster(request: web.Request) -> web.Response:
    # A cluster's view can be megabytes (10,000 replicas: about 5 MB): it is built on the loop, from
    # fresh objects nothing else holds, and serialised in a thread, so the rounds go on meanwhile.
    text = await asyncio.to_thread(json.dumps, view_of(request), separators=(",", ":"))
    response = web.Response(text=text, content_type="application/json")
    response.enable_compression()
    return response


async def scenario(request: web.Request) -> web.Response:
    key, index = cluster_key(request), int(request.match_info["index"])
    found = autoscaler_of(request.app[SERVED]).history_scenario(key, index)
    if found is None:
        raise Refused(
            404,
            f"RayCluster {key[0]}/{key[1]} has no scenario for decision {index} "
            "(only the newest few decisions keep theirs)",
        )
    return json_response(found)


def routes() -> list[web.RouteDef]:
    """GET (and HEAD) only: any other method is answered 405."""
    return [
        web.get(API, clusters),
        web.get(API + "/{namespace}/{name}", cluster),
        web.get(API + r"/{namespace}/{name}/decisions/{index:\d+}/scenario", scenario),
    ]
