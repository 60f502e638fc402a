"""The autoscaler's one reader of a RayResourceRequest, through its typed model. Pure.

`read_request` reads a RayResourceRequest body once: its metadata, its spec (each bundle a
``rayscale.api.rayresourcerequest.Bundle``, its amounts Kubernetes quantities) and its status
(``RayResourceRequestStatus``). Each request is an all-or-nothing unit of its own
(``<namespace>/<name>``) of at most ``MAX_REQUEST_BUNDLES`` bundles whose amounts are bounded
quantities. A bundle that cannot be read makes the request's ``problem``, naming the field
(``spec.bundles[0].resources.memory: ...``): the first in the order a bundle is read, bundle by
bundle, its count, the bundles in all so far, then its resources one by one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from rayscale.api.rayresourcerequest import Bundle, RayResourceRequestStatus
from rayscale.autoscaler.scheduling.model import Constraint
from rayscale.resources import QuantityError, quantity_to_float

__all__ = ["MAX_REQUEST_BUNDLES", "RequestRead", "read_request"]

#: Bundles one RayResourceRequest may ask for (the sum of its counts).
MAX_REQUEST_BUNDLES = 100_000


class _Unreadable(ValueError):
    """A bundle that cannot be read; the message names the field."""


@dataclasses.dataclass(frozen=True)
class RequestRead:
    """A RayResourceRequest as the autoscaler reads it."""

    namespace: str
    name: str
    generation: int | None
    resource_version: str | None
    deleting: bool
    cluster_name: Any  # spec.clusterName as written (a request names its cluster by it)
    bundles: tuple[Constraint, ...]  # empty when `problem`
    problem: str | None  # why a bundle cannot be read, or None
    status: RayResourceRequestStatus | None  # None: none written, or one that cannot be read

    @property
    def unit(self) -> str:
        """Its all-or-nothing unit: ``<namespace>/<name>``."""
        return f"{self.namespace}/{self.name}"


def read_request(body: Mapping[str, Any]) -> RequestRead:
    meta = body.get("metadata") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    spec = body.get("spec")
    try:
        bundles = _bundles(spec, f"{namespace}/{name}")
        problem = None
    except _Unreadable as exc:
        bundles, problem = (), str(exc)
    generation = meta.get("generation")
    version = meta.get("resourceVersion")
    return RequestRead(
        namespace=namespace,
        name=name,
        generation=generation if isinstance(generation, int) else None,
        resource_version=None if version is None else str(version),
        deleting=bool(meta.get("deletionTimestamp")),
        cluster_name=spec.get("clusterName") if isinstance(spec, Mapping) else None,
        bundles=bundles,
        problem=problem,
        status=_status(body.get("status")),
    )


def _status(raw: Any) -> RayResourceRequestStatus | None:
    if not raw:
        return None
    try:
        return RayResourceRequestStatus.model_validate(raw)
    except ValidationError:
        return None  # written by hand: the next status replaces it


def _bundles(spec: Any, unit: str) -> tuple[Constraint, ...]:
    if spec is None:
        return ()
    if not isinstance(spec, Mapping):
        raise _Unreadable("spec: must be a mapping")
    items = spec.get("bundles")
    if items is None:
        return ()
    if not isinstance(items, list):
        raise _Unreadable("spec.bundles: must be a list")
    out: list[Constraint] = []
    total = 0
    for i, item in enumerate(items):
        where = f"spec.bundles[{i}]"
        bundle, bad = _bundle(item, where)
        if "count" in bad:
            raise _Unreadable(f"{where}.count: must be an integer >= 1")
        total += bundle.count
        if total > MAX_REQUEST_BUNDLES:
            message = (
                f"{total} bundles in all is over the limit of {MAX_REQUEST_BUNDLES} per RayResourceRequest"
            )
            raise _Unreadable(f"{where}.count: {message}")
        if "resources" in bad:
            raise _Unreadable(f"{where}.resources: must be a mapping")
        shape = _shape((item or {}).get("resources") or {}, bad, f"{where}.resources")
        if shape:
            out.append(Constraint(shape, bundle.count, unit=unit))
    return tuple(out)


def _bundle(item: Any, where: str) -> tuple[Bundle, set[Any]]:
    """The typed bundle (its count 1 when it cannot be read) and what in it cannot be read:
    ``"count"``, ``"resources"`` (not a mapping) or the names of the resources whose amount is
    neither an integer nor a string."""
    if item is None:
        item = {}
    if not isinstance(item, Mapping):
        raise _Unreadable(f"{where}: must be a mapping")
    given = {k: v for k, v in item.items() if k in ("resources", "count") and v is not None}
    given.setdefault("resources", {})
    try:
        return Bundle.model_validate(given, strict=True), set()
    except ValidationError as exc:
        bad = {
            e["loc"][1] if e["loc"][0] == "resources" and len(e["loc"]) > 1 else e["loc"][0]
            for e in exc.errors()
        }
        count = 1 if "count" in bad else int(given.get("count", 1))
        return Bundle.model_construct(resources={}, count=count), bad


def _shape(resources: Mapping[str, Any], bad: set[Any], path: str) -> dict[str, float]:
    """The bundle's resources as the scheduler counts them: quantities, zeros left out."""
    out: dict[str, float] = {}
    for name, amount in resources.items():
        try:
            parsed = quantity_to_float(amount)
        except QuantityError as exc:
            raise _Unreadable(f"{path}.{name}: {exc}") from None
        if name in bad:  # neither an integer nor a string: the CRD refuses it
            raise _Unreadable(f"{path}.{name}: not a quantity: {amount!r}")
        if parsed < 0:
            raise _Unreadable(f"{path}.{name}: must be >= 0")
        if parsed > 0:
            out[str(name)] = parsed
    return out
