"""JSON as Go's encoding/json writes KubeRay's types: struct fields in their declared order with
their ``omitempty`` rules, maps by sorted key, HTML characters escaped. YuniKorn's task-groups
annotation is such a text, and is compared as text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["dumps", "encode"]

# A field: (JSON name, type, omitempty). A type is "str", "int", "strs" (a list of strings),
# "map" (map[string]string), a struct's name below, or "[]" and a struct's name.
Field = tuple[str, str, bool]
_SELECTOR_REQ: list[Field] = [("key", "str", False), ("operator", "str", False), ("values", "strs", True)]
STRUCTS: dict[str, list[Field]] = {
    "Affinity": [
        ("nodeAffinity", "NodeAffinity", True),
        ("podAffinity", "PodAffinity", True),
        ("podAntiAffinity", "PodAffinity", True),
    ],
    "NodeAffinity": [
        ("requiredDuringSchedulingIgnoredDuringExecution", "NodeSelector", True),
        ("preferredDuringSchedulingIgnoredDuringExecution", "[]PreferredSchedulingTerm", True),
    ],
    "NodeSelector": [("nodeSelectorTerms", "[]NodeSelectorTerm", False)],
    "NodeSelectorTerm": [
        ("matchExpressions", "[]NodeSelectorRequirement", True),
        ("matchFields", "[]NodeSelectorRequirement", True),
    ],
    "NodeSelectorRequirement": _SELECTOR_REQ,
    "PreferredSchedulingTerm": [("weight", "int", False), ("preference", "NodeSelectorTerm", False)],
    "PodAffinity": [
        ("requiredDuringSchedulingIgnoredDuringExecution", "[]PodAffinityTerm", True),
        ("preferredDuringSchedulingIgnoredDuringExecution", "[]WeightedPodAffinityTerm", True),
    ],
    "PodAffinityTerm": [
        ("labelSelector", "LabelSelector", True),
        ("namespaces", "strs", True),
        ("topologyKey", "str", False),
        ("namespaceSelector", "LabelSelector", True),
        ("matchLabelKeys", "strs", True),
        ("mismatchLabelKeys", "strs", True),
    ],
    "WeightedPodAffinityTerm": [("weight", "int", False), ("podAffinityTerm", "PodAffinityTerm", False)],
    "LabelSelector": [("matchLabels", "map", True), ("matchExpressions", "[]LabelSelectorRequirement", True)],
    "LabelSelectorRequirement": _SELECTOR_REQ,
    "Toleration": [
        ("key", "str", True),
        ("operator", "str", True),
        ("value", "str", True),
        ("effect", "str", True),
        ("tolerationSeconds", "int", True),
    ],
}
_ZERO: dict[str, Any] = {"str": "", "int": 0}


def _empty(kind: str, value: Any) -> bool:
    """Go's omitempty: a zero string or number, a nil or empty slice or map, a nil pointer."""
    return value is None or value == _ZERO.get(kind) or (isinstance(value, list | dict) and not value)


def encode(kind: str, value: Any) -> Any:
    """`value` as Go would marshal it into type `kind`: plain data in the field order."""
    if kind.startswith("[]"):
        return None if value is None else [encode(kind[2:], v) for v in value]
    if kind == "str":
        return "" if value is None else str(value)
    if kind == "int":
        return 0 if value is None else int(value)
    if kind == "strs":
        return None if value is None else [str(v) for v in value]
    if kind == "map":
        return None if value is None else {str(k): str(v) for k, v in sorted(dict(value).items())}
    fields = STRUCTS[kind]
    given: Mapping[str, Any] = value if isinstance(value, Mapping) else {}
    out: dict[str, Any] = {}
    for name, field_kind, omitempty in fields:
        item = given.get(name)
        is_struct = field_kind in STRUCTS
        if omitempty and (_empty(field_kind, item) if not is_struct else item is None):
            continue
        out[name] = encode(field_kind, item)
    return out


def dumps(value: Any) -> str:
    """Go's json.Marshal text of plain data already in Go's order (from `encode`)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
