"""copy_json: a deep copy of JSON-shaped data that shares no dict or list with the original."""

from __future__ import annotations

from types import MappingProxyType

from rayscale.common.jsoncopy import copy_json


def test_copy_shares_no_container_and_equals() -> None:
    value = {"a": [1, {"b": "x"}, None], "c": {"d": [True, 1.5]}, "e": (1, 2)}
    copied = copy_json(value)
    assert copied == {**value, "e": [1, 2]}
    copied["a"][1]["b"] = "y"
    copied["c"]["d"].append(3)
    assert value == {"a": [1, {"b": "x"}, None], "c": {"d": [True, 1.5]}, "e": (1, 2)}


def test_other_mappings_become_dicts() -> None:
    copied = copy_json({"m": MappingProxyType({"k": [1]})})
    assert copied == {"m": {"k": [1]}}
    assert type(copied["m"]) is dict
