"""Demand routed to its virtual cluster, as the scheduler sees it.

Work asks to run inside a VC by requesting the VC's Ray resource (or its job cluster's). The
scheduler never sees those resources: they are taken out of every request and of every host's
free resources, and replaced by a label constraint on the scheduling label ``VC_KEY``: ``in
(<part>)`` for work of a VC or job cluster, ``notin (<every part>)`` for work of none, so that work
outside the VCs never takes a host reserved for one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from rayscale.api.virtualcluster_names import RESOURCE_PREFIX, parse_resource
from rayscale.autoscaler.scheduling.model import (
    Constraint,
    Demand,
    Gang,
    LabelConstraint,
    LabelOp,
    Selector,
    Snapshot,
)
from rayscale.autoscaler.virtual.model import VC_KEY

__all__ = ["asked", "part_of", "route", "strip"]


def strip(resources: Mapping[str, float] | None) -> dict[str, float] | None:
    """`resources` without any VC resource."""
    if resources is None:
        return None
    return {k: v for k, v in resources.items() if not k.startswith(RESOURCE_PREFIX)}


def part_of(resources: Mapping[str, float]) -> str | None:
    """The part (``<vc>`` or ``<vc>/<job>``) a request asks for; None when it asks for none.
    A request naming two parts asks for the first in name order (no host is in two)."""
    parts = sorted(
        f"{vc}/{job}" if job else vc
        for vc, job in (p for p in map(parse_resource, resources) if p is not None)
    )
    return parts[0] if parts else None


def asked(snapshot: Snapshot) -> list[Mapping[str, float]]:
    """What each unit of `snapshot`'s demand, gangs' bundles and constraints asks for."""
    requests: list[Mapping[str, float]] = [d.resources for d in snapshot.demands]
    requests += [b for g in snapshot.gangs for b in g.bundles]
    requests += [c.resources for c in snapshot.constraints]
    return requests


def _constraint(part: str | None, parts: Collection[str]) -> LabelConstraint | None:
    if part is not None:
        return LabelConstraint(VC_KEY, LabelOp.IN, (part,))
    if parts:
        return LabelConstraint(VC_KEY, LabelOp.NOT_IN, tuple(sorted(parts)))
    return None


def _with(selector: Selector, extra: LabelConstraint | None) -> Selector:
    return selector if extra is None else (*selector, extra)


def _demand(d: Demand, parts: Collection[str]) -> Demand:
    extra = _constraint(part_of(d.resources), parts)
    if extra is None:
        return d
    return dataclasses.replace(
        d,
        resources=strip(d.resources) or {},
        label_selector=_with(d.label_selector, extra),
        fallbacks=tuple(_with(f, extra) for f in d.fallbacks),
    )


def _gang(g: Gang, parts: Collection[str]) -> Gang:
    selectors = g.bundle_selectors or tuple(() for _ in g.bundles)
    extras = [_constraint(part_of(b), parts) for b in g.bundles]
    if all(e is None for e in extras):
        return g
    return dataclasses.replace(
        g,
        bundles=tuple(strip(b) or {} for b in g.bundles),
        bundle_selectors=tuple(_with(s, e) for s, e in zip(selectors, extras, strict=True)),
    )


def _constraint_of(c: Constraint, parts: Collection[str]) -> Constraint:
    extra = _constraint(part_of(c.resources), parts)
    if extra is None:
        return c
    return dataclasses.replace(
        c, resources=strip(c.resources) or {}, label_selector=_with(c.label_selector, extra)
    )


def route(snapshot: Snapshot, parts: Collection[str]) -> Snapshot:
    """`snapshot`'s demand, gangs and constraints routed to the VC `parts` (hosts untouched)."""
    return dataclasses.replace(
        snapshot,
        demands=tuple(_demand(d, parts) for d in snapshot.demands),
        gangs=tuple(_gang(g, parts) for g in snapshot.gangs),
        constraints=tuple(_constraint_of(c, parts) for c in snapshot.constraints),
    )
