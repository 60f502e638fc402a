"""Allowlist entries for what rayscale models differently from Ray's autoscaler on purpose, each
told apart by a counterfactual run: the difference must be gone (or explained by another entry)
when one side runs under the other's model, so that an unrelated regression in the same case
still fails.

- ``drained-host-keeps-its-pod``, ``failed-launch-backs-off`` and ``broken-replica-goes-whole``:
  Ray answers a variant of the case in which its caps, and the replicas it keeps, are what
  KubeRay's controller and rayscale's backoff make of them (``ray_case.variant``: ``held-pods``,
  ``backed-off``, ``broken-replicas``).
- ``tpu-head-on-host-0``: rayscale decides the case read as Ray reads it, every host of a slice
  with the ``TPU-<type>-head`` resource (renamed so that rayscale no longer knows it for a slice
  head), and its decision is compared with Ray's answer.
- ``cap-cut-replica-kept``: rayscale decides the case without keeping a replica the worker cap
  cut in place of a new one (``schedule(keep_cut=False)``: the cut replica goes and a new one is
  launched); the decision must be that one with only the churn taken out.

Registered into ``allowlist.PREDICATES`` when ``allowlist`` is imported.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping

from rayscale.autoscaler.scheduler import schedule
from rayscale.autoscaler.scheduling.model import (
    Decision,
    Node,
    NodeState,
    Placement,
    RemovalCause,
    Snapshot,
    drained_while_working,
)
from rayscale.cluster.accelerators import is_tpu_slice_head_resource
from tests.differential.allowlist import (
    COUNT_KINDS,
    Entry,
    allowlisted,
    gone_in_variant,
    predicate,
    same_difference,
)
from tests.differential.checks import broken_replica_hosts, stuck
from tests.differential.compare import Difference, Outcome, compare
from tests.differential.ray_quirks import group_of

EVERY_HOST = "~every-host"  # a head resource renamed: an ordinary per-host resource to rayscale


@predicate("drained-host-keeps-its-pod")
def _drained_host_keeps_its_pod(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """A replica is held by a host drained while it works, and the difference is gone when Ray
    counts the held pods towards the caps."""
    if not any(drained_while_working(n) for n in outcome.snapshot.nodes):
        return False
    return gone_in_variant(outcome, difference, others, "held-pods")


@predicate("broken-replica-goes-whole")
def _broken_replica_goes_whole(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """A multi-host replica has a dead, idle draining or failed host beside live ones, and the
    difference is gone when Ray's case has the whole replica going."""
    if not broken_replica_hosts(outcome.snapshot):
        return False
    return gone_in_variant(outcome, difference, others, "broken-replicas")


