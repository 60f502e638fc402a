"""What the scheduler reads (Snapshot) and what it answers (Decision).

Plain frozen dataclasses with slots: cheap to build, hashable where it matters, and free of
any Kubernetes, kopf or gRPC type. Resource maps hold Ray resource names and float amounts
(memory in bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

UNLIMITED = 2**31 - 1


class NodeState(StrEnum):
    PENDING = "pending"  # no Ray node yet: being scheduled, booting, or registering
    RUNNING = "running"  # its Ray node is alive
    TERMINATING = "terminating"  # already going (deleted, listed in workersToDelete, failed)
    # Its Ray node accepted a drain: takes no work and goes (DRAINED), unless it still works (see
    # `drained_while_working`): then it stays until its work ends.
    DRAINING = "draining"
    DEAD = "dead"  # the pod runs but its Ray node died: it goes (NODE_DEAD), no backoff


class UpscalingMode(StrEnum):
    DEFAULT = "Default"
    AGGRESSIVE = "Aggressive"
    CONSERVATIVE = "Conservative"


class Strategy(StrEnum):
    PACK = "PACK"
    SPREAD = "SPREAD"
    STRICT_PACK = "STRICT_PACK"
    STRICT_SPREAD = "STRICT_SPREAD"


class LabelOp(StrEnum):
    IN = "in"
    NOT_IN = "notin"


class UnmetReason(StrEnum):
    """Why demand is left unplaced (UPSCALING_LIMIT: the Conservative upscaling mode held it back)."""

    NO_MATCHING_GROUP = "NO_MATCHING_GROUP"
    MAX_REPLICAS = "MAX_REPLICAS"
    MAX_WORKERS = "MAX_WORKERS"
    BACKOFF = "BACKOFF"
    QUOTA = "QUOTA"  # the groups that could hold it are refused by a quota or held by a scale gate
    UPSCALING_LIMIT = "UPSCALING_LIMIT"
    VIRTUAL_CLUSTER_MAX = "VIRTUAL_CLUSTER_MAX"  # the virtual cluster it asks for is at maxNodes
    NO_VIRTUAL_CLUSTER = "NO_VIRTUAL_CLUSTER"  # it asks for a virtual cluster that does not exist


class RemovalCause(StrEnum):
    IDLE = "IDLE"
    MAX_REPLICAS = "MAX_REPLICAS"
    MAX_WORKERS = "MAX_WORKERS"
    LAUNCH_FAILED = "LAUNCH_FAILED"
    DRAINED = "DRAINED"  # its Ray node accepted a drain (rayscale's or anyone's); the pod must go
    NODE_DEAD = "NODE_DEAD"  # its Ray node died while the pod runs; replaced without backoff


class DemandKind(StrEnum):
    """What a placement or an unmet entry is of: pending tasks and actors (`Demand`), placement
    groups (`Gang`) or requested bundles (`Constraint`)."""

    DEMAND = "demand"
    GANG = "gang"
    CONSTRAINT = "constraint"


class Target(StrEnum):
    """Where placed demand lands."""

    RUNNING = "running"
    PENDING = "pending"
    NEW = "new"
    HEAD = "head"  # the head node's free resources (or, for constraints, its capacity)


@dataclass(frozen=True, slots=True)
class LabelConstraint:
    key: str
    op: LabelOp
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.op is LabelOp.IN:
            return value is not None and value in self.values
        return value is None or value not in self.values


Selector = tuple[LabelConstraint, ...]  # all constraints must hold


@dataclass(frozen=True, slots=True)
class Group:
    """A worker group. ``resources`` and ``labels`` describe ONE host."""

    name: str
    resources: Mapping[str, float]
    labels: Mapping[str, str] = field(default_factory=dict)
    min_replicas: int = 0
    max_replicas: int = UNLIMITED
    num_of_hosts: int = 1
    idle_timeout_seconds: float | None = None
    priority: int = 0
    backoff: bool = False
    # a ResourceQuota refused its pods or a scale gate holds it: it launches nothing (its minimum
    # aside) and demand only it could hold is unmet with QUOTA
    refused: bool = False


@dataclass(frozen=True, slots=True)
class Node:
    """A worker host (pod) that exists now."""

    name: str
    group: str
    state: NodeState = NodeState.RUNNING
    replica: str | None = None
    available: Mapping[str, float] | None = None  # free resources; None: all free
    idle_seconds: float = 0.0
    pending_seconds: float = 0.0
    # A pending host whose pod is scheduled (pulling images, starting, registering with Ray): the
    # longer ``maxNodeBootSeconds`` applies instead of ``maxNodeProvisionSeconds``.
    booting: bool = False
    # A pending host whose pod Kubernetes refuses to create (a ResourceQuota, a scaleGate on its
    # group): it fails to launch now, whatever its pending time.
    refused: bool = False
    # Ray node labels of a running host; None: the group's labels.
    labels: Mapping[str, str] | None = None


def drained_while_working(node: Node) -> bool:
    """A host drained by someone else (``ray drain-node``, a preemption notice) with work still on
    it: Ray reports it DRAINING with no idle time and its free resources (``available`` given). It
    stays until it is idle or dead, takes no new work and, as in Ray, does not count towards its
    group's minimum (it is going); as pods it still counts towards maxReplicas and maxWorkers."""
    return node.state is NodeState.DRAINING and node.available is not None and node.idle_seconds == 0


