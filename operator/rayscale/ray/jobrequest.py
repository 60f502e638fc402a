"""The request that submits a Ray job (``POST /api/jobs/``, Ray 2.60's ``JobSubmitRequest``), and
how KubeRay builds it from a RayJob.

`SubmitRequest.from_rayjob_spec` makes the request KubeRay 1.6's ``ConvertRayJobToReq``
(controllers/ray/utils/dashboardclient) makes of a RayJob's spec, down to the JSON:

- ``entrypoint`` always (an empty one too); ``submission_id`` the one given (the RayJob's
  ``status.jobId``), left out when empty; ``metadata`` as it is, left out when empty;
- ``runtime_env``: ``runtimeEnvYAML`` read as YAML the way KubeRay's Go YAML library reads it
  (YAML 1.1: ``yes``/``no``/``on``/``off``/``y``/``n`` are booleans, a date stays a string, keys
  become strings, every number passes through a float64), left out when it is empty or null, an
  error when it is not a mapping;
- ``entrypoint_num_cpus``/``entrypoint_num_gpus`` as Go's float32 holds them (1.1 stays 1.1, 0.1 +
  0.2 becomes 0.3), left out when 0;
- ``entrypoint_resources``: ``entrypointResources``, a JSON object of numbers (each as a float32),
  left out when empty; an error when it is not one;
- nothing else: KubeRay sends no ``entrypoint_memory``.

Pure: no I/O.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import yaml

__all__ = ["SubmitRequest"]


@dataclass(frozen=True, slots=True)
class SubmitRequest:
    """The body of ``POST /api/jobs/``. None (the default) leaves a field out; Ray then uses its
    own default (a generated submission id, no runtime env, no reserved resources)."""

    entrypoint: str
    submission_id: str | None = None
    runtime_env: Mapping[str, Any] | None = None
    metadata: Mapping[str, str] | None = None
    entrypoint_num_cpus: float | None = None
    entrypoint_num_gpus: float | None = None
    entrypoint_memory: int | None = None  # bytes
    entrypoint_resources: Mapping[str, float] | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON body, without the fields that are None (the others as given: Ray checks them)."""
        optional: dict[str, Any] = {
            "submission_id": self.submission_id,
            "runtime_env": _plain(self.runtime_env),
            "metadata": _plain(self.metadata),
            "entrypoint_num_cpus": self.entrypoint_num_cpus,
            "entrypoint_num_gpus": self.entrypoint_num_gpus,
            "entrypoint_memory": self.entrypoint_memory,
            "entrypoint_resources": _plain(self.entrypoint_resources),
        }
        body: dict[str, Any] = {"entrypoint": self.entrypoint}
        body.update((name, value) for name, value in optional.items() if value is not None)
        return body

    @classmethod
    def from_rayjob_spec(cls, spec: Mapping[str, Any], submission_id: str) -> SubmitRequest:
        """The request KubeRay submits for a RayJob with this `spec` (camelCase, as in the object)
        and job id. ValueError for a ``runtimeEnvYAML`` or ``entrypointResources`` KubeRay
        refuses, with KubeRay's reason."""
        runtime_env = _runtime_env(spec.get("runtimeEnvYAML") or "")
        resources = _entrypoint_resources(spec.get("entrypointResources") or "")
        metadata = spec.get("metadata") or {}
        return cls(
            entrypoint=spec.get("entrypoint") or "",
            submission_id=submission_id or None,
            runtime_env=runtime_env or None,
            metadata={str(k): str(v) for k, v in metadata.items()} or None,
            entrypoint_num_cpus=_nonzero(_float32(spec.get("entrypointNumCpus") or 0, "entrypointNumCpus")),
            entrypoint_num_gpus=_nonzero(_float32(spec.get("entrypointNumGpus") or 0, "entrypointNumGpus")),
            entrypoint_resources=resources or None,
        )


def _plain(value: object) -> object:
    return dict(value) if isinstance(value, Mapping) else value


# ---- Go's numbers ----

_FLOAT32_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
_GO_INTEGRAL_LIMIT = 1e21  # Go's encoding/json prints integral floats below this without an exponent


def _number(value: float) -> float:
    """`value` as Go's encoding/json prints it: an integral one as an integer, of the shortest
    digits that read back as `value` (1.2345678901234567e19 is 12345678901234567000)."""
    if value.is_integer() and abs(value) < _GO_INTEGRAL_LIMIT:
        return int(Decimal(repr(value)))
    return value


