"""Building blocks that let pydantic models describe Kubernetes structural schemas.

Models declare their CRD-only facts (defaults the API server applies, int32 formats,
preserved objects, CEL rules) with the helpers below; `structural_schema` turns pydantic's
JSON schema into an OpenAPI v3 structural schema that kube-apiserver accepts.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

JsonDict = dict[str, Any]

#: An object kept as-is: not validated by the operator, not pruned by the API server
#: (pod templates, Services, env sources).
PreservedObject = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

#: A Kubernetes resource quantity ("2", "500m", "4Gi"), accepted as integer or string.
Quantity = Annotated[
    int | str,
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
            "pattern": QUANTITY_PATTERN,
        }
    ),
]


class KubeModel(BaseModel):
    """Base of every custom-resource model: camelCase on the wire, unknown fields ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


def int32(default: int | None = None, *, crd_default: int | None = None, alias: str | None = None) -> Any:
    """An int32 field; `crd_default` is applied by the API server (and is the Python default)."""
    extra: JsonDict = {"format": "int32"}
    value = default
    if crd_default is not None:
        extra["default"] = crd_default
        value = crd_default if default is None else default
    return Field(default=value, json_schema_extra=extra, alias=alias)


def crd_default(value: Any, python_default: Any = None) -> Any:
    """A field the API server defaults to `value`; Python sees `python_default` when absent."""
    return Field(default=python_default, json_schema_extra={"default": value})


def structural_schema(model: type[BaseModel]) -> JsonDict:
    """The OpenAPI v3 structural schema of `model` (refs inlined, nullables collapsed, no titles)."""
    raw = model.model_json_schema(by_alias=True)
    defs: dict[str, JsonDict] = raw.pop("$defs", {})
    return _convert(raw, defs)


def _convert(node: JsonDict, defs: dict[str, JsonDict]) -> JsonDict:
    node = dict(node)
    ref = node.pop("$ref", None)
    if ref is not None:
        # A copy per use: a model used twice (e.g. Condition) must not share its lists, or YAML
        # writes them as anchors and aliases.
        target = _convert(copy.deepcopy(defs[ref.rsplit("/", 1)[-1]]), defs)
        node = {**target, **{k: v for k, v in node.items() if k not in ("title",)}}
    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        options = [o for o in node.pop("anyOf") if o.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"unions other than X | None cannot be structural: {options}")
        node = {**_convert(options[0], defs), **node}
    node.pop("title", None)
    if "default" in node and node["default"] is None:
        del node["default"]
    if "properties" in node:
        node["properties"] = {k: _convert(v, defs) for k, v in node["properties"].items()}
    if isinstance(node.get("items"), dict):
        node["items"] = _convert(node["items"], defs)
    if isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = _convert(node["additionalProperties"], defs)
    if node.get("additionalProperties") is False:
        del node["additionalProperties"]
    return node
