"""kopf's views of an object and of a patch, without reference cycles.

For every watch event kopf wraps the decoded object in a `Body` and makes `Patch` objects for the
handlers. kopf builds each with its sub-views cached on it (`body.meta`, `.spec`, `.status`,
`meta.labels`, `patch.meta`, ...), and each sub-view refers back to its parent: a reference cycle,
so reference counting never frees the event, and the whole decoded object (a pod is a few hundred
dicts and lists) waits for the cyclic garbage collector. With the collector on a clock
(`rayscale.gc_tuning`) a 1,000-pod scale-up left 80,000-165,000 such objects per 5 s
collection, 0.1-1.0 s each: a quarter of the operator's CPU, and memory held for seconds.

`install()` makes the sub-views properties that build a view on each access. A view reads and
writes through its parent exactly as before, so nothing changes for kopf or for handlers but that
an event is freed as soon as kopf is done with it. It checks kopf's classes still look the way it
expects and leaves them alone otherwise (the unit tests fail then, so a kopf upgrade is noticed).
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Iterable
from typing import Any

from kopf._cogs.structs import bodies, dicts, patches

__all__ = ["install", "installed"]

log = logging.getLogger(__name__)

_MARK = "_rayscale_acyclic"
#: (class, attributes its __init__ caches): what install() replaces
_CACHED = (
    (bodies.Body, ("_meta", "_spec", "_status")),
    (bodies.Meta, ("_labels", "_annotations")),
    (patches.Patch, ("_meta", "_spec", "_status")),
    (patches.MetaPatch, ("_labels", "_annotations")),
)


def installed() -> bool:
    return bool(getattr(bodies.Body, _MARK, False))


def _as_expected() -> bool:
    for cls, attrs in _CACHED:
        source = inspect.getsource(cls.__init__)
        if not all(re.search(rf"self\.{a}\b[^=\n]*=", source) for a in attrs):
            return False
    return True


def _view(factory: Any, *path: str) -> property:
    return property(lambda self: factory(self, *path))


def _body_init(self: Any, src: Any) -> None:
    dicts.ReplaceableMappingView.__init__(self, src)


def _meta_init(self: Any, src: Any) -> None:
    dicts.MappingView.__init__(self, src, "metadata")


def _patch_init(self: Any, src: Any = None, /, body: Any = None, fns: Iterable[Any] = ()) -> None:
    dict.__init__(self, src or {})
    self._original = body
    self._fns = (src.fns if isinstance(src, patches.Patch) else []) + list(fns)


def _meta_patch_init(self: Any, src: Any) -> None:
    dicts.MutableMappingView.__init__(self, src, "metadata")


def _top(meta: Any, spec: Any, status: Any) -> dict[str, property]:
    return {"metadata": _view(meta), "meta": _view(meta), "spec": _view(spec), "status": _view(status)}


def _keys(view: Any) -> dict[str, property]:
    return {"labels": _view(view, "labels"), "annotations": _view(view, "annotations")}


def install() -> bool:
    """Replace the cached sub-views of kopf's Body, Meta, Patch and MetaPatch with views built on
    access; True once done (now or before), False if kopf's classes are not what this expects."""
    if installed():
        return True
    if not _as_expected():
        log.warning("kopf's Body and Patch are not as expected: their reference cycles stay")
        return False
    replacements: list[tuple[type, Any, dict[str, property]]] = [
        (bodies.Body, _body_init, _top(bodies.Meta, bodies.Spec, bodies.Status)),
        (bodies.Meta, _meta_init, _keys(dicts.MappingView)),
        (patches.Patch, _patch_init, _top(patches.MetaPatch, patches.SpecPatch, patches.StatusPatch)),
        (patches.MetaPatch, _meta_patch_init, _keys(dicts.MutableMappingView)),
    ]
    for cls, init, views in replacements:
        for name, value in {"__init__": init, **views}.items():
            setattr(cls, name, value)
    setattr(bodies.Body, _MARK, True)
    return True
