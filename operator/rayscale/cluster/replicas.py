"""How many replicas and pods a worker group asks for, as the controller keeps them.

A replica is ``numOfHosts`` pods (a multi-host slice, created, counted and removed as one); a
group keeps ``clamp(replicas, minReplicas, maxReplicas)`` of them, none when suspended. The
controller creates and deletes pods to reach this count; the autoscaler reads it as what a
group holds before it decides, and the pod limit (`rayscale.cluster.limits`) counts with it.
"""

from __future__ import annotations

from rayscale.api.raycluster import WorkerGroupSpec

__all__ = ["expected_replicas", "group_pods", "num_hosts"]


def expected_replicas(group: WorkerGroupSpec) -> int:
    """clamp(replicas, min, max); nil replicas -> min; suspended group -> 0 (in replicas, not hosts)."""
    if group.suspend:
        return 0
    replicas = group.min_replicas if group.replicas is None else group.replicas
    return max(group.min_replicas, min(replicas, group.max_replicas))


def num_hosts(group: WorkerGroupSpec) -> int:
    return group.num_of_hosts if group.num_of_hosts > 0 else 1


def group_pods(group: WorkerGroupSpec) -> int:
    """The worker pods the controller would keep for `group` (0 when suspended)."""
    return expected_replicas(group) * num_hosts(group)
