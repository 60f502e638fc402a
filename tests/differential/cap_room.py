"""The worker cap's room: what rayscale may keep and launch under the cap where Ray cut single
hosts (helpers of the allowlist's ``whole-replicas`` and ``cap-keeps-minimum`` entries)."""

from __future__ import annotations

from collections.abc import Mapping

from rayscale.autoscaler.scheduling.model import Target
from tests.differential.checks import host_counts
from tests.differential.compare import RAY_CAP_CAUSES, RAYSCALE_CAP_CAUSES, Outcome


def within_cap(outcome: Outcome) -> bool:
    """Under the worker cap, rayscale keeps and launches, in all groups together, no more hosts
    than Ray (its partial replicas counted whole) and no more than the cap: the room Ray gave to
    single hosts of a replica went to whole replicas elsewhere."""
    assert outcome.decision is not None
    cap = outcome.snapshot.options.max_workers
    if cap is None:
        return False
    counts = host_counts(outcome.snapshot, outcome.decision, outcome.ray).values()
    mine, theirs = sum(c[0] for c in counts), sum(c[1] for c in counts)
    return mine <= min(theirs, cap)


def whole_cut_room(outcome: Outcome) -> int:
    """The hosts rayscale's caps remove beyond the existing hosts Ray's caps remove, when that is
    only the rounding up to whole replicas (fewer than the hosts of any replica rayscale cut that
    has more than one); else 0."""
    decision = outcome.decision
    assert decision is not None
    cut = [r for r in decision.terminate if r.reason in RAYSCALE_CAP_CAUSES]
    sizes: dict[str, int] = {}
    for r in cut:
        key = r.replica or r.name
        sizes[key] = sizes.get(key, 0) + 1
    ray_cut = sum(1 for t in outcome.ray["terminate"] if t["cause"] in RAY_CAP_CAUSES and t["instance"])
    room = len(cut) - ray_cut
    wide = [n for n in sizes.values() if n > 1]
    return room if wide and 0 < room < min(wide) else 0


def new_units(outcome: Outcome, group: str) -> int:
    """Units of work rayscale places on new hosts of ``group``."""
    assert outcome.decision is not None
    return sum(
        t.count
        for p in outcome.decision.placements
        for t in p.targets
        if t.group == group and t.on is Target.NEW
    )


def launched_into_cut_room(outcome: Outcome, extra: Mapping[str, int]) -> bool:
    """The ``extra`` hosts (per group) are launched for work, into the room rayscale's cap left
    by removing whole replicas where Ray cut single hosts (``whole_cut_room``), with no more
    hosts in all than Ray and the cap (``within_cap``): what Ray itself launches for that work
    once KubeRay has deleted the replica whole."""
    decision = outcome.decision
    assert decision is not None
    hosts = {g.name: g.num_of_hosts for g in outcome.snapshot.groups}
    for g, n in extra.items():
        if n > min(decision.groups[g].launch * hosts[g], new_units(outcome, g)):
            return False
    return 0 < sum(extra.values()) <= whole_cut_room(outcome) and within_cap(outcome)
