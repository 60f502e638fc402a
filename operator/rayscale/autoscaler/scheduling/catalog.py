"""Groups, host label sets and demand shapes of one snapshot, indexed once.

A *shape* is one distinct resource vector with its label selectors (the preferred one, then
fallbacks); every demand unit, gang bundle and constraint bundle is a count of some shape. For
each shape the catalog knows the groups whose hosts could ever hold it (resources and labels),
and which selector each group matches first (earlier selectors are preferred).

Hosts whose labels differ from their group's (a running node's own Ray labels, the head) get a
*label set* id; only label keys some selector mentions are kept, so hosts that differ in
irrelevant labels (node ids, IPs) share one set and one host state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rayscale.autoscaler.scheduling.model import Group, LabelConstraint, Selector
from rayscale.autoscaler.scheduling.space import Space, Vec, fits, nonzero
from rayscale.cluster.accelerators import is_tpu_slice_head_resource

HEAD_GROUP = -1  # the group index pools use for the head node
GROUP_LABELS = -1  # label set id: the host carries its group's labels

Selectors = tuple[Selector, ...]


@dataclass(frozen=True, slots=True)
class GroupInfo:
    index: int
    spec: Group
    hosts: tuple[Vec, ...]  # capacity of host 0..numOfHosts-1

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
    selectors: Selectors  # () when it may go anywhere
    eligible: tuple[int, ...]  # groups whose hosts could hold it
    ranks: Mapping[int, int]  # eligible group -> index of the first selector its labels match


def host_capacities(space: Space, group: Group) -> tuple[Vec, ...]:
    """Per-host capacities. In a multi-host group only host 0 carries ``TPU-<type>-head``."""
    first = space.capacity(group.resources)
    if group.num_of_hosts <= 1:
        return (first,)
    rest = space.capacity({k: v for k, v in group.resources.items() if not is_tpu_slice_head_resource(k)})
    return (first,) + (rest,) * (group.num_of_hosts - 1)


def labels_match(selector: tuple[LabelConstraint, ...], labels: Mapping[str, str]) -> bool:
    return all(c.matches(labels) for c in selector)


def selector_rank(selectors: Selectors, labels: Mapping[str, str]) -> int | None:
    """Index of the first selector ``labels`` satisfy; 0 without selectors; None if none does."""
    if not selectors:
        return 0
    for i, selector in enumerate(selectors):
        if labels_match(selector, labels):
            return i
    return None


class Catalog:
    """The space, group infos, label sets and interned shapes of one scheduling pass."""

    def __init__(
        self,
        space: Space,
        groups: tuple[Group, ...],
        label_keys: Iterable[str] = (),
    ) -> None:
        self.space = space
        infos = []
        for i, g in enumerate(groups):
            infos.append(GroupInfo(i, g, host_capacities(space, g)))
        self.groups: tuple[GroupInfo, ...] = tuple(infos)
        self.by_name = {g.name: g for g in self.groups}
        self.shapes: list[Shape] = []
        self._interned: dict[tuple[Vec, Selectors], Shape] = {}
        self._keys = frozenset(label_keys)
        self._label_sets: list[Mapping[str, str]] = []
        self._label_ids: dict[tuple[tuple[str, str], ...], int] = {}
        self._ranks: dict[tuple[int, int], int | None] = {}  # (shape, label set) -> rank

    def group_name(self, group: int) -> str:
        return "" if group == HEAD_GROUP else self.groups[group].name

    # -- label sets ------------------------------------------------------------------
    def _relevant(self, labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((k, v) for k, v in labels.items() if k in self._keys))

    def label_set(self, labels: Mapping[str, str] | None, group: int = HEAD_GROUP) -> int:
        """The label set id of a host: GROUP_LABELS when its labels match its group's on every
        key a selector mentions."""
        if labels is None:
            return GROUP_LABELS
        relevant = self._relevant(labels)
        if group != HEAD_GROUP and relevant == self._relevant(self.groups[group].spec.labels):
            return GROUP_LABELS
        found = self._label_ids.get(relevant)
        if found is None:
            found = len(self._label_sets)
            self._label_sets.append(dict(relevant))
            self._label_ids[relevant] = found
        return found

    def rank(self, shape: Shape, group: int, label_set: int) -> int | None:
        """Which selector of ``shape`` a host of ``group`` with ``label_set`` matches first.

        None when it matches none (or, for group labels, when no host of the group can ever
        hold the shape). Resources are not checked for hosts with their own label set.
        """
        if label_set == GROUP_LABELS:
            return shape.ranks.get(group)
        key = (shape.index, label_set)
        if key not in self._ranks:
            self._ranks[key] = selector_rank(shape.selectors, self._label_sets[label_set])
        return self._ranks[key]

    # -- shapes ----------------------------------------------------------------------
    def shape(self, amounts: Mapping[str, float], selectors: Selectors = ()) -> Shape:
        vec = self.space.vec(amounts)
        return self.shape_of(vec, selectors)

    def shape_of(self, vec: Vec, selectors: Selectors = ()) -> Shape:
        key = (vec, selectors)
        found = self._interned.get(key)
        if found is not None:
            return found
        ranks: dict[int, int] = {}
        for g in self.groups:
            rank = selector_rank(selectors, g.spec.labels)
            if rank is not None and any(fits(host, vec) for host in g.hosts):
                ranks[g.index] = rank
        shape = Shape(len(self.shapes), vec, nonzero(vec), selectors, tuple(ranks), ranks)
        self.shapes.append(shape)
        self._interned[key] = shape
        return shape
