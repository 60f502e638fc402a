"""One decision as one RFC 6902 JSON patch of the RayCluster (what KubeRay's autoscaler writes).

    [{"op": "test", "path": "/metadata/generation", "value": g},
     {"op": "replace", "path": "/spec/workerGroupSpecs/<i>/replicas", "value": n},
     {"op": "add", "path": "/spec/workerGroupSpecs/<i>/scaleStrategy/workersToDelete",
      "value": [...]}]

The ``test`` makes the API server refuse the patch if the spec changed since it was read (the
group index ``<i>`` was looked up by ``groupName`` in that version), so a racing edit is never
overwritten: the caller re-plans on fresh state. It tests ``metadata.generation``, which only a
change of the spec moves: the status writes of the controller and of the autoscaler itself, many
a second across a fleet, do not refuse a patch planned on the same spec. (A manifest without a
generation is tested on its ``resourceVersion``.) A field the object lacks is ``add``-ed (RFC 6902
``replace`` needs the target to exist).

Like Ray's KubeRay provider: while pods named in a group's ``workersToDelete`` still exist, the
group gets no new removals (its replicas may still grow); once they are all gone the list is
replaced by the new removals, or cleared. Unborn replicas (see snapshot.py) that the decision
drops lower ``replicas`` but are never named.

`build_patch` answers a `ClusterPatch`: the operations to send and, per group it changes, what
they write (the new ``replicas``, the ``workersToDelete``), so that the caller reports what landed
without reading the operations back.

`writable` is the decision with only the removals the patch will write: the loop drains those and
no others, so a node never accepts a drain for a removal that is then not written.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from rayscale.api.raycluster import WorkerGroupSpec
from rayscale.autoscaler.drain import without
from rayscale.autoscaler.scheduling.model import Decision, GroupDecision
from rayscale.autoscaler.snapshot import is_unborn
from rayscale.autoscaler.spec_reader import ScalingSpec

__all__ = ["ClusterPatch", "GroupPatch", "JsonPatch", "build_patch", "writable"]

JsonPatch = list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class GroupPatch:
    """What a patch writes into one worker group."""

    name: str  # its groupName
    spec: WorkerGroupSpec  # the group's spec as read, before the patch
    replicas: int | None = None  # the replicas written; None: left as they are
    workers_to_delete: tuple[str, ...] | None = None  # the workersToDelete written; None: left as it is


@dataclass(frozen=True, slots=True)
class ClusterPatch:
    """One decision as a patch of the RayCluster."""

    ops: JsonPatch  # the RFC 6902 JSON patch to send, its generation test first
    groups: tuple[GroupPatch, ...]  # the groups it changes, in the spec's order

    @property
    def removed(self) -> frozenset[str]:
        """The pods it names in ``workersToDelete``."""
        return frozenset(pod for g in self.groups for pod in g.workers_to_delete or ())


def build_patch(cluster: ScalingSpec, decision: Decision, pod_names: Collection[str]) -> ClusterPatch | None:
    """The patch that applies `decision` to `cluster` (as `read_spec` read it), or None when it
    would change nothing.

    `pod_names` are the cluster's pods that exist now (terminating ones included).
    Raises ValueError when `cluster` has neither ``metadata.generation`` nor ``resourceVersion``.
    """
    ops: JsonPatch = []
    groups: list[GroupPatch] = []
    for index, spec in enumerate(cluster.spec.workers):
        name = spec.group_name
        group = decision.groups.get(name)
        removals = [r.name for r in decision.terminate if r.group == name and not is_unborn(r.name)]
        change = _group_patch(spec, group, removals, pod_names)
        if change is not None:
            groups.append(change)
            ops += _group_ops(f"/spec/workerGroupSpecs/{index}", change)
    if not ops:
        return None
    return ClusterPatch([_test(cluster), *ops], tuple(groups))


def _test(cluster: ScalingSpec) -> dict[str, Any]:
    """The op that refuses the patch when the spec read is no longer the cluster's."""
    if cluster.generation is not None:
        return {"op": "test", "path": "/metadata/generation", "value": cluster.generation}
    if not cluster.resource_version:
        raise ValueError("the RayCluster has no metadata.generation or resourceVersion to test")
    return {"op": "test", "path": "/metadata/resourceVersion", "value": cluster.resource_version}


def _blocked(spec: WorkerGroupSpec, pod_names: Collection[str]) -> bool:
    """Pods named in the group's last ``workersToDelete`` still exist: it takes no new removals."""
    return any(n in pod_names for n in spec.to_delete)


def writable(cluster: ScalingSpec, decision: Decision, pod_names: Collection[str]) -> Decision:
    """`decision` without the removals `build_patch` would not write (their replicas counted back):
    those of groups still waiting for their previous ``workersToDelete``, and of groups the spec
    does not have."""
    specs = {s.group_name: s for s in cluster.spec.workers}
    dropped = {
        r.name for r in decision.terminate if r.group not in specs or _blocked(specs[r.group], pod_names)
    }
    return without(decision, dropped)


def _set(path: str, spec: WorkerGroupSpec, field: str, value: Any) -> dict[str, Any]:
    """Set the group's `field` (its snake_case name): ``replace`` when the manifest has the key
    (null or not), else ``add``."""
    key = WorkerGroupSpec.model_fields[field].alias or field
    return {
        "op": "replace" if field in spec.model_fields_set else "add",
        "path": f"{path}/{key}",
        "value": value,
    }


def _group_patch(
    spec: WorkerGroupSpec, group: GroupDecision | None, removals: list[str], pod_names: Collection[str]
) -> GroupPatch | None:
    """What the decision writes into the group `spec`, None when nothing."""
    listed = spec.to_delete
    blocked = _blocked(spec, pod_names)
    replicas = None
    if group is not None:
        # Blocked: undo this decision's removals in the count (its launches still go ahead).
        target = group.replicas + group.terminate if blocked else group.replicas
        if spec.replicas != target:
            replicas = target
    names = tuple(removals) if not blocked and (removals or listed) else None
    if replicas is None and names is None:
        return None
    return GroupPatch(spec.group_name, spec, replicas, names)


def _group_ops(path: str, change: GroupPatch) -> JsonPatch:
    spec = change.spec
    ops: JsonPatch = []
    if change.replicas is not None:
        ops.append(_set(path, spec, "replicas", change.replicas))
    if change.workers_to_delete is not None:
        listed = list(change.workers_to_delete)
        if spec.scale_strategy is not None:
            # Only the list, so that what others keep beside it (their scaleGate entries) is never
            # rewritten, even from a stale read. ``add`` replaces a member that exists (RFC 6902).
            ops.append({"op": "add", "path": f"{path}/scaleStrategy/workersToDelete", "value": listed})
        else:
            ops.append(_set(path, spec, "scale_strategy", {"workersToDelete": listed}))
    return ops
