"""List, then watch, one kind of object: what client-go's reflector does, with nothing between
the watch stream and the index it feeds (`rayscale.kube.by_cluster`,
`rayscale.kube.raycluster_index`) but decoding.

`rayscale run` watches the Ray pods and the Ray Services this way, most of a fleet's events; the
custom resources are kopf's (`rayscale.handlers`). kopf handles each event as it handles an
object with handlers: a task per object, the object's memory, a handler-state machine, the index
handler and the event handler, on every event. An index needs none of it; this does the same for
a fraction of the CPU (docs/architecture.md has the figures). A custom resource can be watched
this way too (`Kind` with a group; a kind not served is listed again every `ABSENT_SECONDS`).

One stream per namespace named with ``-n``, or one for every namespace (no ``-n``, or a pattern:
the objects of the namespaces the patterns match are kept, the others dropped as they arrive). Each
stream LISTs its objects in pages, replaces its part of the index with them, then WATCHes from the
list's resourceVersion with bookmarks; it watches again from the last version it saw when the
server ends the watch, and LISTs again when the version has expired (410 Gone) or the stream
broke. `synced` is set once every stream has listed: until then the index is incomplete, and the
controller must not act on it (it would create pods that exist).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

import aiohttp
import pydantic_core
from kubernetes_asyncio import client

from rayscale.common.types import Obj
from rayscale.kube import ops
from rayscale.kube.scope import is_pattern, namespace_matches

log = logging.getLogger(__name__)

WATCH_SECONDS = 300  # the API server ends each watch after this; it is then resumed
READ_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=WATCH_SECONDS + 30)
BACKOFFS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)  # then 4 s until a call succeeds
STUCK_SECONDS = 300.0  # a stream failing this long makes the liveness probe fail
ABSENT_SECONDS = 30.0  # between LISTs of a custom resource whose CRD is not installed


@dataclasses.dataclass(frozen=True)
class Kind:
    """A kind of object to list and watch: a core v1 kind (no `group`) or a custom resource."""

    plural: str  # "pods", "services", or the custom resource's plural
    group: str = ""
    version: str = "v1"
    singular: str = ""  # a core kind's, for the client's method names

    @property
    def ordered(self) -> bool:
        """The API server writes its fields in their declared order (a core kind's Go struct); a
        custom resource's come sorted by name (`_decode`)."""
        return not self.group


PODS = Kind("pods", singular="pod")
SERVICES = Kind("services", singular="service")


class Expired(Exception):
    """The resourceVersion to watch from is gone (410): LIST again."""


class Sink(Protocol):
    """What a stream feeds: objects upserted and deleted, and the whole set it listed."""

    def upsert(self, obj: Obj) -> None: ...
    def delete(self, obj: Obj) -> None: ...
    def replace(self, namespace: str | None, objs: Sequence[Obj]) -> None:
        """Everything of `namespace` (None: of every namespace) is now `objs`."""


class Informer:
    """List and watch the objects of `kind` labelled `label_selector` (if any) of `namespaces`
    (names or kopf's patterns; None: every namespace) into `sink`."""

    def __init__(
        self,
        api: client.ApiClient,
        sink: Sink,
        *,
        namespaces: Sequence[str] | None,
        kind: Kind = PODS,
        label_selector: str = "",
        page: int = 500,
    ) -> None:
        self.api = api
        self.sink = sink
        self.kind = kind
        self.label_selector = label_selector
        self.page = page
        names = list(namespaces or ())
        self.patterns = names if any(is_pattern(n) for n in names) else []
        self.streams: list[str | None] = [None] if not names or self.patterns else [*names]
        self.synced = asyncio.Event()
        self._listed: set[str | None] = set()
        self._failing: dict[str | None, float] = {}  # stream -> when it began failing
        self._failures: dict[str | None, int] = {}  # stream -> failures in a row
        self._absent_said: set[str | None] = set()  # streams whose kind was found not served
        self.events = 0  # watch events received (bookmarks too)
        self.lists = 0  # LISTs completed

    async def run(self) -> None:
        await asyncio.gather(*(self._stream(ns) for ns in self.streams))

    def problem(self) -> str | None:
        """None while every stream works (or has failed for less than `STUCK_SECONDS`)."""
        now = time.monotonic()
        stuck = [
            ns or "every namespace" for ns, since in self._failing.items() if now - since > STUCK_SECONDS
        ]
        return (
            f"the {self.kind.plural} watch of {', '.join(stuck)} has failed for over {STUCK_SECONDS:.0f}s"
            if stuck
            else None
        )

    def _wanted(self, obj: Obj) -> bool:
        if not self.patterns:
            return True
        ns = str((obj.get("metadata") or {}).get("namespace") or "")
        return any(namespace_matches(ns, p) for p in self.patterns)

    async def _stream(self, namespace: str | None) -> None:
        version = ""
        while True:
            try:
                if not version:
                    version = await self._list(namespace)
                    self._synced(namespace)
                    if not version:  # the kind is not served: none exist
                        await asyncio.sleep(ABSENT_SECONDS)
                        continue
                began, seen = time.monotonic(), self.events
                version = await self._watch(namespace, version)
                if self.events == seen and time.monotonic() - began < 1.0:
                    raise ops.KubeError(f"watch {self.kind.plural}: ended at once without an event")
                self._working(namespace)  # the server ended the watch: resume from `version`
            except Expired:
                log.info("%s watch of %s: version %s expired, listing again", self.kind.plural,
                         namespace or "*", version)  # fmt: skip
                version = ""
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the stream broke: list again after a backoff
                self._failing.setdefault(namespace, time.monotonic())
                failures = self._failures[namespace] = self._failures.get(namespace, 0) + 1
                delay = BACKOFFS[min(failures, len(BACKOFFS)) - 1]
                log.warning("%s watch of %s failed (%s: %s); again in %ss", self.kind.plural,
                            namespace or "*", type(exc).__name__, exc, delay)  # fmt: skip
                version = ""
                await asyncio.sleep(delay)

    def _synced(self, namespace: str | None) -> None:
        self._listed.add(namespace)
        if len(self._listed) == len(self.streams):
            self.synced.set()

    def _working(self, namespace: str | None) -> None:
        """A watch of `namespace` delivered an event or ran its course: the stream works."""
        self._failing.pop(namespace, None)
        self._failures.pop(namespace, None)

    def _call(self, namespace: str | None, **params: Any) -> Any:
        kind = self.kind
        params["_preload_content"] = False
        if self.label_selector:
            params["label_selector"] = self.label_selector
        if kind.group:
            objects = client.CustomObjectsApi(self.api)
            if namespace is None:
                return objects.list_cluster_custom_object(kind.group, kind.version, kind.plural, **params)
            return objects.list_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, **params
            )
        core = client.CoreV1Api(self.api)
        if namespace is None:
            return getattr(core, f"list_{kind.singular}_for_all_namespaces")(**params)
        return getattr(core, f"list_namespaced_{kind.singular}")(namespace, **params)

    async def _list(self, namespace: str | None) -> str:
        """LIST in pages; hand the sink the whole set; the list's resourceVersion ("" when the API
        server does not serve the kind: a custom resource whose CRD is not installed, none exist)."""
        objs: list[Obj] = []
        token = ""
        while True:
            params: dict[str, Any] = {"limit": self.page}
            if token:
                params["_continue"] = token
            try:
                body: Obj = await ops.send(
                    self._call(namespace, **params), f"list {self.kind.plural}", body=True
                )
            except ops.KubeError as exc:
                if exc.status != 404 or not self.kind.group:
                    raise
                self._absent(namespace)
                return ""
            objs += [obj for obj in body.get("items") or [] if self._wanted(obj)]
            meta = body.get("metadata") or {}
            token = str(meta.get("continue") or "")
            if not token:
                self.sink.replace(namespace, objs)
                self.lists += 1
                return str(meta.get("resourceVersion") or "")

    def _absent(self, namespace: str | None) -> None:
        """The kind is not served (404 on its LIST): none exist; said once, listed again later."""
        self.sink.replace(namespace, [])
        self._working(namespace)
        if namespace not in self._absent_said:
            self._absent_said.add(namespace)
            kind = f"{self.kind.plural}.{self.kind.group}"
            log.warning("%s is not served by the API server (its CRD is not installed): none are "
                        "watched; listing again every %.0fs", kind, ABSENT_SECONDS)  # fmt: skip

    async def _watch(self, namespace: str | None, version: str) -> str:
        """WATCH from `version` until the server ends the watch; the last version seen."""
        call = self._call(
            namespace,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _request_timeout=READ_TIMEOUT,
        )
        resp = await ops.send_raw(call, f"watch {self.kind.plural}")
        try:
            async for line in _lines(resp.content):
                if namespace in self._failures:
                    self._working(namespace)
                event = _decode(line, cut=self.kind.ordered)
                kind, obj = event.get("type"), event.get("object") or {}
                self.events += 1
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise Expired(obj.get("message", ""))
                    raise ops.KubeError(
                        f"watch {self.kind.plural}: {obj.get('code')} {obj.get('message', '')}",
                        obj.get("code", 0),
                    )
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if kind == "BOOKMARK" or not self._wanted(obj):
                    continue
                if kind == "DELETED":
                    self.sink.delete(obj)
                else:
                    self.sink.upsert(obj)
        finally:
            resp.release()
        return version


