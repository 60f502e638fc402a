"""Shrinking a failing case: smaller snapshots that still show the same kind of difference.

Greedy: list every one-step simplification of the current case (drop a group, a replica, a
demand, a gang, a bundle, the constraint; lower a count; drop a selector, a label, an option),
ask both schedulers about all of them at once, keep the first that still fails the same way,
and start again until none does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from rayscale.autoscaler.scheduling.model import (
    UNLIMITED,
    Group,
    Head,
    NodeState,
    Options,
    Snapshot,
)

Check = Callable[[list[Snapshot]], list[bool]]  # which of these candidates still fail

MAX_ROUNDS = 300


def valid(s: Snapshot) -> bool:
    """What the generator promises: something to compare, unique keys, caps Ray can honour."""
    if not s.groups:
        return False
    names = {g.name for g in s.groups}
    if any(n.group not in names for n in s.nodes):
        return False
    if any(g.min_replicas > g.max_replicas for g in s.groups):
        return False
    demand_keys = [(tuple(sorted(d.resources.items())), d.label_selector) for d in s.demands]
    gang_keys = [(g.strategy, tuple(tuple(sorted(b.items())) for b in g.bundles)) for g in s.gangs]
    if len(set(demand_keys)) != len(demand_keys) or len(set(gang_keys)) != len(gang_keys):
        return False
    if any(d.fallbacks and not d.label_selector for d in s.demands):
        return False
    if any(not d.resources or d.count < 1 for d in s.demands):
        return False
    if any(g.bundle_selectors and len(g.bundle_selectors) != len(g.bundles) for g in s.gangs):
        return False
    cap = s.options.max_workers
    return cap is None or cap >= sum(g.min_replicas * g.num_of_hosts for g in s.groups)


def _without(items: tuple[Any, ...], i: int) -> tuple[Any, ...]:
    return items[:i] + items[i + 1 :]


def _replace_at(items: tuple[Any, ...], i: int, item: Any) -> tuple[Any, ...]:
    return (*items[:i], item, *items[i + 1 :])


def _lower(count: int) -> Iterator[int]:
    for c in (1, count // 2, count - 1):
        if 1 <= c < count:
            yield c


def _group_steps(s: Snapshot, i: int, g: Group) -> Iterator[Snapshot]:
    def with_group(**changes: Any) -> Snapshot:
        return dataclasses.replace(s, groups=_replace_at(s.groups, i, dataclasses.replace(g, **changes)))

    if g.labels:
        yield with_group(labels={})
        for k in g.labels:
            yield with_group(labels={a: b for a, b in g.labels.items() if a != k})
    if g.idle_timeout_seconds is not None:
        yield with_group(idle_timeout_seconds=None)
    if g.priority:
        yield with_group(priority=0)
    if g.min_replicas:
        yield with_group(min_replicas=0)
    if g.max_replicas != UNLIMITED:
        yield with_group(max_replicas=UNLIMITED)
    for name in g.resources:
        if name != "CPU" and len(g.resources) > 1:
            yield with_group(resources={k: v for k, v in g.resources.items() if k != name})


def candidates(s: Snapshot) -> Iterator[Snapshot]:
    r = dataclasses.replace
    # Big cuts first.
    for i, g in enumerate(s.groups):
        yield r(s, groups=_without(s.groups, i), nodes=tuple(n for n in s.nodes if n.group != g.name))
    if s.constraints:
        yield r(s, constraints=())
    for i in range(len(s.gangs)):
        yield r(s, gangs=_without(s.gangs, i))
    for i in range(len(s.demands)):
        yield r(s, demands=_without(s.demands, i))
    replicas = list(dict.fromkeys(n.replica or n.name for n in s.nodes))
    for key in replicas:
        yield r(s, nodes=tuple(n for n in s.nodes if (n.replica or n.name) != key))
    for i in range(len(s.constraints)):
        yield r(s, constraints=_without(s.constraints, i))
    # Counts.
    for i, d in enumerate(s.demands):
        for k in _lower(d.count):
            yield r(s, demands=_replace_at(s.demands, i, r(d, count=k)))
    for i, gang in enumerate(s.gangs):
        for k in _lower(gang.count):
            yield r(s, gangs=_replace_at(s.gangs, i, r(gang, count=k)))
        if len(gang.bundles) > 1:
            for b in range(len(gang.bundles)):
                sels = _without(gang.bundle_selectors, b) if gang.bundle_selectors else ()
                smaller = r(gang, bundles=_without(gang.bundles, b), bundle_selectors=sels)
                yield r(s, gangs=_replace_at(s.gangs, i, smaller))
    for i, c in enumerate(s.constraints):
        for k in _lower(c.count):
            yield r(s, constraints=_replace_at(s.constraints, i, r(c, count=k)))
    # Selectors.
    for i, d in enumerate(s.demands):
        if d.fallbacks:
            yield r(s, demands=_replace_at(s.demands, i, r(d, fallbacks=())))
            for f in range(len(d.fallbacks)):
                yield r(s, demands=_replace_at(s.demands, i, r(d, fallbacks=_without(d.fallbacks, f))))
        elif d.label_selector:
            yield r(s, demands=_replace_at(s.demands, i, r(d, label_selector=())))
    for i, gang in enumerate(s.gangs):
        if gang.bundle_selectors:
            yield r(s, gangs=_replace_at(s.gangs, i, r(gang, bundle_selectors=())))
    for i, c in enumerate(s.constraints):
        if c.label_selector:
            yield r(s, constraints=_replace_at(s.constraints, i, r(c, label_selector=())))
    # Groups, head, hosts, options.
    for i, g in enumerate(s.groups):
        yield from _group_steps(s, i, g)
    if s.head is not None:
        if s.head.resources:
            yield r(s, head=Head(resources={}, labels=s.head.labels))
        if s.head.available is not None:
            yield r(s, head=r(s.head, available=None))
        if s.head.labels:
            yield r(s, head=r(s.head, labels={}))
    for i, n in enumerate(s.nodes):
        if n.labels is not None:
            yield r(s, nodes=_replace_at(s.nodes, i, r(n, labels=None)))
        if n.available is not None:
            yield r(s, nodes=_replace_at(s.nodes, i, r(n, available=None)))
        if n.state is NodeState.RUNNING and n.idle_seconds:
            yield r(s, nodes=_replace_at(s.nodes, i, r(n, idle_seconds=0.0)))
        if n.state is not NodeState.RUNNING and not n.replica:
            yield r(s, nodes=_replace_at(s.nodes, i, r(n, state=NodeState.RUNNING, booting=False)))
        if n.booting or n.pending_seconds:
            yield r(s, nodes=_replace_at(s.nodes, i, r(n, booting=False, pending_seconds=0.0)))
    if s.options.max_workers is not None:
        yield r(s, options=r(s.options, max_workers=None))
    if s.options.idle_timeout_seconds is not None:
        yield r(s, options=r(s.options, idle_timeout_seconds=None))
    if s.options != Options():
        yield r(s, options=r(Options(), idle_timeout_seconds=s.options.idle_timeout_seconds))


def shrink(snapshot: Snapshot, still_fails: Check) -> tuple[Snapshot, int]:
    """The smallest case found that still fails, and how many candidates were tried.

    Candidates are asked in growing batches (8, 16, 32, ...): the first ones (the big cuts)
    usually hit, and a batch costs one round trip to the Ray oracle.
    """
    current, tried = snapshot, 0
    for _ in range(MAX_ROUNDS):
        found = None
        pending = [c for c in candidates(current) if valid(c)]
        start, step = 0, 8
        while start < len(pending) and found is None:
            chunk = pending[start : start + step]
            tried += len(chunk)
            verdicts = still_fails(chunk)
            found = next((c for c, bad in zip(chunk, verdicts, strict=True) if bad), None)
            start, step = start + step, step * 2
        if found is None:
            return current, tried
        current = found
    return current, tried
