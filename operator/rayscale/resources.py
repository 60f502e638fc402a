"""Kubernetes quantities and Ray resource maps: parsing, bounded to what Kubernetes accepts.

A host's Ray resources (from the group ``resources`` map, ``rayStartParams`` and the Ray
container) are `rayscale.cluster.host`'s; this module only reads the amounts.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

__all__ = [
    "MAX_QUANTITY",
    "QuantityError",
    "parse_quantity",
    "parse_resource_map",
    "parse_resources_param",
    "quantity_to_float",
]

_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "K": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity, or a malformed resource parameter."""


#: The largest magnitude a quantity may have, in its base unit (cores, bytes, devices): 2^63-1, the
#: cap Kubernetes' own resource.Quantity applies. Anything larger is refused before any arithmetic.
MAX_QUANTITY = Decimal(2**63 - 1)
#: The longest quantity text accepted (Kubernetes' own canonical forms are far shorter).
MAX_QUANTITY_CHARS = 64
_MAX_MAGNITUDE = 20  # a value of 10^21 or more is far above MAX_QUANTITY (about 9.2 x 10^18)
#: Kubernetes rounds a magnitude below a nano unit up to 1n; so does `parse_quantity`, for any
#: value below 10^-10 (between 10^-10 and 10^-9 it keeps the exact value).
_NANO_EXPONENT = -9


def _out_of_range(value: object) -> QuantityError:
    # An int's repr may be thousands of digits (or refused by Python): its size says enough.
    shown = f"an integer of {value.bit_length()} bits" if isinstance(value, int) else repr(value)
    return QuantityError(f"{shown} is out of range: quantities are limited to ±{MAX_QUANTITY} (2^63-1)")


def _bounded(number: Decimal, value: object) -> Decimal:
    if not number.is_finite():
        raise QuantityError(f"not a quantity: {value!r}")
    if abs(number) > MAX_QUANTITY:
        raise _out_of_range(value)
    return number


def parse_quantity(value: str | int | float | Decimal) -> Decimal:
    """Parse a Kubernetes quantity ("500m", "32Gi", "1.5", "2e3", "4k") into a Decimal.

    Numbers pass through unchanged. Raises QuantityError for anything else, and for any
    magnitude above `MAX_QUANTITY` (2^63-1): the size is read from the text's exponent before
    any arithmetic, so "1e999999" costs no more than "1e3". Magnitudes below 10^-10 count as one
    nano unit (0 stays 0), as Kubernetes rounds them.
    """
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, Decimal):
        return _bounded(value, value)
    if isinstance(value, int):
        if abs(value) > MAX_QUANTITY:  # an int compares without building anything
            raise _out_of_range(value)
        return Decimal(value)
    if isinstance(value, float):
        if math.isnan(value):
            raise QuantityError(f"not a quantity: {value!r}")
        if math.isinf(value):  # what JSON makes of a number too large for a float (1e400)
            raise _out_of_range(value)
        return _bounded(Decimal(repr(value)), value)
    if not isinstance(value, str):
        raise QuantityError(f"not a quantity: {value!r}")
    text = value.strip()
    if len(text) > MAX_QUANTITY_CHARS:
        raise QuantityError(f"not a quantity: longer than {MAX_QUANTITY_CHARS} characters ({len(text)})")
    number, power10, power1024 = text, 0, 0
    if text[-2:] in _BINARY:
        number, power1024 = text[:-2], _BINARY[text[-2:]]
    elif text[-1:] in _DECIMAL:
        number, power10 = text[:-1], _DECIMAL[text[-1:]]
    if not _NUMBER.fullmatch(number):
        raise QuantityError(f"not a quantity: {value!r}")
    parsed = Decimal(number)  # cheap whatever the exponent: a Decimal keeps it as a number
    if parsed == 0:
        return Decimal(0)
    # The decimal exponent of the value, suffix included (exact for decimal suffixes, at most one
    # below for binary ones: 1024^k has 3k+1 digits or fewer): far above the cap is refused, far
    # below a nano unit is 1n, so the product below only ever meets small exponents; the cap
    # itself is then checked exactly.
    magnitude = parsed.adjusted() + power10 + 3 * power1024
    if magnitude > _MAX_MAGNITUDE:
        raise _out_of_range(value)
    if magnitude < _NANO_EXPONENT - 1:
        return Decimal(1).scaleb(_NANO_EXPONENT).copy_sign(parsed)
    scale = Decimal(1024) ** power1024 if power1024 else Decimal(1).scaleb(power10)
    return _bounded(parsed * scale, value)


def quantity_to_float(value: str | int | float | Decimal) -> float:
    """A quantity as a float (Ray resource amounts are floats)."""
    return float(parse_quantity(value))


def parse_resources_param(text: str, *, field: str = "rayStartParams.resources") -> dict[str, float]:
    """Parse the ``resources`` rayStartParam: a JSON object, possibly quoted and escaped.

    Accepts ``{"TPU": 4}``, ``'{"TPU": 4}'`` and ``"{\\"TPU\\": 4}"`` as users write them.
    ``field`` names the parameter in error messages.
    """
    body = text.strip()
    while len(body) >= 2 and body[0] == body[-1] and body[0] in "'\"":
        body = body[1:-1].strip()
    body = body.replace('\\"', '"')
    try:
        loaded = json.loads(body) if body else {}
    except (ValueError, RecursionError) as exc:  # ValueError: also an integer too long to read
        raise QuantityError(f"{field}: not a JSON object: {text[:100]!r}") from exc
    if not isinstance(loaded, dict):
        raise QuantityError(f"{field}: not a JSON object: {text[:100]!r}")
    return parse_resource_map(loaded, field=field)


def parse_resource_map(resources: Mapping[str, Any], *, field: str = "resources") -> dict[str, float]:
    """A map of Ray resource names to amounts, where amounts may be quantities ("32Gi").

    ``field`` names the map in error messages.
    """
    out: dict[str, float] = {}
    for key, amount in resources.items():
        try:
            out[str(key)] = quantity_to_float(amount)
        except QuantityError as exc:
            raise QuantityError(f"{field}.{key}: {exc}") from exc
    return out
