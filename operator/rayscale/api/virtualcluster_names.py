"""Names shared by everything that handles RayVirtualClusters, and the checks the CRD cannot make.

Ray resources: a virtual cluster ``team-a`` is the Ray resource ``rayscale.io/vc/team-a``; a job
cluster of a divisible virtual cluster (one Ray job submission) is
``rayscale.io/vc/team-a/<submission id>``. Pods of a virtual cluster carry `VC_LABEL` (its name)
and, inside a job cluster, `JOB_LABEL` (the submission id).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayscale.api.raycluster import RayClusterSpec
from rayscale.api.rayvirtualcluster import RayVirtualClusterSpec

RESOURCE_PREFIX = "rayscale.io/vc/"
VC_LABEL = "rayscale.io/virtual-cluster"
JOB_LABEL = "rayscale.io/job-cluster"
FINALIZER = "rayscale.io/virtual-cluster"


def vc_resource(name: str) -> str:
    """The Ray resource of the virtual cluster ``name``."""
    return f"{RESOURCE_PREFIX}{name}"


def job_resource(vc: str, submission_id: str) -> str:
    """The Ray resource of the job cluster of ``submission_id`` in the virtual cluster ``vc``."""
    return f"{RESOURCE_PREFIX}{vc}/{submission_id}"


def parse_resource(key: str) -> tuple[str, str | None] | None:
    """``(vc, submission id or None)`` of a Ray resource made by `vc_resource` or `job_resource`;
    None for any other resource name."""
    if not key.startswith(RESOURCE_PREFIX):
        return None
    vc, slash, job = key[len(RESOURCE_PREFIX) :].partition("/")
    if not vc or (slash and not job):
        return None
    return vc, job or None


def spec_errors(
    spec: RayVirtualClusterSpec | Mapping[str, Any], raycluster: RayClusterSpec | None
) -> list[str]:
    """What is wrong with a RayVirtualCluster's spec given its RayCluster's typed spec (None when
    there is no RayCluster), that the CRD cannot check. Empty when nothing is; each message starts
    with the field it is about."""
    if not isinstance(spec, RayVirtualClusterSpec):
        spec = RayVirtualClusterSpec.model_validate(dict(spec))
    cluster = spec.ray_cluster_name
    if raycluster is None:
        return [f'spec.rayClusterName: there is no RayCluster "{cluster}" in this namespace']
    errors: list[str] = []
    if raycluster.enable_in_tree_autoscaling is not True:
        errors.append(
            f'spec.rayClusterName: RayCluster "{cluster}" does not set spec.enableInTreeAutoscaling: true;'
            " rayscale manages the nodes of virtual clusters through its autoscaler, so the RayCluster"
            " must enable it"
        )
    workers = {g.group_name: g for g in raycluster.workers}
    seen: set[str] = set()
    for i, group in enumerate(spec.groups):
        field = f"spec.groups[{i}].groupName"
        name = group.group_name
        if name in seen:
            errors.append(f'{field}: group "{name}" appears more than once; list each group once')
            continue
        seen.add(name)
        worker = workers.get(name)
        if worker is None:
            known = ", ".join(sorted(str(n) for n in workers)) or "none"
            errors.append(
                f'{field}: RayCluster "{cluster}" has no worker group "{name}" (its worker groups: {known})'
            )
            continue
        hosts = worker.num_of_hosts
        if hosts != 1:
            errors.append(
                f'{field}: worker group "{name}" of RayCluster "{cluster}" has numOfHosts {hosts};'
                " multi-host groups are not supported in virtual clusters"
            )
    return errors


__all__ = [
    "FINALIZER",
    "JOB_LABEL",
    "RESOURCE_PREFIX",
    "VC_LABEL",
    "job_resource",
    "parse_resource",
    "spec_errors",
    "vc_resource",
]
