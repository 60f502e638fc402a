"""The conditions (metav1.Condition) of an API object's status: one found by its type. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayscale.common.types import Obj

__all__ = ["find_condition"]


def find_condition(holder: Mapping[str, Any] | None, kind: str) -> Obj | None:
    """The condition of type `kind` in the ``conditions`` of `holder` (a status, or a part of one
    such as ``status.autoscaler``), if it has one."""
    for found in (holder or {}).get("conditions") or []:
        if isinstance(found, Mapping) and found.get("type") == kind:
            return found
    return None
