"""RayVirtualCluster objects and pod labels read into the planner's terms. Pure.

A VC's target hosts per group (``desired``) live in its status; a spec revision the operator has
not applied yet (``metadata.generation`` newer than ``status.revision``) resets them to the
spec's ``nodes``. Membership is the pods' labels, overlaid with label writes this process made
that its pod cache does not show yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from rayscale.api.raycluster import RayClusterSpec
from rayscale.api.rayvirtualcluster import RayVirtualClusterSpec, RayVirtualClusterStatus, VcMetadata
from rayscale.api.virtualcluster_names import JOB_LABEL, VC_LABEL, spec_errors
from rayscale.autoscaler.virtual.model import Member, VcGroup, VirtualCluster
from rayscale.common.pods import is_worker, pod_labels, pod_name
from rayscale.common.types import Obj

__all__ = ["Reading", "members_of", "read", "vc_meta", "vc_status"]


@dataclass(frozen=True, slots=True)
class Reading:
    vcs: tuple[VirtualCluster, ...] = ()
    members: Mapping[str, Member] = field(default_factory=dict)
    errors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # invalid VCs by name
    objects: Mapping[str, Obj] = field(default_factory=dict)  # every VC object by name


def members_of(pods: Sequence[Obj], overlay: Mapping[str, Member | None] = {}) -> dict[str, Member]:
    """Each worker pod's VC membership from its labels, `overlay` (pod -> membership) winning."""
    out: dict[str, Member] = {}
    for pod in pods:
        if not is_worker(pod):
            continue
        name = pod_name(pod)
        labels = pod_labels(pod)
        vc = labels.get(VC_LABEL)
        if vc:
            out[name] = Member(vc, labels.get(JOB_LABEL) or None)
    for name, member in overlay.items():
        if member is None:
            out.pop(name, None)
        else:
            out[name] = member
    return out


def vc_meta(obj: Obj) -> VcMetadata:
    """The metadata of the RayVirtualCluster `obj`, typed."""
    return VcMetadata.model_validate(obj.get("metadata") or {})


def vc_status(obj: Obj) -> RayVirtualClusterStatus | None:
    """The status of the RayVirtualCluster `obj`, typed; None when it has none, or one that cannot
    be read (written by hand: the next status replaces it)."""
    raw = obj.get("status")
    if not raw:
        return None
    try:
        return RayVirtualClusterStatus.model_validate(raw)
    except ValidationError:
        return None


def _desired(
    meta: VcMetadata, status: RayVirtualClusterStatus | None, spec: RayVirtualClusterSpec
) -> dict[str, int]:
    applied = status is not None and status.revision == meta.generation
    known = (
        {g.group_name: g.desired for g in (status.groups if status is not None else None) or []}
        if applied
        else {}
    )
    out = {}
    for g in spec.groups:
        value = known.get(g.group_name)
        value = g.nodes if not isinstance(value, int) else value
        out[g.group_name] = max(g.lowest, min(value, g.highest))
    return out


def read(
    cluster: RayClusterSpec,
    objects: Sequence[Obj],
    pods: Sequence[Obj],
    overlay: Mapping[str, Member | None] = {},
) -> Reading:
    """The VCs of the cluster of spec `cluster` (valid ones only in ``vcs``), and who holds which pod."""
    vcs: list[VirtualCluster] = []
    errors: dict[str, tuple[str, ...]] = {}
    by_name: dict[str, Obj] = {}
    for meta, obj in sorted(((vc_meta(o), o) for o in objects), key=lambda pair: pair[0].name):
        name = meta.name
        by_name[name] = obj
        try:
            spec = RayVirtualClusterSpec.model_validate(obj.get("spec") or {})
        except ValidationError as exc:
            errors[name] = (f"spec: {exc.errors()[0].get('msg', exc)}",)
            continue
        found = spec_errors(spec, cluster)
        if found:
            errors[name] = tuple(found)
            continue
        desired = _desired(meta, vc_status(obj), spec)
        groups = tuple(
            VcGroup(g.group_name, g.nodes, g.lowest, g.highest, desired[g.group_name]) for g in spec.groups
        )
        vcs.append(VirtualCluster(name, groups, spec.divisible, removing=bool(meta.deletion_timestamp)))
    return Reading(tuple(vcs), members_of(pods, overlay), errors, by_name)
