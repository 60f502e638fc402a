"""One decision as one RFC 6902 JSON patch of the RayCluster (what KubeRay's autoscaler writes).

    [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
     {"op": "replace", "path": "/spec/workerGroupSpecs/<i>/replicas", "value": n},
     {"op": "replace", "path": "/spec/workerGroupSpecs/<i>/scaleStrategy",
      "value": {"workersToDelete": [...]}}]

The ``test`` makes the API server refuse the patch if the cluster changed since it was read (the
group index ``<i>`` was looked up by ``groupName`` in that version), so a racing edit is never
overwritten: the caller re-plans on fresh state. A field the object lacks is ``add``-ed (RFC 6902
``replace`` needs the target to exist).

Like Ray's KubeRay provider: while pods named in a group's ``workersToDelete`` still exist, the
group gets no new removals (its replicas may still grow); once they are all gone the list is
replaced by the new removals, or cleared. Unborn replicas (see snapshot.py) that the decision
drops lower ``replicas`` but are never named.

`writable` is the decision with only the removals the patch will write: the loop drains those and
no others, so a node never accepts a drain for a removal that is then not written.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from rayscale.autoscaler.drain import without
from rayscale.autoscaler.scheduling.model import Decision, GroupDecision
from rayscale.autoscaler.snapshot import is_unborn

__all__ = ["JsonPatch", "build_patch", "writable"]

Obj = Mapping[str, Any]
JsonPatch = list[dict[str, Any]]


def build_patch(cluster: Obj, decision: Decision, pod_names: Collection[str]) -> JsonPatch | None:
    """The patch that applies `decision` to `cluster`, or None when it would change nothing.

    `pod_names` are the cluster's pods that exist now (terminating ones included).
    Raises ValueError when `cluster` has no ``metadata.resourceVersion``.
    """
    ops: JsonPatch = []
    specs = (cluster.get("spec") or {}).get("workerGroupSpecs") or []
    for index, spec in enumerate(specs):
        name = spec.get("groupName")
        group = decision.groups.get(name) if isinstance(name, str) else None
        removals = [r.name for r in decision.terminate if r.group == name and not is_unborn(r.name)]
        ops += _group_ops(f"/spec/workerGroupSpecs/{index}", spec, group, removals, pod_names)
    if not ops:
        return None
    version = (cluster.get("metadata") or {}).get("resourceVersion")
    if not version:
        raise ValueError("the RayCluster has no metadata.resourceVersion to test")
    return [{"op": "test", "path": "/metadata/resourceVersion", "value": version}, *ops]


def _blocked(spec: Obj, pod_names: Collection[str]) -> bool:
    """Pods named in the group's last ``workersToDelete`` still exist: it takes no new removals."""
    listed = (spec.get("scaleStrategy") or {}).get("workersToDelete") or []
    return any(n in pod_names for n in listed)


def writable(cluster: Obj, decision: Decision, pod_names: Collection[str]) -> Decision:
    """`decision` without the removals `build_patch` would not write (their replicas counted back):
    those of groups still waiting for their previous ``workersToDelete``, and of groups the spec
    does not have."""
    specs = {str(s.get("groupName")): s for s in (cluster.get("spec") or {}).get("workerGroupSpecs") or []}
    dropped = {
        r.name for r in decision.terminate if r.group not in specs or _blocked(specs[r.group], pod_names)
    }
    return without(decision, dropped)


def _set(path: str, spec: Obj, key: str, value: Any) -> dict[str, Any]:
    return {"op": "replace" if key in spec else "add", "path": f"{path}/{key}", "value": value}


def _group_ops(
    path: str, spec: Obj, group: GroupDecision | None, removals: list[str], pod_names: Collection[str]
) -> JsonPatch:
    strategy: Obj = spec.get("scaleStrategy") or {}
    listed = list(strategy.get("workersToDelete") or [])
    blocked = _blocked(spec, pod_names)
    ops: JsonPatch = []
    if group is not None:
        # Blocked: undo this decision's removals in the count (its launches still go ahead).
        target = group.replicas + group.terminate if blocked else group.replicas
        if spec.get("replicas") != target:
            ops.append(_set(path, spec, "replicas", target))
    if not blocked and (removals or listed):
        ops.append(_set(path, spec, "scaleStrategy", {**strategy, "workersToDelete": removals}))
    return ops
