"""How many worker pods one RayCluster may ask for, pure.

A RayCluster whose groups ask for more worker pods than the limit (``rayscale run
--max-pods-per-cluster``, default 10,000; the head is not counted) is refused before any per-pod
work: the controller reports it as invalid and the autoscaler never plans or patches it. The
count is ``clamp(replicas, minReplicas, maxReplicas) x numOfHosts`` per group (what the controller
would create), summed over the groups that are not suspended; it is plain integer arithmetic,
whatever the numbers.

The autoscaler keeps under the same limit (``max_workers``): it never writes replicas that would
take the cluster past it.
"""

from __future__ import annotations

from collections.abc import Sequence

from rayscale.api.raycluster import WorkerGroupSpec
from rayscale.cluster.replicas import expected_replicas, group_pods, num_hosts

DEFAULT_MAX_PODS = 10_000
FLAG = "--max-pods-per-cluster"

__all__ = ["DEFAULT_MAX_PODS", "FLAG", "pods_problem"]


def _replicas_field(group: WorkerGroupSpec) -> str:
    """The field that sets the group's count: minReplicas when it raises replicas, else replicas."""
    if group.replicas is None or group.replicas < group.min_replicas:
        return "minReplicas"
    return "replicas"


def pods_problem(workers: Sequence[WorkerGroupSpec], max_pods: int) -> str | None:
    """Why the groups ask for too many worker pods, naming the field; None when within `max_pods`."""
    limit = f"the limit of {max_pods} worker pods per RayCluster ({FLAG})"
    total = 0
    for i, group in enumerate(workers):
        path = f"spec.workerGroupSpecs[{i}]"
        if group.num_of_hosts > max_pods:
            return f"{path}.numOfHosts: {group.num_of_hosts} hosts per replica is over {limit}"
        pods = group_pods(group)
        if pods > max_pods:
            field = _replicas_field(group)
            return (
                f"{path}.{field}: {expected_replicas(group)} replicas x {num_hosts(group)} hosts ="
                f" {pods} pods is over {limit}"
            )
        total += pods
    if total > max_pods:
        return f"spec.workerGroupSpecs: {total} worker pods in all is over {limit}"
    return None
