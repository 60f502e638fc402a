"""Ray's pending demand, its head node and the RayResourceRequests, as scheduler inputs.

Translated from the GCS state (``rayscale.ray.model``) and the custom resources. Pure.

- Tasks and actors keep every label selector Ray sends: the first is preferred, the rest are
  fallbacks tried in order. Identical demands (same resources and selectors) are counted together.
- Placement groups keep one label selector per bundle; identical ones (same strategy, bundles and
  selectors) are counted together.
- Ray's ``request_resources`` is one all-or-nothing unit (``RAY_REQUEST_UNIT``) and keeps each
  bundle's label selector; each RayResourceRequest is an all-or-nothing unit of its own, named
  ``<namespace>/<name>``, of at most ``MAX_REQUEST_BUNDLES`` bundles whose amounts are bounded
  quantities (a request beyond that is refused, with the field, never planned).
- A label constraint whose operator Ray does not know (neither IN nor NOT_IN) is one that Ray's
  scheduler never finds satisfied, so it becomes an ``in`` with no values: no host matches it.
- The head is the live Ray node that holds ``node:__internal_head__``, with all the resources the
  GCS reports for it, as Ray's own scheduler counts them.
"""

from __future__ import annotations

from collections.abc import Sequence

from rayscale.autoscaler.request_reader import MAX_REQUEST_BUNDLES, read_request
from rayscale.autoscaler.scheduling.model import (
    RAY_REQUEST_UNIT,
    Constraint,
    Demand,
    Gang,
    Head,
    LabelConstraint,
    LabelOp,
    Selector,
    Strategy,
)
from rayscale.cluster.meta import ClusterMeta
from rayscale.common.types import Obj
from rayscale.ray import model as ray

__all__ = [
    "HEAD_RESOURCE",
    "MAX_REQUEST_BUNDLES",
    "gcs_constraints",
    "gcs_demands",
    "gcs_gangs",
    "head_node",
    "request_constraints",
]


HEAD_RESOURCE = "node:__internal_head__"  # Ray gives it to the head node only

Shape = tuple[tuple[str, float], ...]  # a resource map as a hashable key
_GangKey = tuple[Strategy, tuple[Shape, ...], tuple[Selector, ...]]

_OPS = {ray.LabelOperator.IN: LabelOp.IN, ray.LabelOperator.NOT_IN: LabelOp.NOT_IN}


# ----------------------------------------------------------------------------- label selectors


def _constraint(c: ray.GcsLabelConstraint) -> LabelConstraint:
    op = _OPS.get(c.operator)
    if op is None:  # Ray's scheduler fails such a constraint on every node
        return LabelConstraint(c.key, LabelOp.IN, ())
    return LabelConstraint(c.key, op, tuple(c.values))


def _selector(selector: ray.LabelSelector) -> Selector:
    return tuple(_constraint(c) for c in selector.constraints)


def _selectors(request: ray.ResourceRequest) -> tuple[Selector, ...]:
    """The request's selectors in preference order, up to the first that every host satisfies.

    An empty selector matches any host, so those after it are never needed; () when the first
    one is empty (the request may go anywhere) or there is none.
    """
    out: list[Selector] = []
    for selector in request.label_selectors:
        converted = _selector(selector)
        if not converted and not out:
            return ()
        out.append(converted)
        if not converted:
            break
    return tuple(out)


def _first_selector(request: ray.ResourceRequest) -> Selector:
    return _selector(request.label_selectors[0]) if request.label_selectors else ()


# ----------------------------------------------------------------------------- Ray's demand


def gcs_demands(state: ray.ClusterState | None) -> tuple[Demand, ...]:
    """Pending tasks and actors; identical ones are counted together, in the order first seen."""
    if state is None:
        return ()
    counts: dict[tuple[Shape, tuple[Selector, ...]], int] = {}
    for d in state.pending_requests:
        if d.count <= 0:
            continue
        key = (tuple(sorted(d.request.resources.items())), _selectors(d.request))
        counts[key] = counts.get(key, 0) + d.count
    return tuple(
        Demand(dict(shape), count, selectors[0] if selectors else (), selectors[1:])
        for (shape, selectors), count in counts.items()
    )


def _strategy(gang: ray.GangRequest) -> Strategy:
    try:
        return Strategy(gang.strategy)
    except ValueError:
        pass
    kinds = {c.kind for b in gang.bundles for c in b.placement_constraints}
    if "affinity" in kinds:
        return Strategy.STRICT_PACK
    if "anti_affinity" in kinds:
        return Strategy.STRICT_SPREAD
    return Strategy.PACK


def gcs_gangs(state: ray.ClusterState | None) -> tuple[Gang, ...]:
    """Pending placement groups, each bundle with its label selector (the first it has).

    Ray places a gang by the bundles of its first bundle selector (``GangRequest.bundles``).
    Identical gangs (same strategy, bundles and selectors) are counted together.
    """
    if state is None:
        return ()
    counts: dict[_GangKey, int] = {}
    for gang in state.pending_gangs:
        if not gang.bundles:
            continue
        shapes = tuple(tuple(sorted(b.resources.items())) for b in gang.bundles)
        selectors = tuple(_first_selector(b) for b in gang.bundles)
        if not any(selectors):
            selectors = ()
        key = (_strategy(gang), shapes, selectors)
        counts[key] = counts.get(key, 0) + 1
    return tuple(
        Gang(strategy, tuple(dict(b) for b in shapes), count, selectors)
        for (strategy, shapes, selectors), count in counts.items()
    )


def gcs_constraints(state: ray.ClusterState | None) -> tuple[Constraint, ...]:
    """Ray's ``request_resources`` bundles, with their label selectors: one all-or-nothing unit."""
    if state is None:
        return ()
    return tuple(
        Constraint(dict(d.request.resources), d.count, _first_selector(d.request), RAY_REQUEST_UNIT)
        for constraint in state.constraints
        for d in constraint
        if d.count > 0
    )


def head_node(state: ray.ClusterState | None) -> Head | None:
    """The live head node (the one with ``node:__internal_head__``), or None.

    Its total and free resources are all that the GCS reports (``node:<ip>``, ``memory``,
    ``object_store_memory`` too: Ray's scheduler counts them all); its labels are the node's
    labels and dynamic labels, as Ray's scheduler reads them. A head that accepted a drain has
    nothing free.
    """
    if state is None:
        return None
    head = next((n for n in state.nodes if n.alive and HEAD_RESOURCE in n.total_resources), None)
    if head is None:
        return None
    draining = head.status is ray.NodeStatus.DRAINING
    return Head(
        resources=dict(head.total_resources),
        available={} if draining else dict(head.available_resources),
        labels={**head.labels, **head.dynamic_labels},
    )


# ----------------------------------------------------------------------------- RayResourceRequests


def request_constraints(cluster: ClusterMeta, requests: Sequence[Obj]) -> tuple[Constraint, ...]:
    """The bundles of the RayResourceRequests bound to the cluster of metadata `cluster` (same
    namespace and clusterName), read by `rayscale.autoscaler.request_reader`.

    Each request is its own all-or-nothing unit. Requests being deleted are left out, and so is a
    request with an unreadable bundle (the CRD schema rejects most; its status says why).
    """
    out: list[Constraint] = []
    for request in sorted(map(read_request, requests), key=lambda r: r.name):
        if request.deleting or request.namespace != cluster.namespace:
            continue
        if not cluster.name or request.cluster_name != cluster.name:
            continue
        out += request.bundles
    return tuple(out)
