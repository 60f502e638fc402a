"""Groups and demand shapes of one snapshot, indexed once.

A *shape* is one distinct resource vector with its label selector; every demand unit, gang
bundle and constraint bundle is a count of some shape. For each shape the catalog knows the
groups whose hosts could ever hold it (resources and labels) and which of them it prefers:
groups without accelerators the shape does not ask for (GPU avoidance).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rayscale.autoscaler.scheduling.model import Group, LabelConstraint
from rayscale.autoscaler.scheduling.space import Space, Vec, fits, nonzero

HEAD_SUFFIX = "-head"


@dataclass(frozen=True, slots=True)
class GroupInfo:
    index: int
    spec: Group
    hosts: tuple[Vec, ...]  # capacity of host 0..numOfHosts-1
    accelerators: frozenset[int]  # accelerator resource indexes this group's hosts carry
    size: float  # scaled size of a whole replica (ties go to the smaller one)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def num_hosts(self) -> int:
        return len(self.hosts)


@dataclass(frozen=True, slots=True)
class Shape:
    index: int
    vec: Vec
    idx: tuple[int, ...]  # non-zero resources
    selector: tuple[LabelConstraint, ...]
    weight: float  # dominant scaled share: the work one unit represents
    eligible: tuple[int, ...]  # groups whose hosts could hold it
    preferred: tuple[int, ...]  # eligible groups without accelerators it does not use

    def avoids(self, group: int) -> bool:
        return group not in self.preferred


def host_capacities(space: Space, group: Group) -> tuple[Vec, ...]:
    """Per-host capacities. In a multi-host group only host 0 carries ``TPU-<type>-head``."""
    first = space.capacity(group.resources)
    if group.num_of_hosts <= 1:
        return (first,)
    rest = space.capacity(
        {k: v for k, v in group.resources.items() if not (k.startswith("TPU-") and k.endswith(HEAD_SUFFIX))}
    )
    return (first,) + (rest,) * (group.num_of_hosts - 1)


class Catalog:
    """The space, group infos and interned shapes of one scheduling pass."""

    def __init__(self, space: Space, groups: tuple[Group, ...]) -> None:
        self.space = space
        infos = []
        for i, g in enumerate(groups):
            hosts = host_capacities(space, g)
            acc = frozenset(a for a in space.accelerators if hosts[0][a] > 0)
            infos.append(GroupInfo(i, g, hosts, acc, sum(space.size(h) for h in hosts)))
        self.groups: tuple[GroupInfo, ...] = tuple(infos)
        self.by_name = {g.name: g for g in self.groups}
        self.shapes: list[Shape] = []
        self._interned: dict[tuple[Vec, tuple[LabelConstraint, ...]], Shape] = {}

    def shape(self, amounts: Mapping[str, float], selector: tuple[LabelConstraint, ...] = ()) -> Shape:
        vec = self.space.vec(amounts)
        key = (vec, selector)
        found = self._interned.get(key)
        if found is not None:
            return found
        eligible = tuple(g.index for g in self.groups if _can_hold(g, vec, selector))
        used = {i for i in self.space.accelerators if vec[i] > 0}
        preferred = tuple(i for i in eligible if self.groups[i].accelerators <= used)
        shape = Shape(
            len(self.shapes), vec, nonzero(vec), selector, self.space.dominant(vec), eligible, preferred
        )
        self.shapes.append(shape)
        self._interned[key] = shape
        return shape


def labels_match(selector: tuple[LabelConstraint, ...], labels: Mapping[str, str]) -> bool:
    return all(c.matches(labels) for c in selector)


def _can_hold(group: GroupInfo, vec: Vec, selector: tuple[LabelConstraint, ...]) -> bool:
    if not labels_match(selector, group.spec.labels):
        return False
    return any(fits(host, vec) for host in group.hosts)
