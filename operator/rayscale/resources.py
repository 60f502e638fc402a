"""Kubernetes quantities and the Ray resources of one worker-group host.

The scheduler, the simulator and the controller all need to know what one pod of a group
brings to Ray: its logical ``CPU``, ``GPU``, ``memory``, ``TPU`` and custom resources. KubeRay
derives them from the group's ``resources`` map, its ``rayStartParams`` and the limits of the
Ray container (the first container of the pod template); this module does the same, in the
same order of precedence:

1. the group ``resources`` map (``cpu``, ``memory``, GPU-like keys, anything else custom);
2. ``rayStartParams``: ``num-cpus``, ``num-gpus``, ``memory`` and the ``resources`` JSON;
3. the Ray container: CPU from limits (else requests) rounded up, memory from limits (else
   requests), GPU from the first GPU-like key, ``google.com/tpu`` as ``TPU`` and
   ``aws.amazon.com/neuroncore`` as ``neuron_cores``.

TPU groups scheduled with the GKE node selectors also get ``TPU-<type>-head: 1``, the resource
Ray uses to place one task per slice.

Group specs are plain mappings with the camelCase keys of the RayCluster YAML.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal
from typing import Any

__all__ = [
    "GKE_TPU_ACCELERATOR_LABEL",
    "GKE_TPU_TOPOLOGY_LABEL",
    "QuantityError",
    "host_labels",
    "host_resources",
    "is_gpu_key",
    "parse_quantity",
    "parse_resource_map",
    "parse_resources_param",
    "quantity_to_float",
    "tpu_accelerator_type",
]

GKE_TPU_TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
GKE_TPU_ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"

_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "K": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

# GKE accelerator node-selector value -> TPU generation (Ray's table).
_TPU_GENERATIONS = {
    "tpu-v4-podslice": "v4",
    "tpu-v5-lite-device": "v5e",
    "tpu-v5-lite-podslice": "v5e",
    "tpu-v5p-slice": "v5p",
    "tpu-v6e-slice": "v6e",
}
# Generations whose pod type counts TensorCores (two per chip) rather than chips.
_TWO_CORES_PER_CHIP = {"v4", "v5p"}

# Container resource names that become Ray custom resources, in the order KubeRay checks them.
_ACCELERATOR_KEYS = {"aws.amazon.com/neuroncore": "neuron_cores", "google.com/tpu": "TPU"}


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


def _ceil(value: str | int | float | Decimal) -> int:
    return int(parse_quantity(value).to_integral_value(rounding=ROUND_CEILING))


_MIG = re.compile(r"nvidia\.com/mig-\d+g\.\d+gb$")


def is_gpu_key(name: str) -> bool:
    """Resource names KubeRay treats as GPUs: ``nvidia.com/gpu``, ``amd.com/gpu``, ``GPU`` ...
    and NVIDIA MIG slices (``nvidia.com/mig-1g.5gb``). The one predicate for ``ray start``'s
    ``--num-gpus``, a host's Ray resources and the GPU column of the status."""
    return name.lower().endswith("gpu") or bool(_MIG.search(name.lower()))


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


