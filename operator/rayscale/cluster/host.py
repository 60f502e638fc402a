"""The Ray resources and labels of one host (pod) of a group: what ``ray start`` announces and what
the autoscaler assumes.

KubeRay derives a pod's Ray resources from three places, in this order of precedence:

1. the group's ``resources`` map: ``cpu``, ``memory`` and GPU-like keys rounded up to whole
   numbers (``ray start`` takes whole numbers; KubeRay rounds up), anything else a custom
   resource, exact;
2. ``rayStartParams``: ``num-cpus``, ``num-gpus``, ``memory`` and the ``resources`` JSON, as
   written;
3. the Ray container (the first container of the pod template), for what 1 and 2 leave out: CPUs
   from its limits, else its requests; memory (bytes), the first GPU-like resource and the first
   accelerator (``aws.amazon.com/neuroncore`` as ``neuron_cores``, ``google.com/tpu`` as
   ``TPU``) from its limits; all rounded up. An accelerator named in 1 or 2 keeps the container's
   out.

`start_resource_params` writes these as the flags of the controller's ``ray start``;
`host_resources` is what the autoscaler's scheduler (and ``rayscale simulate``) assumes a host of
the group has. Both read the three places with the same functions, and differ only where Ray's own
autoscaler assumes more than ``ray start`` says (tests/unit/test_cluster_facts.py holds them to
this):

- where the container has no limit for memory, a GPU or an accelerator, its request counts
  (``ray start`` gets nothing, and Ray detects the amount itself);
- a TPU host of a group scheduled with GKE's TPU node selectors has ``TPU-<type>-head: 1``, which
  Ray adds itself on the first host of a slice.

The labels of a host are the group's ``labels`` map, which the controller passes as ``ray start
--labels`` (rayscale's validation refuses ``rayStartParams.labels``; `host_labels` still reads it,
for clusters KubeRay's operator runs).

`host_resources` and `host_labels` take the typed group specs of ``rayscale.api.raycluster``; the
``start_*`` helpers take the parts the controller's pod builder has at hand.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from decimal import ROUND_CEILING, Decimal
from typing import Any

from rayscale.api.raycluster import HeadGroupSpec, WorkerGroupSpec
from rayscale.cluster.accelerators import (
    CONTAINER_ACCELERATORS,
    GKE_TPU_ACCELERATOR_LABEL,
    GKE_TPU_TOPOLOGY_LABEL,
    GPU,
    RAY_ACCELERATORS,
    TPU,
    is_gpu_key,
    tpu_accelerator_type,
    tpu_slice_head_resource,
)
from rayscale.resources import QuantityError, parse_quantity, parse_resources_param

__all__ = [
    "AMOUNT_PARAMS",
    "CPU",
    "LABELS_PARAM",
    "MEMORY",
    "RESOURCES_PARAM",
    "GroupSpec",
    "container_amounts",
    "group_map_amounts",
    "host_labels",
    "host_resources",
    "labels_param",
    "param_amounts",
    "resources_json",
    "start_resource_params",
]

CPU = "CPU"
MEMORY = "memory"
#: Ray resource -> the rayStartParam that announces it.
AMOUNT_PARAMS: Mapping[str, str] = {CPU: "num-cpus", GPU: "num-gpus", MEMORY: "memory"}
#: The rayStartParam of custom resources (a JSON object) and that of node labels (``k=v,...``).
RESOURCES_PARAM = "resources"
LABELS_PARAM = "labels"

Amounts = dict[str, Decimal]
#: A head or worker group spec: both say the same about their hosts.
GroupSpec = HeadGroupSpec | WorkerGroupSpec


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _ceil(amount: Decimal) -> Decimal:
    return amount.to_integral_value(rounding=ROUND_CEILING)


def _whole(amount: Decimal) -> str:
    return str(int(amount))


# ---- the three places


def _whole_resource(key: str) -> str | None:
    """The Ray resource a group ``resources`` key counts in whole numbers (CPU, memory, GPU), or None."""
    if key.lower() == "cpu":
        return CPU
    if key.lower() == "memory":
        return MEMORY
    return GPU if is_gpu_key(key) else None


def group_map_amounts(resources: Mapping[str, Any] | None) -> Amounts:
    """A group's ``resources`` map as Ray resources: ``cpu``, ``memory`` and GPU-like keys rounded up
    to whole numbers, anything else custom and exact. Raises QuantityError naming the key."""
    out: Amounts = {}
    for key, raw in sorted(_mapping(resources).items(), key=lambda item: str(item[0])):
        try:
            amount = parse_quantity(raw)
        except QuantityError as exc:
            raise QuantityError(f"resources.{key}: {exc}") from exc
        name = _whole_resource(str(key))
        if name is None:
            out[str(key)] = amount
        else:
            out[name] = _ceil(amount)
    return out


def param_amounts(params: Mapping[str, Any] | None) -> Amounts:
    """What ``rayStartParams`` announce: the ``resources`` JSON, then ``num-cpus``, ``num-gpus`` and
    ``memory`` as written. Raises QuantityError naming the parameter."""
    params = _mapping(params)
    out: Amounts = {}
    if RESOURCES_PARAM in params:
        parsed = parse_resources_param(str(params[RESOURCES_PARAM]))
        out.update((name, Decimal(amount)) for name, amount in parsed.items())
    for name, param in AMOUNT_PARAMS.items():
        if param in params:
            try:
                out[name] = parse_quantity(str(params[param]))
            except QuantityError as exc:
                raise QuantityError(f"rayStartParams.{param}: {exc}") from exc
    return out


def _first(sources: Sequence[Mapping[str, Any]], wanted: Callable[[str], bool]) -> tuple[str, Decimal] | None:
    """The first key (by name) `wanted` with an amount above zero, in the first of `sources` that
    has one; the amount rounded up."""
    for source in sources:
        for key in sorted(source):
            if wanted(key) and (amount := parse_quantity(source[key])) > 0:
                return key, _ceil(amount)
    return None


def container_amounts(container: Mapping[str, Any], *, requests_too: bool = False) -> Amounts:
    """The Ray resources the Ray container's ``resources`` give, as KubeRay reads them for ``ray
    start``: CPUs from the limits, else the requests; memory, the first GPU-like resource and the
    first accelerator from the limits; all rounded up. `requests_too`: memory, GPU and accelerator
    also from the requests where the limits have none (what Ray's autoscaler assumes).

    Raises QuantityError naming the first value that is not a quantity, before any is used."""
    res = _mapping(container.get("resources"))
    limits, requests = _mapping(res.get("limits")), _mapping(res.get("requests"))
    for kind, source in (("limits", limits), ("requests", requests)):
        for key, value in source.items():
            try:
                parse_quantity(value)
            except QuantityError as exc:
                raise QuantityError(f"template.spec.containers[0].resources.{kind}.{key}: {exc}") from None
    sources = (limits, requests) if requests_too else (limits,)
    out: Amounts = {}
    for name, found in (
        (CPU, _first((limits, requests), lambda key: key == "cpu")),
        (MEMORY, _first(sources, lambda key: key == "memory")),
        (GPU, _first(sources, is_gpu_key)),
    ):
        if found is not None:
            out[name] = found[1]
    accelerator = _first(sources, lambda key: key in CONTAINER_ACCELERATORS)
    if accelerator is not None:
        out[CONTAINER_ACCELERATORS[accelerator[0]]] = accelerator[1]
    return out


def _ray_container(template: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = _mapping(_mapping(template).get("spec")).get("containers") or []
    return _mapping(containers[0]) if isinstance(containers, list) and containers else {}


# ---- what ray start announces


def resources_json(amounts: Mapping[str, float]) -> str:
    """The ``resources`` rayStartParam KubeRay writes: sorted JSON, whole amounts as integers, quoted."""
    body = {k: (int(v) if float(v).is_integer() else v) for k, v in amounts.items()}
    return "'" + json.dumps(body, sort_keys=True, separators=(",", ":")) + "'"


def start_resource_params(
    params: Mapping[str, str],
    group_resources: Mapping[str, str] | None,
    container: Mapping[str, Any],
) -> dict[str, str]:
    """`params` (a group's rayStartParams) with the resource flags KubeRay writes for ``ray start``:
    the group's ``resources`` map replaces ``num-cpus``, ``num-gpus``, ``memory`` and the
    ``resources`` JSON; then the Ray container fills in what is still absent."""
    out = dict(params)
    custom: dict[str, float] = {}
    for name, amount in group_map_amounts(group_resources).items():
        if name in AMOUNT_PARAMS:
            out[AMOUNT_PARAMS[name]] = _whole(amount)
        else:
            custom[name] = float(amount)
    if custom:
        out[RESOURCES_PARAM] = resources_json(custom)
    found = container_amounts(container)
    for name, param in AMOUNT_PARAMS.items():
        if name in found and param not in out:
            out[param] = _whole(found[name])
    accelerator = next((name for name in found if name in RAY_ACCELERATORS), None)
    if accelerator is not None:
        named = parse_resources_param(out[RESOURCES_PARAM]) if RESOURCES_PARAM in out else {}
        if not RAY_ACCELERATORS.intersection(named):
            named[accelerator] = float(found[accelerator])
            out[RESOURCES_PARAM] = resources_json(named)
    return out


def labels_param(labels: Mapping[str, str] | None) -> str | None:
    """The ``labels`` rayStartParam KubeRay writes from a group's ``labels`` map (None: no labels)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) if labels else None


# ---- what the autoscaler assumes


def host_resources(group: GroupSpec) -> dict[str, float]:
    """The Ray resources of ONE host (pod) of a head or worker group, as the autoscaler assumes them.

    Keys with a zero amount are dropped. Raises QuantityError for malformed values (which
    rayscale's validation refuses before anything reads them).
    """
    resources = container_amounts(_ray_container(group.template), requests_too=True)
    from_params = param_amounts(group.ray_start_params)
    from_group = group_map_amounts(group.resources)
    if RAY_ACCELERATORS.intersection(from_params) or RAY_ACCELERATORS.intersection(from_group):
        for name in RAY_ACCELERATORS:  # KubeRay adds a container accelerator only when none is named
            resources.pop(name, None)
    resources.update(from_params)
    resources.update(from_group)
    if resources.get(TPU, 0) > 0:
        selector = _mapping(_mapping(group.template.get("spec")).get("nodeSelector"))
        pod_type = tpu_accelerator_type(
            str(selector.get(GKE_TPU_TOPOLOGY_LABEL, "")), str(selector.get(GKE_TPU_ACCELERATOR_LABEL, ""))
        )
        if pod_type is not None:
            resources.setdefault(tpu_slice_head_resource(pod_type), Decimal(1))
    return {key: float(amount) for key, amount in sorted(resources.items()) if amount != 0}


def host_labels(group: GroupSpec) -> dict[str, str]:
    """The Ray node labels of a group's hosts: ``rayStartParams.labels`` then the ``labels`` map."""
    labels: dict[str, str] = {}
    raw = (group.ray_start_params or {}).get(LABELS_PARAM)
    if raw is not None:
        for item in raw.split(","):
            key, sep, value = item.partition("=")
            if sep and key.strip():
                labels[key.strip()] = value.strip()
    labels.update(group.labels or {})
    return labels
