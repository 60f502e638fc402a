"""The worker pods of groups a RayCluster's spec no longer has (pure).

A worker group removed from ``spec.workerGroupSpecs`` leaves its pods behind: their
``ray.io/group`` label names no group of the spec. KubeRay's operator never touches them again;
rayscale does not leave them orphaned. The controller deletes them at once for a cluster
rayscale's autoscaler does not take; the autoscaler drains their Ray nodes first for one it takes
(rayscale.autoscaler.spec_removals). Both read them here.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rayscale.common.pods import is_terminating, is_worker, pod_group, pod_name
from rayscale.common.types import Obj

__all__ = ["removed_group_pods"]


def removed_group_pods(pods: Sequence[Obj], groups: Collection[str]) -> dict[str, list[str]]:
    """Removed group -> the names of its worker pods not terminating yet, by name; `groups`: the
    spec's worker group names. The head is never one; a terminating pod is going already."""
    out: dict[str, list[str]] = {}
    for pod in pods:
        if is_worker(pod) and not is_terminating(pod) and pod_group(pod) not in groups:
            out.setdefault(pod_group(pod), []).append(pod_name(pod))
    return {group: sorted(names) for group, names in sorted(out.items())}