@predicate("failed-launch-backs-off")
def _failed_launch_backs_off(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """A host is past its launch limit, and the difference is gone when Ray launches nothing more
    of its group than the group's minimum."""
    if not any(stuck(n, outcome.snapshot.options) for n in outcome.snapshot.nodes):
        return False
    return gone_in_variant(outcome, difference, others, "backed-off")


def _renamed(resources: Mapping[str, float]) -> dict[str, float]:
    return {(k + EVERY_HOST if is_tpu_slice_head_resource(k) else k): v for k, v in resources.items()}


def every_host_head(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` as Ray reads it: every host of a multi-host group has the slice head resource
    (renamed, so rayscale does not keep it for host 0), except that a running host other than its
    replica's first reports none of it free (its Ray node has none)."""
    groups = {g.name: g for g in snapshot.groups}
    seen: set[tuple[str, str]] = set()
    nodes: list[Node] = []
    for n in snapshot.nodes:
        key = (n.group, n.replica or n.name)
        first = key not in seen
        seen.add(key)
        available = None if n.available is None else _renamed(n.available)
        heads = [k for k in groups[n.group].resources if is_tpu_slice_head_resource(k)]
        if heads and not first and n.state is NodeState.RUNNING:
            base = available if available is not None else _renamed(groups[n.group].resources)
            available = {**base, **{k + EVERY_HOST: 0.0 for k in heads}}
        nodes.append(dataclasses.replace(n, available=available))
    return dataclasses.replace(
        snapshot,
        groups=tuple(dataclasses.replace(g, resources=_renamed(g.resources)) for g in snapshot.groups),
        nodes=tuple(nodes),
        demands=tuple(dataclasses.replace(d, resources=_renamed(d.resources)) for d in snapshot.demands),
        gangs=tuple(
            dataclasses.replace(g, bundles=tuple(_renamed(b) for b in g.bundles)) for g in snapshot.gangs
        ),
        constraints=tuple(
            dataclasses.replace(c, resources=_renamed(c.resources)) for c in snapshot.constraints
        ),
    )


def _has_slice_heads(snapshot: Snapshot) -> bool:
    return any(
        g.num_of_hosts > 1 and any(is_tpu_slice_head_resource(k) for k in g.resources)
        for g in snapshot.groups
    )


@predicate("tpu-head-on-host-0")
def _tpu_head_on_host_0(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """A multi-host group has a slice head resource, and the difference is gone (or explained by
    another entry) when rayscale reads the case as Ray does."""
    if not _has_slice_heads(outcome.snapshot):
        return False
    snapshot = every_host_head(outcome.snapshot)
    return _gone_in(outcome, snapshot, schedule(snapshot), difference, others)


def _gone_in(
    outcome: Outcome, snapshot: Snapshot, decision: Decision, difference: Difference, others: list[Entry]
) -> bool:
    """Gone (or explained by another entry) when rayscale decides ``decision`` on ``snapshot``
    (Ray's answers stay those to the case)."""
    other = Outcome(outcome.case_id, snapshot, decision, outcome.ray, outcome.error)
    other.ask_variant, other.variants = outcome.ask_variant, outcome.variants
    other.differences = compare(other)
    same = [d for d in other.differences if same_difference(difference, d)]
    return all(allowlisted(other, d, others) is not None for d in same)


def _per_group(p: Placement) -> tuple[Placement, Counter[str]]:
    """A placement without its targets, and the units it puts in each group."""
    units: Counter[str] = Counter()
    for t in p.targets:
        units[t.group] += t.count
    return dataclasses.replace(p, targets=()), units


def churn_kept(kept: Decision, churned: Decision) -> frozenset[str]:
    """The groups where ``kept`` is ``churned`` with the churn taken out: replicas ``churned``
    removes for the worker cap stay, as many launches of their group fewer, the same work placed
    in each group and nothing else different. Empty when it is not (or there is no churn)."""
    mine = set(kept.terminate)
    extra = [r for r in churned.terminate if r not in mine]
    if not mine <= set(churned.terminate) or any(r.reason is not RemovalCause.MAX_WORKERS for r in extra):
        return frozenset()
    cut = Counter(r.group for r in {(r.group, r.replica or r.name): r for r in extra}.values())
    if kept.unmet != churned.unmet or kept.groups.keys() != churned.groups.keys():
        return frozenset()
    for name, a in kept.groups.items():
        b = churned.groups[name]
        if (a.current, a.replicas) != (b.current, b.replicas):
            return frozenset()
        if not b.launch - a.launch == b.terminate - a.terminate == cut[name]:
            return frozenset()
    if [_per_group(p) for p in kept.placements] != [_per_group(p) for p in churned.placements]:
        return frozenset()
    return frozenset(cut)


@predicate("cap-cut-replica-kept")
def _cap_cut_replica_kept(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """rayscale keeps a replica its worker cap cut in place of a new one of its group (the
    difference is about that group), and the difference is gone (or explained by another entry)
    when the cut replica goes and the new one is launched, all else the same."""
    snapshot, decision = outcome.snapshot, outcome.decision
    if decision is None or snapshot.options.max_workers is None:
        return False
    churned = schedule(snapshot, keep_cut=False)
    groups = churn_kept(decision, churned)
    kind, keys = difference.kind, [k for k in difference.subject.split(",") if k]
    if kind.startswith(COUNT_KINDS):
        concerned = set(keys) & groups
    elif kind == "cap-removals" or kind.startswith("idle-only-"):
        concerned = {group_of(outcome, key) or "" for key in keys} & groups
    else:
        return False
    return bool(concerned) and _gone_in(outcome, snapshot, churned, difference, others)
