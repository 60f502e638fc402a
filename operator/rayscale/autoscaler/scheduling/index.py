"""A snapshot indexed for one pass: its resource names, the label keys its selectors mention,
and selectors as the catalog takes them."""

from __future__ import annotations

from collections.abc import Iterable

from rayscale.autoscaler.scheduling.catalog import Catalog, Selectors
from rayscale.autoscaler.scheduling.model import LabelConstraint, Selector, Snapshot
from rayscale.autoscaler.scheduling.space import Space


def _space(snapshot: Snapshot) -> Space:
    names: set[str] = set()
    for g in snapshot.groups:
        names.update(g.resources)
    for d in snapshot.demands:
        names.update(d.resources)
    for c in snapshot.constraints:
        names.update(c.resources)
    for gang in snapshot.gangs:
        for b in gang.bundles:
            names.update(b)
    for n in snapshot.nodes:
        names.update(n.available or {})
    if snapshot.head is not None:
        names.update(snapshot.head.resources)
        names.update(snapshot.head.available or {})
    return Space(names)


def _label_keys(snapshot: Snapshot) -> set[str]:
    """Every label key a selector of the snapshot mentions."""
    selectors: list[Selector] = []
    for d in snapshot.demands:
        selectors += d.selectors
    for gang in snapshot.gangs:
        selectors += gang.bundle_selectors
    for c in snapshot.constraints:
        selectors.append(c.label_selector)
    return {c.key for selector in selectors for c in selector}


def catalog_of(snapshot: Snapshot) -> Catalog:
    """The catalog of one pass over ``snapshot``."""
    return Catalog(_space(snapshot), snapshot.groups, _label_keys(snapshot))


def one_selector(selector: Selector) -> Selectors:
    """A single selector as a preference list (none when it is empty)."""
    return (selector,) if selector else ()


def merged(selectors: Iterable[Selector]) -> Selector:
    """One selector that holds where every one of ``selectors`` holds (their constraints joined)."""
    joined: set[LabelConstraint] = set()
    for selector in selectors:
        joined.update(selector)
    return tuple(sorted(joined, key=lambda c: (c.key, str(c.op), c.values)))