def _float32(value: object, name: str) -> float:
    """`value` in a Go float32, then printed as Go prints a float32: the shortest decimal that
    reads back as the same float32."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: {value!r} is not a number")
    if not math.isfinite(value) or abs(value) > _FLOAT32_MAX:
        raise ValueError(f"{name}: {value!r} overflows a float32")
    single = struct.unpack("<f", struct.pack("<f", value))[0]
    for digits in range(1, 10):
        shortest = float(f"{single:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", shortest))[0] == single:
            return _number(shortest)
    return _number(single)  # pragma: no cover - 9 significant digits always read back


def _nonzero(value: float) -> float | None:
    return value or None  # Go's omitempty leaves a 0 out


def _entrypoint_resources(text: str) -> dict[str, float]:
    """``entrypointResources`` (JSON) as KubeRay's ``json.Unmarshal`` into a map[string]float32."""
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"entrypointResources: not JSON: {exc}") from None
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        raise ValueError(f"entrypointResources: json: cannot unmarshal {_json_kind(parsed)} into a map")
    return {str(k): _float32(v, f"entrypointResources[{k!r}]") for k, v in parsed.items()}


def _json_kind(value: object) -> str:
    return {list: "array", str: "string", bool: "bool"}.get(type(value), "number")


# ---- Go's YAML (sigs.k8s.io/yaml over go.yaml.in/yaml/v2, YAML 1.1) ----


class _GoYamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader with go-yaml v2's reading of plain scalars: timestamps stay strings,
    y/Y/n/N are booleans too, and numbers are what Go's strconv reads (`_go_number`)."""

    bool_values = {**yaml.SafeLoader.bool_values, "y": True, "n": False}  # looked up lowercased


_GO_NUMBER_TAG = "tag:rayscale.io,2026:go-number"
_GO_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_GO_OCTAL = re.compile(r"^[-+]?0[0-7]+$")
_REPLACED = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp"}


def _go_number(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> object:
    """A plain scalar that starts like a number, as go-yaml v2 resolves it: underscores dropped,
    then an integer of any base Go's ``strconv.ParseInt(s, 0, 64)`` takes (0x, 0o, 0b, a leading 0
    for octal), else a float (an exponent needs no dot: 1e3), else the string itself."""
    text = loader.construct_scalar(node)
    plain = text.replace("_", "")
    try:
        return int(plain, 8) if _GO_OCTAL.match(plain) else int(plain, 0)
    except ValueError:
        pass
    return float(plain) if _GO_FLOAT.match(plain) else text


_GoYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in _REPLACED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_GoYamlLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN"))
_GoYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+.")
)
_GoYamlLoader.add_implicit_resolver(
    _GO_NUMBER_TAG, re.compile(r"^[-+]?[0-9.][0-9A-Za-z_.+-]*$"), list("-+.0123456789")
)
_GoYamlLoader.add_constructor(_GO_NUMBER_TAG, _go_number)


def _go_key(key: object) -> str:
    """A YAML key as sigs.k8s.io/yaml writes it into JSON: every key a string."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int | float):
        return str(_number(float(key)))
    if isinstance(key, str):
        return key
    raise ValueError(f"runtimeEnvYAML: a key of type {type(key).__name__} ({key!r})")


def _go_json(value: object) -> object:
    """A YAML value as it comes out of Go's JSON round trip: numbers through a float64."""
    if isinstance(value, dict):
        return {_go_key(k): _go_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_json(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"runtimeEnvYAML: {value!r} has no JSON form")
        return _number(float(value))
    raise ValueError(f"runtimeEnvYAML: a value of type {type(value).__name__} ({value!r})")


def _runtime_env(text: str) -> dict[str, Any]:
    """``runtimeEnvYAML`` as KubeRay's ``UnmarshalRuntimeEnvYAML`` reads it."""
    if not text:
        return {}
    try:
        parsed = yaml.load(text, Loader=_GoYamlLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        raise ValueError(f"failed to unmarshal RuntimeEnvYAML: {exc}") from None
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        raise ValueError(
            f"failed to unmarshal RuntimeEnvYAML: cannot unmarshal {_json_kind(parsed)} into a map: {text!r}"
        )
    converted = _go_json(parsed)
    assert isinstance(converted, dict)
    return converted
