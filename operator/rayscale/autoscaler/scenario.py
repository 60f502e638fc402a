"""Scenario files (`rayscale simulate`): YAML or JSON in, a scheduler Snapshot out.

The format is a public contract, documented in docs/scenario-format.md. Every error names the
field it is about, e.g. ``groups[1].maxReplicas: must be an integer >= 0``. The virtual-cluster
keys (``virtualClusters``, ``finishedJobs``, a node's ``virtualCluster`` and ``jobCluster``) are
accepted here and read by `rayscale.autoscaler.virtual.scenario`; the field readers below
(`fail`, `as_map`, `as_list`, `only`, `integer`, `boolean`) serve both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from rayscale.autoscaler.scheduling.model import (
    RAY_REQUEST_UNIT,
    UNLIMITED,
    Constraint,
    Demand,
    Gang,
    Group,
    Head,
    LabelConstraint,
    LabelOp,
    Node,
    NodeState,
    Options,
    Selector,
    Snapshot,
    Strategy,
    UpscalingMode,
)
from rayscale.autoscaler.spec_reader import SpecError, read_spec
from rayscale.resources import QuantityError, quantity_to_float

T = TypeVar("T")

TOP_LEVEL = {"cluster", "groups", "nodes", "demands", "gangs", "constraints", "options", "head"}
VIRTUAL_TOP_LEVEL = {"virtualClusters", "finishedJobs"}
VIRTUAL_NODE_KEYS = {"virtualCluster", "jobCluster"}


class ScenarioError(ValueError):
    """A scenario that does not follow the format; the message starts with the field path."""


def fail(path: str, message: str) -> ScenarioError:
    """The error about the field at `path`."""
    return ScenarioError(f"{path}: {message}")


def as_map(value: Any, path: str) -> Mapping[str, Any]:
    """`value` as a mapping (null: empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail(path, "must be a mapping")
    return value


def as_list(value: Any, path: str) -> list[Any]:
    """`value` as a list (null: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(path, "must be a list")
    return value


def only(data: Mapping[str, Any], allowed: set[str], path: str) -> None:
    """Refuse the first key of `data` not in `allowed`."""
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise fail(
            f"{path}.{unknown[0]}" if path else unknown[0],
            f"unknown field (known: {', '.join(sorted(allowed))})",
        )


def integer(data: Mapping[str, Any], key: str, path: str, default: int, minimum: int = 0) -> int:
    """``data[key]``, an integer >= `minimum` (absent or null: `default`)."""
    value = data.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise fail(f"{path}.{key}", f"must be an integer >= {minimum}")
    return value


def _number(data: Mapping[str, Any], key: str, path: str, default: float | None) -> float | None:
    value = data.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise fail(f"{path}.{key}", "must be a number >= 0")
    return float(value)


def boolean(data: Mapping[str, Any], key: str, path: str) -> bool:
    """``data[key]``, true or false (absent or null: false)."""
    value = data.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise fail(f"{path}.{key}", "must be true or false")
    return value


def _labels(value: Any, path: str) -> dict[str, str]:
    """A label map: string keys, scalar values (kept as strings)."""
    out: dict[str, str] = {}
    for key, label in as_map(value, path).items():
        if isinstance(label, Mapping | list) or label is None:
            raise fail(f"{path}.{key}", "must be a string")
        out[str(key)] = str(label)
    return out


def _enum(data: Mapping[str, Any], key: str, path: str, kind: Callable[[str], T], default: T) -> T:
    value = data.get(key)
    if value is None:
        return default
    try:
        return kind(str(value))
    except ValueError:
        raise fail(f"{path}.{key}", f"unknown value {value!r}") from None


def resources(value: Any, path: str) -> dict[str, float]:
    """A resource map; amounts may be Kubernetes quantities ("32Gi")."""
    out: dict[str, float] = {}
    for name, amount in as_map(value, path).items():
        try:
            parsed = quantity_to_float(amount)
        except QuantityError as exc:
            raise fail(f"{path}.{name}", str(exc)) from None
        if parsed < 0:
            raise fail(f"{path}.{name}", "must be >= 0")
        if parsed > 0:
            out[str(name)] = parsed
    return out


def label_selector(value: Any, path: str) -> Selector:
    """``{key: value}`` (shorthand for ``in``) or a list of ``{key, op, values}``."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        return tuple(LabelConstraint(str(k), LabelOp.IN, (str(v),)) for k, v in sorted(value.items()))
    if not isinstance(value, list):
        raise fail(path, "must be a map {key: value} or a list of {key, op, values}")
    out = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        entry = as_map(item, where)
        only(entry, {"key", "op", "values"}, where)
        if not isinstance(entry.get("key"), str):
            raise fail(f"{where}.key", "must be a string")
        op = _enum(entry, "op", where, LabelOp, LabelOp.IN)
        values = entry.get("values")
        if isinstance(values, str):
            values = [values]
        out.append(
            LabelConstraint(entry["key"], op, tuple(str(v) for v in as_list(values, f"{where}.values")))
        )
    return tuple(out)


def _group(item: Any, path: str) -> Group:
    data = as_map(item, path)
    only(
        data,
        {"name", "resources", "labels", "minReplicas", "maxReplicas", "numOfHosts", "idleTimeoutSeconds"}
        | {"priority", "backoff", "refused"},
        path,
    )
    if not isinstance(data.get("name"), str) or not data["name"]:
        raise fail(f"{path}.name", "must be a non-empty string")
    low = integer(data, "minReplicas", path, 0)
    high = integer(data, "maxReplicas", path, UNLIMITED)
    if low > high:
        raise fail(f"{path}.minReplicas", f"must be <= maxReplicas ({high})")
    return Group(
        name=data["name"],
        resources=resources(data.get("resources"), f"{path}.resources"),
        labels=_labels(data.get("labels"), f"{path}.labels"),
        min_replicas=low,
        max_replicas=high,
        num_of_hosts=integer(data, "numOfHosts", path, 1, minimum=1),
        idle_timeout_seconds=_number(data, "idleTimeoutSeconds", path, None),
        priority=integer(data, "priority", path, 0, minimum=-(2**31)),
        backoff=boolean(data, "backoff", path),
        refused=boolean(data, "refused", path),
    )


def _node(item: Any, path: str, groups: set[str]) -> Node:
    data = as_map(item, path)
    only(
        data,
        {
            "name",
            "group",
            "state",
            "replica",
            "available",
            "idleSeconds",
            "pendingSeconds",
            "booting",
            "refused",
            "labels",
        }
        | VIRTUAL_NODE_KEYS,
        path,
    )
    for key in ("name", "group"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise fail(f"{path}.{key}", "must be a non-empty string")
    if data["group"] not in groups:
        raise fail(f"{path}.group", f"no group named {data['group']!r}")
    replica = data.get("replica")
    if replica is not None and not isinstance(replica, str):
        raise fail(f"{path}.replica", "must be a string or null")
    available = data.get("available")
    labels = data.get("labels")
    return Node(
        name=data["name"],
        group=data["group"],
        state=_enum(data, "state", path, NodeState, NodeState.RUNNING),
        replica=replica,
        available=None if available is None else resources(available, f"{path}.available"),
        idle_seconds=_number(data, "idleSeconds", path, 0.0) or 0.0,
        pending_seconds=_number(data, "pendingSeconds", path, 0.0) or 0.0,
        booting=boolean(data, "booting", path),
        refused=boolean(data, "refused", path),
        labels=None if labels is None else _labels(labels, f"{path}.labels"),
    )


def _demand(item: Any, path: str) -> Demand:
    data = as_map(item, path)
    only(data, {"resources", "count", "labelSelector", "fallbacks"}, path)
    fallbacks = as_list(data.get("fallbacks"), f"{path}.fallbacks")
    return Demand(
        resources(data.get("resources"), f"{path}.resources"),
        integer(data, "count", path, 1),
        label_selector(data.get("labelSelector"), f"{path}.labelSelector"),
        tuple(label_selector(f, f"{path}.fallbacks[{i}]") for i, f in enumerate(fallbacks)),
    )


def _gang(item: Any, path: str) -> Gang:
    data = as_map(item, path)
    only(data, {"strategy", "bundles", "count", "bundleSelectors"}, path)
    bundles = as_list(data.get("bundles"), f"{path}.bundles")
    if not bundles:
        raise fail(f"{path}.bundles", "must list at least one bundle")
    selectors = as_list(data.get("bundleSelectors"), f"{path}.bundleSelectors")
    if selectors and len(selectors) != len(bundles):
        raise fail(f"{path}.bundleSelectors", f"must list one selector (or null) per bundle ({len(bundles)})")
    return Gang(
        _enum(data, "strategy", path, Strategy, Strategy.PACK),
        tuple(resources(b, f"{path}.bundles[{i}]") for i, b in enumerate(bundles)),
        integer(data, "count", path, 1),
        tuple(label_selector(sel, f"{path}.bundleSelectors[{i}]") for i, sel in enumerate(selectors)),
    )


def _constraint(item: Any, path: str) -> Constraint:
    data = as_map(item, path)
    only(data, {"resources", "count", "labelSelector", "unit"}, path)
    unit = data.get("unit", RAY_REQUEST_UNIT)
    if unit is None:
        unit = RAY_REQUEST_UNIT
    if not isinstance(unit, str):
        raise fail(f"{path}.unit", "must be a string")
    return Constraint(
        resources(data.get("resources"), f"{path}.resources"),
        integer(data, "count", path, 1),
        label_selector(data.get("labelSelector"), f"{path}.labelSelector"),
        unit,
    )


def _head(item: Any) -> Head | None:
    if item is None:
        return None
    data = as_map(item, "head")
    only(data, {"resources", "available", "labels"}, "head")
    available = data.get("available")
    return Head(
        resources(data.get("resources"), "head.resources"),
        None if available is None else resources(available, "head.available"),
        _labels(data.get("labels"), "head.labels"),
    )


def _options(data: Mapping[str, Any], base: Options) -> Options:
    only(
        data,
        {
            "idleTimeoutSeconds",
            "upscalingMode",
            "maxWorkers",
            "maxNodeProvisionSeconds",
            "maxNodeBootSeconds",
        },
        "options",
    )
    idle = base.idle_timeout_seconds
    if "idleTimeoutSeconds" in data:
        idle = _number(data, "idleTimeoutSeconds", "options", None)
    max_workers = base.max_workers
    if "maxWorkers" in data:
        max_workers = None if data["maxWorkers"] is None else integer(data, "maxWorkers", "options", 0)
    provision = _number(data, "maxNodeProvisionSeconds", "options", base.max_node_provision_seconds)
    boot = _number(data, "maxNodeBootSeconds", "options", base.max_node_boot_seconds)
    return Options(
        idle_timeout_seconds=idle,
        upscaling_mode=_enum(data, "upscalingMode", "options", UpscalingMode, base.upscaling_mode),
        max_workers=max_workers,
        max_node_provision_seconds=base.max_node_provision_seconds if provision is None else provision,
        max_node_boot_seconds=base.max_node_boot_seconds if boot is None else boot,
    )


def _cluster(manifest: Any) -> tuple[tuple[Group, ...], Options]:
    """A scenario's ``cluster:``: read as the operator reads a live one (`spec_reader.read_spec`)."""
    try:
        scaling = read_spec(as_map(manifest, "cluster"))
    except SpecError as exc:
        raise ScenarioError(f"cluster.{exc}") from None
    return scaling.groups, scaling.options


def parse_scenario(data: Any) -> Snapshot:
    """Validate a loaded scenario document and build the scheduler's Snapshot (its virtual
    clusters, if any, are `rayscale.autoscaler.virtual.scenario.parse_virtual`'s)."""
    top = as_map(data, "scenario")
    only(top, TOP_LEVEL | VIRTUAL_TOP_LEVEL, "")
    if "cluster" in top and "groups" in top:
        raise fail("groups", "give either cluster or groups, not both")
    if "cluster" in top:
        groups, options = _cluster(top["cluster"])
    else:
        groups = tuple(_group(g, f"groups[{i}]") for i, g in enumerate(as_list(top.get("groups"), "groups")))
        options = Options()
    names = [g.name for g in groups]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise fail(f"groups[{i}].name", f"duplicate group {name!r}")
    options = _options(as_map(top.get("options"), "options"), options)
    nodes = tuple(
        _node(n, f"nodes[{i}]", set(names)) for i, n in enumerate(as_list(top.get("nodes"), "nodes"))
    )
    seen: set[str] = set()
    for i, node in enumerate(nodes):
        if node.name in seen:
            raise fail(f"nodes[{i}].name", f"duplicate node {node.name!r}")
        seen.add(node.name)
    return Snapshot(
        groups=groups,
        nodes=nodes,
        demands=tuple(
            _demand(d, f"demands[{i}]") for i, d in enumerate(as_list(top.get("demands"), "demands"))
        ),
        gangs=tuple(_gang(g, f"gangs[{i}]") for i, g in enumerate(as_list(top.get("gangs"), "gangs"))),
        constraints=tuple(
            _constraint(c, f"constraints[{i}]")
            for i, c in enumerate(as_list(top.get("constraints"), "constraints"))
        ),
        options=options,
        head=_head(top.get("head")),
    )
