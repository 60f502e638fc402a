"""Ask the hosts of each drain unit (drain.py's plan) to drain, through a given `ask` call.

The hosts of one unit are asked one after the other and the first refusal (or a host whose Ray
node cannot be named) keeps the whole unit; units are asked side by side.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from rayscale.autoscaler.drain import DrainUnit

__all__ = ["Ask", "DrainOutcome", "drain_units"]

Ask = Callable[[str, str], Awaitable[bool]]  # (pod, Ray node id) -> accepted


@dataclass(frozen=True, slots=True)
class DrainOutcome:
    accepted: frozenset[str]  # pods whose node accepted (remember them as draining)
    refused: frozenset[str]  # pods of the units that stay (a host refused or could not be asked)


async def _drain_one(unit: DrainUnit, ask: Ask) -> tuple[list[str], bool]:
    """Ask the unit's hosts in order; (the pods that accepted, whether every host accepted)."""
    if any(node_id is None for _, node_id in unit.hosts):
        return [], False
    accepted: list[str] = []
    for pod, node_id in unit.hosts:
        assert node_id is not None
        if not await ask(pod, node_id):
            return accepted, False
        accepted.append(pod)
    return accepted, True


async def drain_units(units: Sequence[DrainUnit], ask: Ask) -> DrainOutcome:
    """Drain the units (one after the other within a unit, the units side by side)."""
    results = await asyncio.gather(*(_drain_one(u, ask) for u in units))
    accepted: set[str] = set()
    refused: set[str] = set()
    for unit, (ok_hosts, whole) in zip(units, results, strict=True):
        accepted.update(ok_hosts)
        if not whole:
            refused.update(pod for pod, _ in unit.hosts)
    return DrainOutcome(frozenset(accepted), frozenset(refused))