@dataclass(frozen=True, slots=True)
class Head:
    """The head node: its capacity holds work and request_resources bundles; it never goes."""

    resources: Mapping[str, float]
    available: Mapping[str, float] | None = None  # free resources; None: all free
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Demand:
    """``count`` pending tasks or actors of one shape.

    ``label_selector`` is the preferred selector; ``fallbacks`` are tried in order when no host
    (existing or new) can satisfy an earlier one (Ray's ``fallback_strategy``).
    """

    resources: Mapping[str, float]
    count: int = 1
    label_selector: Selector = ()
    fallbacks: tuple[Selector, ...] = ()

    @property
    def selectors(self) -> tuple[Selector, ...]:
        """Every selector in preference order; () when the demand may go anywhere."""
        if not self.label_selector and not self.fallbacks:
            return ()
        return (self.label_selector, *self.fallbacks)


@dataclass(frozen=True, slots=True)
class Gang:
    """``count`` pending placement groups of the same bundles and strategy."""

    strategy: Strategy
    bundles: tuple[Mapping[str, float], ...]
    count: int = 1
    # One label selector per bundle (same order as ``bundles``); () when no bundle has one.
    bundle_selectors: tuple[Selector, ...] = ()


RAY_REQUEST_UNIT = ""  # the all-or-nothing unit of Ray's own request_resources


@dataclass(frozen=True, slots=True)
class Constraint:
    """``count`` bundles of a request_resources call (or RayResourceRequest).

    Constraints with the same ``unit`` are one all-or-nothing set: Ray's ``request_resources`` is
    the unit ``RAY_REQUEST_UNIT``; each RayResourceRequest is its own unit (``<namespace>/<name>``).
    """

    resources: Mapping[str, float]
    count: int = 1
    label_selector: Selector = ()
    unit: str = RAY_REQUEST_UNIT


@dataclass(frozen=True, slots=True)
class Options:
    idle_timeout_seconds: float | None = 60.0
    upscaling_mode: UpscalingMode = UpscalingMode.DEFAULT
    max_workers: int | None = None
    max_node_provision_seconds: float = 900.0  # a pod not scheduled this long failed to launch
    max_node_boot_seconds: float = 3600.0  # a scheduled pod without a Ray node this long failed


