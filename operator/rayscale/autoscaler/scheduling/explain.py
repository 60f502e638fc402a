"""Collects, per demand shape, gang or constraint bundle, where its units went or why not."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rayscale.autoscaler.scheduling.fleet import HostKind
from rayscale.autoscaler.scheduling.model import (
    DemandKind,
    LabelConstraint,
    Placement,
    PlacementTarget,
    Selector,
    Strategy,
    Unmet,
    UnmetReason,
)


@dataclass(slots=True)
class _Entry:
    kind: DemandKind
    resources: Mapping[str, float] | None
    bundles: tuple[Mapping[str, float], ...] | None
    strategy: Strategy | None
    selector: tuple[LabelConstraint, ...]
    fallbacks: tuple[Selector, ...]
    bundle_selectors: tuple[Selector, ...]
    unit: str | None
    placed: int = 0
    targets: dict[tuple[str, HostKind], tuple[int, list[str]]] = field(default_factory=dict)
    unmet: dict[UnmetReason, int] = field(default_factory=dict)


class Explainer:
    """Accumulates placements and unmet counts keyed by what was asked for."""

    def __init__(self) -> None:
        self._entries: dict[tuple[object, ...], _Entry] = {}

    def entry(
        self,
        kind: DemandKind,
        *,
        resources: Mapping[str, float] | None = None,
        bundles: tuple[Mapping[str, float], ...] | None = None,
        strategy: Strategy | None = None,
        selector: tuple[LabelConstraint, ...] = (),
        fallbacks: tuple[Selector, ...] = (),
        bundle_selectors: tuple[Selector, ...] = (),
        unit: str | None = None,
    ) -> tuple[object, ...]:
        """Register what was asked for (idempotent) and return its key."""
        key: tuple[object, ...] = (
            kind,
            tuple(sorted(resources.items())) if resources is not None else None,
            tuple(tuple(sorted(b.items())) for b in bundles) if bundles is not None else None,
            strategy,
            selector,
            fallbacks,
            bundle_selectors,
            unit,
        )
        if key not in self._entries:
            self._entries[key] = _Entry(
                kind, resources, bundles, strategy, selector, fallbacks, bundle_selectors, unit
            )
        return key

    def placed(
        self, key: tuple[object, ...], group: str, rank: HostKind, units: int, names: list[str]
    ) -> None:
        entry = self._entries[key]
        count, seen = entry.targets.get((group, rank), (0, []))
        seen.extend(names)
        entry.targets[(group, rank)] = (count + units, seen)

    def moved(self, key: tuple[object, ...], group: str, rank: HostKind, units: int, name: str) -> None:
        """``units`` placed on a new host of ``group`` go to host ``name`` (of ``rank``) instead."""
        targets = self._entries[key].targets
        count, names = targets.pop((group, HostKind.NEW))
        if count > units:
            targets[(group, HostKind.NEW)] = (count - units, names)
        self.placed(key, group, rank, units, [name])

    def finish(self, key: tuple[object, ...], placed: int) -> None:
        """Count ``placed`` units (for gangs: whole gangs) as placed."""
        self._entries[key].placed += placed

    def unmet(self, key: tuple[object, ...], count: int, reason: UnmetReason) -> None:
        if count > 0:
            entry = self._entries[key]
            entry.unmet[reason] = entry.unmet.get(reason, 0) + count

    def placements(self) -> tuple[Placement, ...]:
        out = []
        for e in self._entries.values():
            if not e.placed:
                continue
            targets = tuple(
                PlacementTarget(group, rank.target, count, tuple(sorted(set(names))))
                for (group, rank), (count, names) in sorted(e.targets.items())
            )
            out.append(
                Placement(
                    e.kind,
                    e.resources,
                    e.bundles,
                    e.strategy,
                    e.selector,
                    e.placed,
                    targets,
                    unit=e.unit,
                    fallbacks=e.fallbacks,
                    bundle_selectors=e.bundle_selectors,
                )
            )
        return tuple(out)

    def unmet_list(self) -> tuple[Unmet, ...]:
        return tuple(
            Unmet(
                e.kind,
                e.resources,
                e.bundles,
                e.strategy,
                e.selector,
                count,
                reason,
                unit=e.unit,
                fallbacks=e.fallbacks,
                bundle_selectors=e.bundle_selectors,
            )
            for e in self._entries.values()
            for reason, count in sorted(e.unmet.items())
        )
