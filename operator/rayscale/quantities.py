"""Sums of container resources from pod templates, formatted as canonical Kubernetes quantities."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from rayscale.resources import QuantityError, parse_quantity

_BINARY = [("Ei", 6), ("Pi", 5), ("Ti", 4), ("Gi", 3), ("Mi", 2), ("Ki", 1)]
_DECIMAL = [
    ("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3), ("", 0), ("m", -3), ("u", -6), ("n", -9)
]  # fmt: skip


def container_resources(container: Mapping[str, Any]) -> dict[str, Decimal]:
    """Requests, with keys missing from requests filled in from limits."""
    res = container.get("resources") or {}
    merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    out: dict[str, Decimal] = {}
    for key, value in merged.items():
        try:
            out[key] = parse_quantity(value)
        except QuantityError:
            continue
    return out


def template_resources(template: Mapping[str, Any]) -> dict[str, Decimal]:
    """Sum over the template's containers (init containers not counted)."""
    total: dict[str, Decimal] = {}
    for container in (template.get("spec") or {}).get("containers") or []:
        for key, value in container_resources(container).items():
            total[key] = total.get(key, Decimal(0)) + value
    return total


def uses_binary_suffix(template: Mapping[str, Any], key: str) -> bool:
    for container in (template.get("spec") or {}).get("containers") or []:
        res = container.get("resources") or {}
        value = (res.get("requests") or {}).get(key) or (res.get("limits") or {}).get(key)
        if value is not None:
            return str(value).endswith("i")
    return False


def format_quantity(value: Decimal, *, binary: bool = False) -> str:
    """Canonical form: the largest suffix that keeps the number an integer ("1500m", "4Gi")."""
    if value == 0:
        return "0"
    if binary and value == value.to_integral_value():
        for suffix, power in _BINARY:
            scaled = value / (Decimal(1024) ** power)
            if scaled == scaled.to_integral_value():
                return f"{int(scaled)}{suffix}"
        return str(int(value))
    for suffix, exponent in _DECIMAL:
        scaled = value / (Decimal(10) ** exponent)
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    return f"{int((value * Decimal(10) ** 9).to_integral_value())}n"