@dataclass(frozen=True, slots=True)
class Snapshot:
    groups: tuple[Group, ...]
    nodes: tuple[Node, ...] = ()
    demands: tuple[Demand, ...] = ()
    gangs: tuple[Gang, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    options: Options = field(default_factory=Options)
    head: Head | None = None


# ----------------------------------------------------------------------------- decision


@dataclass(frozen=True, slots=True)
class GroupDecision:
    """Counts in replicas (a replica is ``numOfHosts`` hosts)."""

    current: int
    replicas: int
    launch: int
    terminate: int


@dataclass(frozen=True, slots=True)
class Removal:
    name: str
    group: str
    reason: RemovalCause
    replica: str | None = None
    idle_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class PlacementTarget:
    group: str
    on: Target
    count: int
    nodes: tuple[str, ...] = ()  # existing hosts used (running or pending targets)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the placed units of one demand shape, gang or constraint bundle went."""

    kind: DemandKind
    resources: Mapping[str, float] | None
    bundles: tuple[Mapping[str, float], ...] | None
    strategy: Strategy | None
    label_selector: tuple[LabelConstraint, ...]
    count: int
    targets: tuple[PlacementTarget, ...]
    unit: str | None = None  # constraints: the all-or-nothing unit (Constraint.unit)
    fallbacks: tuple[Selector, ...] = ()  # demands: Demand.fallbacks
    bundle_selectors: tuple[Selector, ...] = ()  # gangs: Gang.bundle_selectors


@dataclass(frozen=True, slots=True)
class Unmet:
    kind: DemandKind
    resources: Mapping[str, float] | None
    bundles: tuple[Mapping[str, float], ...] | None
    strategy: Strategy | None
    label_selector: tuple[LabelConstraint, ...]
    count: int
    reason: UnmetReason
    unit: str | None = None  # constraints: the all-or-nothing unit (Constraint.unit)
    fallbacks: tuple[Selector, ...] = ()  # demands: Demand.fallbacks
    bundle_selectors: tuple[Selector, ...] = ()  # gangs: Gang.bundle_selectors


@dataclass(frozen=True, slots=True)
class Decision:
    groups: Mapping[str, GroupDecision]
    terminate: tuple[Removal, ...]
    unmet: tuple[Unmet, ...]
    placements: tuple[Placement, ...]

    def to_dict(self) -> dict[str, Any]:
        """The decision as JSON-ready data (the `rayscale simulate` output, minus timing)."""
        return {
            "groups": {
                name: {
                    "current": g.current,
                    "replicas": g.replicas,
                    "launch": g.launch,
                    "terminate": g.terminate,
                }
                for name, g in self.groups.items()
            },
            "terminate": [_removal_dict(r) for r in self.terminate],
            "unmet": [_unmet_dict(u) for u in self.unmet],
            "placements": [_placement_dict(p) for p in self.placements],
        }


def _amounts(resources: Mapping[str, float]) -> dict[str, float | int]:
    """Whole amounts print as integers (``{"CPU": 8}``, not ``8.0``)."""
    return {k: int(v) if float(v).is_integer() else v for k, v in resources.items()}


def _removal_dict(r: Removal) -> dict[str, Any]:
    out: dict[str, Any] = {"name": r.name, "group": r.group, "reason": str(r.reason)}
    if r.replica is not None:
        out["replica"] = r.replica
    if r.idle_seconds is not None:
        out["idleSeconds"] = r.idle_seconds
    return out


def _selector_list(selector: Selector) -> list[dict[str, Any]]:
    return [{"key": c.key, "op": str(c.op), "values": list(c.values)} for c in selector]


def _what(u: Unmet | Placement) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": str(u.kind)}
    if u.unit is not None:
        out["unit"] = u.unit
    if u.strategy is not None:
        out["strategy"] = str(u.strategy)
    if u.bundles is not None:
        out["bundles"] = [_amounts(b) for b in u.bundles]
    if any(u.bundle_selectors):
        out["bundleSelectors"] = [_selector_list(s) if s else None for s in u.bundle_selectors]
    if u.resources is not None:
        out["resources"] = _amounts(u.resources)
    if u.label_selector:
        out["labelSelector"] = _selector_list(u.label_selector)
    if u.fallbacks:
        out["fallbacks"] = [_selector_list(s) for s in u.fallbacks]
    return out


def _unmet_dict(u: Unmet) -> dict[str, Any]:
    out = _what(u)
    out["count"] = u.count
    out["reason"] = str(u.reason)
    return out


def _placement_dict(p: Placement) -> dict[str, Any]:
    out = _what(p)
    out["count"] = p.count
    targets = []
    for t in p.targets:
        entry: dict[str, Any] = {"group": t.group, "on": str(t.on), "count": t.count}
        if t.on is Target.HEAD:
            del entry["group"]
        if t.nodes:
            entry["nodes"] = list(t.nodes)
        targets.append(entry)
    out["targets"] = targets
    return out