_MANAGED = b',"managedFields":['
_SPEC = b']},"spec":'


def _decode(line: bytes, *, cut: bool = True) -> Obj:
    """A watch event, decoded without its object's managedFields (a third of a pod's bytes, none
    of them read here) when `cut`: the API server writes ObjectMeta's fields in their declared
    order, in which managedFields is the last, so `,"managedFields":[` ... `]}` is followed by
    `,"spec":`. Neither byte run can occur inside a JSON string (its quotes would be escaped), nor
    "spec" as a key inside managedFields (their keys begin with "f:", "k:", "v:" or "i:"). A line
    where they are not found, or that does not decode once cut, is decoded whole. A custom
    resource's fields come sorted by name, managedFields not last: its line is decoded whole."""
    start = line.find(_MANAGED) if cut else -1
    if start >= 0:
        end = line.find(_SPEC, start)
        if end >= 0:
            try:
                event: Obj = pydantic_core.from_json(line[:start] + line[end + 1 :])
            except ValueError:
                pass
            else:
                return event
    whole: Obj = pydantic_core.from_json(line)
    return whole


async def _lines(stream: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The lines of a watch stream (one JSON event each), however its chunks split them."""
    rest = b""
    async for chunk in stream.iter_any():
        *lines, rest = (rest + chunk).split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if rest.strip():
        yield rest
