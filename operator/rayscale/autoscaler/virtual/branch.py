"""Whether a round takes the virtual-cluster branch. Pure.

The round plans through the virtual-cluster planner (plan.py) only when the RayCluster has virtual
clusters: RayVirtualClusters name it, or pods still carry a VC's label (their VC is gone: they go
back once idle), or work asks for a VC's resource (it is unmet: no such VC), or a Ray node still
carries one (it is taken away). Otherwise the scheduler's own decision is the round's, unchanged.
"""

from __future__ import annotations

from rayscale.api.virtualcluster_names import RESOURCE_PREFIX
from rayscale.autoscaler.scheduling.model import Snapshot
from rayscale.autoscaler.virtual.read import Reading
from rayscale.autoscaler.virtual.route import asked, part_of
from rayscale.ray.model import ClusterState

__all__ = ["involved"]


def involved(reading: Reading, snapshot: Snapshot, state: ClusterState | None) -> bool:
    """Does the round of the cluster `reading`, `snapshot` and `state` describe need the VC planner?"""
    if reading.objects or reading.members:
        return True
    if any(part_of(resources) is not None for resources in asked(snapshot)):
        return True
    nodes = () if state is None else state.nodes
    held = (key for n in nodes for key in (*n.total_resources, *n.available_resources))
    return any(key.startswith(RESOURCE_PREFIX) for key in held)
