"""Which Ray a RayCluster runs (``spec.rayVersion``), compared with the release a feature needs."""

from __future__ import annotations

import re

__all__ = ["version_at_least"]


def version_at_least(version: str | None, minimum: tuple[int, int, int]) -> bool:
    if not version:
        return False
    parts = [int(p) for p in re.findall(r"\d+", version)[:3]]
    return tuple(parts + [0] * (3 - len(parts))) >= minimum
