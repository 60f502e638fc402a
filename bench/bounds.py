"""Lower bounds on the number of new hosts a scenario needs.

* per-resource bound: for every resource, the demand left after all free capacity of the
  existing hosts, divided by the largest host's amount of it, rounded up; the maximum of those;
* subset bound (tighter): demand that only some groups can host must fit in hosts of those
  groups. For every set S of groups, the demand whose possible groups all lie in S needs at
  least the per-resource bound over S's hosts (after the free capacity of S's existing hosts).
  Hosts of disjoint sets are distinct, so bounds of disjoint sets add up. Beyond those hosts,
  the whole demand of every resource must still fit: what the required hosts of each set can
  hold at most is subtracted, and the rest needs hosts of the largest size. The subset bound
  is the best such total over all partitions of the groups into disjoint sets.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any


def _fits(shape: Mapping[str, float], host: Mapping[str, float]) -> bool:
    return all(v <= host.get(k, 0) for k, v in shape.items())


def _bound(
    demands: Sequence[tuple[Mapping[str, float], int]],
    hosts: Sequence[Mapping[str, float]],
    free: Mapping[str, float],
) -> int:
    need: dict[str, float] = {}
    for shape, count in demands:
        for k, v in shape.items():
            need[k] = need.get(k, 0.0) + v * count
    best = 0
    for k, total in need.items():
        largest = max((h.get(k, 0.0) for h in hosts), default=0.0)
        left = total - free.get(k, 0.0)
        if left > 1e-9 and largest > 0:
            best = max(best, math.ceil(left / largest - 1e-9))
    return best


def _partitions(items: list[int]) -> Iterator[list[list[int]]]:
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        for i in range(len(part)):
            yield [*part[:i], [first, *part[i]], *part[i + 1 :]]
        yield [[first], *part]


def lower_bounds(scenario: Mapping[str, Any]) -> tuple[int, int]:
    """(per-resource bound, subset bound) on new hosts for a benchmark scenario."""
    groups = scenario["groups"]
    caps = [g["resources"] for g in groups]
    demands = [(d["resources"], d.get("count", 1)) for d in scenario.get("demands", [])]
    free_by_group: list[dict[str, float]] = [{} for _ in groups]
    index = {g["name"]: i for i, g in enumerate(groups)}
    for node in scenario.get("nodes", []):
        i = index[node["group"]]
        avail = node.get("available", caps[i])
        for k, v in avail.items():
            free_by_group[i][k] = free_by_group[i].get(k, 0.0) + v

    def free_of(subset: Sequence[int]) -> dict[str, float]:
        out: dict[str, float] = {}
        for i in subset:
            for k, v in free_by_group[i].items():
                out[k] = out.get(k, 0.0) + v
        return out

    everything = list(range(len(groups)))
    per_resource = _bound(demands, caps, free_of(everything))
    possible = [frozenset(i for i, cap in enumerate(caps) if _fits(shape, cap)) for shape, _ in demands]
    cache: dict[frozenset[int], int] = {}
    for size in range(1, len(groups) + 1):
        for subset in itertools.combinations(everything, size):
            members = frozenset(subset)
            inside = [d for d, p in zip(demands, possible, strict=True) if p and p <= members]
            cache[members] = _bound(inside, [caps[i] for i in subset], free_of(subset))
    total_need: dict[str, float] = {}
    for shape, count in demands:
        for k, v in shape.items():
            total_need[k] = total_need.get(k, 0.0) + v * count
    free_all = free_of(everything)

    def with_rest(partition: list[list[int]]) -> int:
        required = sum(cache[frozenset(part)] for part in partition)
        extra = 0
        for k, need in total_need.items():
            held = free_all.get(k, 0.0) + sum(
                cache[frozenset(part)] * max(caps[i].get(k, 0.0) for i in part) for part in partition
            )
            largest = max(cap.get(k, 0.0) for cap in caps)
            if need - held > 1e-9 and largest > 0:
                extra = max(extra, math.ceil((need - held) / largest - 1e-9))
        return required + extra

    subset_bound = max(with_rest(partition) for partition in _partitions(everything))
    return per_resource, max(per_resource, subset_bound)