def tpu_accelerator_type(topology: str, accelerator: str) -> str | None:
    """The Ray TPU pod type ("v6e-16", "v4-8") from the GKE TPU node selectors, or None."""
    generation = _TPU_GENERATIONS.get(accelerator)
    if generation is None or not topology:
        return None
    try:
        chips = math.prod(int(part) for part in topology.lower().split("x"))
    except ValueError:
        return None
    cores = chips * (2 if generation in _TWO_CORES_PER_CHIP else 1)
    return f"{generation}-{cores}"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _first_container_resources(group_spec: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    pod_spec = _mapping(_mapping(group_spec.get("template")).get("spec"))
    containers = pod_spec.get("containers") or []
    first = _mapping(containers[0]) if isinstance(containers, list) and containers else {}
    res = _mapping(first.get("resources"))
    return _mapping(res.get("limits")), _mapping(res.get("requests"))


def _nonzero(value: Any) -> bool:
    return value is not None and parse_quantity(value) > 0


def _container_resources(group_spec: Mapping[str, Any]) -> dict[str, float]:
    limits, requests = _first_container_resources(group_spec)
    for kind, source in (("limits", limits), ("requests", requests)):
        for key, value in source.items():  # each named in the error, before any is used
            try:
                parse_quantity(value)
            except QuantityError as exc:
                raise QuantityError(f"template.spec.containers[0].resources.{kind}.{key}: {exc}") from None
    out: dict[str, float] = {}
    for source in (limits, requests):
        if "CPU" not in out and _nonzero(source.get("cpu")):
            out["CPU"] = float(_ceil(source["cpu"]))
        if "memory" not in out and _nonzero(source.get("memory")):
            out["memory"] = float(_ceil(source["memory"]))
        for key in sorted(source):
            if "GPU" not in out and is_gpu_key(key) and _nonzero(source[key]):
                out["GPU"] = float(_ceil(source[key]))
    for key, ray_name in sorted(_ACCELERATOR_KEYS.items()):
        for source in (limits, requests):
            if ray_name not in out and _nonzero(source.get(key)):
                out[ray_name] = float(_ceil(source[key]))
    return out


def _start_param_resources(params: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    if "resources" in params:
        out.update(parse_resources_param(str(params["resources"])))
    for param, ray_name in (("num-cpus", "CPU"), ("num-gpus", "GPU"), ("memory", "memory")):
        if param in params:
            try:
                out[ray_name] = quantity_to_float(str(params[param]))
            except QuantityError as exc:
                raise QuantityError(f"rayStartParams.{param}: {exc}") from exc
    return out


def _group_map_resources(resources: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, amount in parse_resource_map(resources).items():
        lower = key.lower()
        if lower == "cpu":
            out["CPU"] = float(math.ceil(amount))  # ray start takes whole CPUs; KubeRay rounds up
        elif lower == "memory":
            out["memory"] = float(math.ceil(amount))
        elif is_gpu_key(lower):
            out["GPU"] = float(math.ceil(amount))
        else:
            out[key] = amount
    return out


def host_resources(group_spec: Mapping[str, Any], *, is_head: bool = False) -> dict[str, float]:
    """The Ray resources of ONE host (pod) of a head or worker group spec.

    ``group_spec`` is a ``headGroupSpec`` or one ``workerGroupSpecs`` entry as a plain mapping.
    Keys with a zero amount are dropped. Raises QuantityError for malformed values.
    ``is_head`` is accepted for symmetry with KubeRay; head and worker hosts derive the same way.
    """
    del is_head  # the derivation is the same; the flag documents the caller's intent
    params = _mapping(group_spec.get("rayStartParams"))
    resources = _container_resources(group_spec)
    from_params = _start_param_resources(params)
    if "TPU" in from_params or "neuron_cores" in from_params:
        # KubeRay adds a container accelerator only when the params name none.
        resources.pop("TPU", None)
        resources.pop("neuron_cores", None)
    resources.update(from_params)
    resources.update(_group_map_resources(_mapping(group_spec.get("resources"))))

    if resources.get("TPU", 0) > 0:
        selector = _mapping(_mapping(_mapping(group_spec.get("template")).get("spec")).get("nodeSelector"))
        pod_type = tpu_accelerator_type(
            str(selector.get(GKE_TPU_TOPOLOGY_LABEL, "")), str(selector.get(GKE_TPU_ACCELERATOR_LABEL, ""))
        )
        if pod_type is not None:
            resources.setdefault(f"TPU-{pod_type}-head", 1.0)
    return {key: amount for key, amount in sorted(resources.items()) if amount != 0}


def host_labels(group_spec: Mapping[str, Any]) -> dict[str, str]:
    """The Ray node labels of a group's hosts: ``rayStartParams.labels`` then the ``labels`` map."""
    labels: dict[str, str] = {}
    raw = _mapping(group_spec.get("rayStartParams")).get("labels")
    if isinstance(raw, str):
        for item in raw.split(","):
            key, sep, value = item.partition("=")
            if sep and key.strip():
                labels[key.strip()] = value.strip()
    for key, value in _mapping(group_spec.get("labels")).items():
        labels[str(key)] = str(value)
    return labels
