"""Checks of the RayCluster fields the pod and Service builders read as numbers or structures, pure.

The CRD keeps pod templates as free-form objects and rayStartParams and group ``resources`` as
strings (KubeRay's schema), so the API server admits values that no pod could be built from. Each
check here returns the first problem as ``<field path>: <rule>``, e.g.
``spec.workerGroupSpecs[0].rayStartParams.num-cpus: not a quantity: 'abc'``, or None; the
validation runs them before anything is built, so building never meets such a value.

Quantities are bounded (`rayscale.resources.MAX_QUANTITY`, 2^63-1) before any arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayscale.cluster import host
from rayscale.resources import QuantityError, parse_quantity, parse_resources_param

__all__ = [
    "NUMBER_PARAMS",
    "SERVICE_TYPES",
    "head_service_problem",
    "quantity_problem",
    "ray_start_params_problem",
    "resource_map_problem",
    "service_type_problem",
    "shown",
    "template_problem",
]

#: rayStartParams that are amounts (`ray start` takes them as numbers; rayscale reads them).
NUMBER_PARAMS = (*host.AMOUNT_PARAMS.values(), "object-store-memory")
#: Kubernetes' Service types.
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
MAX_PORT = 65535
_SHOWN = 40  # characters of a bad value quoted in a message


def shown(value: Any) -> str:
    """`value` as quoted in a message: its repr, cut short (an integer too long for one: its size)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def quantity_problem(path: str, value: Any) -> str | None:
    """A non-negative quantity of at most 2^63-1."""
    try:
        amount = parse_quantity(value)
    except QuantityError as exc:
        return f"{path}: {exc}"
    if amount < 0:
        return f"{path}: must not be negative ({shown(value)})"
    return None


def resource_map_problem(path: str, resources: Mapping[str, Any] | None) -> str | None:
    """A group's ``resources`` map: every amount a quantity."""
    for key, value in (resources or {}).items():
        if problem := quantity_problem(f"{path}.{key}", value):
            return problem
    return None


def _is_port_param(key: str) -> bool:
    return key == "port" or key.endswith("-port")


def _port_problem(path: str, value: Any, *, lowest: int) -> str | None:
    text = str(value).strip() if isinstance(value, str) else None
    number = int(text) if text is not None and text.isascii() and text.isdigit() and len(text) <= 5 else None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    if number is None or not lowest <= number <= MAX_PORT:
        return f"{path}: must be a port number from {lowest} to {MAX_PORT} ({shown(value)})"
    return None


def _param_problem(where: str, key: str, value: str) -> str | None:
    if key in NUMBER_PARAMS:
        return quantity_problem(where, value)
    if key == host.RESOURCES_PARAM:
        try:
            amounts = parse_resources_param(value, field=where)
        except QuantityError as exc:
            return str(exc)
        negative = [name for name, amount in amounts.items() if amount < 0]
        return f"{where}.{negative[0]}: must not be negative" if negative else None
    if _is_port_param(key):
        return _port_problem(where, value, lowest=0)
    return None


def ray_start_params_problem(path: str, params: Mapping[str, str] | None) -> str | None:
    """Amounts are quantities, ``resources`` a JSON object of quantities, ports port numbers."""
    for key, value in sorted((params or {}).items()):
        if problem := _param_problem(f"{path}.{key}", key, value):
            return problem
    return None


def service_type_problem(path: str, value: str | None) -> str | None:
    if value is not None and value not in SERVICE_TYPES:
        return f"{path}: must be one of {', '.join(SERVICE_TYPES)} ({shown(value)})"
    return None


def _list_of_objects(path: str, value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, list):
        return f"{path}: must be a list of {what}"
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            return f"{path}[{i}]: must be an object"
    return None


def _string_map(path: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return f"{path}: must be a map of strings"
    for key, item in value.items():
        if not isinstance(item, str):
            return f"{path}.{key}: must be a string ({shown(item)})"
    return None


def _strings(path: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return f"{path}: must be a list of strings"
    return None


def _container_problem(path: str, container: Mapping[str, Any]) -> str | None:
    resources = container.get("resources")
    if resources is not None and not isinstance(resources, Mapping):
        return f"{path}.resources: must be an object"
    for kind in ("limits", "requests"):
        amounts = (resources or {}).get(kind)
        if amounts is not None and not isinstance(amounts, Mapping):
            return f"{path}.resources.{kind}: must be a map of quantities"
        if problem := resource_map_problem(f"{path}.resources.{kind}", amounts):
            return problem
    for key, what in (("env", "variables"), ("ports", "ports"), ("volumeMounts", "mounts")):
        if problem := _list_of_objects(f"{path}.{key}", container.get(key), what):
            return problem
    for i, port in enumerate(container.get("ports") or []):
        if problem := _port_problem(f"{path}.ports[{i}].containerPort", port.get("containerPort"), lowest=1):
            return problem
        if not isinstance(port.get("name", ""), str):
            return f"{path}.ports[{i}].name: must be a string ({shown(port['name'])})"
    for key in ("command", "args"):
        if problem := _strings(f"{path}.{key}", container.get(key)):
            return problem
    return None


def template_problem(path: str, template: Mapping[str, Any]) -> str | None:
    """A pod template the builders can read: objects and lists where Kubernetes has them, at
    least one container, container resources quantities, container ports port numbers."""
    meta = template.get("metadata")
    if meta is not None:
        if not isinstance(meta, Mapping):
            return f"{path}.metadata: must be an object"
        for key in ("labels", "annotations"):
            if problem := _string_map(f"{path}.metadata.{key}", meta.get(key)):
                return problem
    spec = template.get("spec")
    if spec is not None and not isinstance(spec, Mapping):
        return f"{path}.spec: must be an object"
    spec = spec or {}
    if problem := _list_of_objects(f"{path}.spec.containers", spec.get("containers"), "containers"):
        return problem
    if not spec.get("containers"):
        return f"{path}.spec.containers: must have at least one container"
    for key, what in (("initContainers", "containers"), ("volumes", "volumes")):
        if problem := _list_of_objects(f"{path}.spec.{key}", spec.get(key), what):
            return problem
    if problem := _string_map(f"{path}.spec.nodeSelector", spec.get("nodeSelector")):
        return problem
    for kind in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(kind) or []):
            if problem := _container_problem(f"{path}.spec.{kind}[{i}]", container):
                return problem
    return None


def head_service_problem(path: str, service: Mapping[str, Any] | None) -> str | None:
    """``headService``: the parts the Service builder merges into its own."""
    if service is None:
        return None
    for key in ("metadata", "spec"):
        part = service.get(key)
        if part is not None and not isinstance(part, Mapping):
            return f"{path}.{key}: must be an object"
    meta = service.get("metadata") or {}
    for key in ("labels", "annotations"):
        if problem := _string_map(f"{path}.metadata.{key}", meta.get(key)):
            return problem
    if problem := _list_of_objects(f"{path}.spec.ports", (service.get("spec") or {}).get("ports"), "ports"):
        return problem
    return None
