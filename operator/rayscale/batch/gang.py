"""A gang's size: how many pods must start together (``minMember``) and what they ask for in all
(``minResources``), computed as KubeRay v1.6.2 computes them (``utils.CalculateDesiredReplicas``,
``CalculateMinReplicas``, ``CalculateDesiredResources``, ``CalculateMinResources``).

`gang` takes the replicas per worker group as arguments, so a gang can later follow what the
autoscaler launches; `desired_counts` and `min_counts` are KubeRay's choice of them, quirks kept:
``minMember`` clamps ``replicas`` to [minReplicas, maxReplicas] and skips suspended groups, while
the desired resources count ``replicas`` as written, and the minimum resources count every group's
``minReplicas``, suspended or not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from rayscale.api.raycluster import RayClusterSpec, WorkerGroupSpec
from rayscale.cluster.replicas import expected_replicas, num_hosts
from rayscale.quantities import container_resources, format_quantity

__all__ = ["Counts", "Gang", "desired_counts", "gang", "kuberay_counts", "min_counts", "pod_resources"]


@dataclasses.dataclass(frozen=True)
class Counts:
    """Worker replicas per group: those counted in ``minMember`` and those whose resources count."""

    members: Mapping[str, int]
    resources: Mapping[str, int]


@dataclasses.dataclass(frozen=True)
class Gang:
    min_member: int  # pods, the head included
    min_resources: dict[str, str]  # canonical quantities


def desired_counts(spec: RayClusterSpec) -> Counts:
    """A cluster the autoscaler does not scale: its replicas (KubeRay's desired counts)."""
    members = {g.group_name: expected_replicas(g) for g in spec.workers}
    resources = {g.group_name: 0 if g.suspend else (g.replicas or 0) for g in spec.workers}
    return Counts(members, resources)


def min_counts(spec: RayClusterSpec) -> Counts:
    """An autoscaled cluster: its groups' minReplicas."""
    members = {g.group_name: 0 if g.suspend else g.min_replicas for g in spec.workers}
    return Counts(members, {g.group_name: g.min_replicas for g in spec.workers})


def kuberay_counts(spec: RayClusterSpec) -> Counts:
    """KubeRay's choice (Volcano): the minimum of an autoscaled cluster, else the desired."""
    return min_counts(spec) if spec.autoscaling else desired_counts(spec)


class _Sum:
    """Quantities summed as Go's resource.Quantity adds them: the text keeps the format (binary
    or decimal suffix) of the first non-zero amount added."""

    def __init__(self) -> None:
        self.total: dict[str, Decimal] = {}
        self.binary: dict[str, bool] = {}

    def add(self, key: str, value: Decimal, binary: bool) -> None:
        if key not in self.binary or self.total.get(key, Decimal(0)) == 0:
            self.binary[key] = binary
        self.total[key] = self.total.get(key, Decimal(0)) + value

    def canonical(self) -> dict[str, str]:
        return {k: format_quantity(v, binary=self.binary[k]) for k, v in sorted(self.total.items())}


def _pod_sum(template: Mapping[str, Any]) -> _Sum:
    """KubeRay's CalculatePodResource: each container's requests, limits where no request."""
    total = _Sum()
    for container in (template.get("spec") or {}).get("containers") or []:
        res = container.get("resources") or {}
        texts = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for key, value in container_resources(container).items():
            total.add(key, value, str(texts[key]).endswith("i"))
    return total


def pod_resources(template: Mapping[str, Any]) -> dict[str, str]:
    """What one pod of `template` asks for, as canonical quantities (YuniKorn's task groups)."""
    return _pod_sum(template).canonical()


def _group_sums(spec: RayClusterSpec) -> Sequence[tuple[WorkerGroupSpec, _Sum]]:
    return [(g, _pod_sum(g.template)) for g in spec.workers]


def gang(spec: RayClusterSpec, counts: Counts) -> Gang:
    """The head and the replicas in `counts`: each replica is ``numOfHosts`` pods."""
    members = 1 + sum(counts.members.get(g.group_name, 0) * num_hosts(g) for g in spec.workers)
    total = _Sum()
    head = _pod_sum(spec.head_group_spec.template)
    for key, value in head.total.items():
        total.add(key, value, head.binary[key])
    for group, pod in _group_sums(spec):
        replicas = counts.resources.get(group.group_name, 0)
        if replicas <= 0:
            continue
        for key, value in pod.total.items():
            total.add(key, value * num_hosts(group) * replicas, pod.binary[key])
    return Gang(members, total.canonical())
