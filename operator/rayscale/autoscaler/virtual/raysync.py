"""The Ray side of membership: which VC resource each Ray node must carry. Pure.

A member of a VC carries ``VC_AMOUNT`` of the VC's Ray resource (a job cluster's member, of the
job cluster's resource instead); every other node carries none. Work asks for a small amount
(0.001) to run inside, so a node holds up to a million such tasks: the resource marks where work
may go, the node's CPUs, GPUs and memory still bound how much runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rayscale.api.virtualcluster_names import RESOURCE_PREFIX, job_resource, vc_resource
from rayscale.autoscaler.virtual.model import Member
from rayscale.ray import model as ray

__all__ = ["VC_AMOUNT", "resizes", "wanted"]

VC_AMOUNT = 1000.0


def wanted(member: Member | None) -> dict[str, float]:
    if member is None:
        return {}
    key = vc_resource(member.vc) if member.job is None else job_resource(member.vc, member.job)
    return {key: VC_AMOUNT}


def resizes(members: Mapping[str, Member], nodes: Sequence[ray.RayNodeState]) -> dict[str, dict[str, float]]:
    """Per live Ray node (by pod name): the resize that gives it exactly its membership's
    resources (0 for a VC resource it must lose). Nodes already right are left out."""
    out: dict[str, dict[str, float]] = {}
    for node in nodes:
        if not node.instance_id or node.status in (ray.NodeStatus.DEAD, ray.NodeStatus.DRAINING):
            continue
        want = wanted(members.get(node.instance_id))
        have = {k: v for k, v in node.total_resources.items() if k.startswith(RESOURCE_PREFIX) and v > 0}
        if have == want:
            continue
        change = {k: 0.0 for k in have if k not in want}
        change.update({k: v for k, v in want.items() if have.get(k) != v})
        out[node.instance_id] = change
    return out
