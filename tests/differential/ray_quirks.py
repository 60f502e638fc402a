"""The allowlist's entries for Ray's quirks and KubeRay's whole replicas, each a predicate that
recognises the differences it explains (registered into ``allowlist.PREDICATES`` when
``allowlist`` is imported)."""

from __future__ import annotations

from rayscale.autoscaler.scheduling.model import Strategy, Target, Unmet, UnmetReason
from tests.differential import checks
from tests.differential.allowlist import COUNT_KINDS, Entry, gone_in_variant, predicate
from tests.differential.cap_room import launched_into_cut_room, within_cap
from tests.differential.checks import counted, host_counts, resources_key
from tests.differential.compare import (
    RAY_CAP_CAUSES,
    RAYSCALE_CAP_CAUSES,
    Difference,
    Outcome,
    demand_index,
    gang_index,
    ray_hosts,
    replica_key,
)
from tests.differential.ray_case import pg_id


@predicate("ray-cut-node-absorbs")
def _cut_node_absorbs(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """Gone (or explained by another entry) when Ray keeps the nodes it removes out of the packing."""
    if not any(t["cause"] != "IDLE" for t in outcome.ray.get("terminate", [])):
        return False
    return gone_in_variant(outcome, difference, others, "no-cut-absorb")


def group_of(outcome: Outcome, key: str) -> str | None:
    """The group of a host or replica name."""
    for n in outcome.snapshot.nodes:
        if key in (n.name, n.replica):
            return n.group
    return None


def _hosts_of(outcome: Outcome, key: str) -> set[str]:
    return {n.name for n in outcome.snapshot.nodes if key in (n.name, n.replica)}


def _rayscale_worked(outcome: Outcome, key: str) -> bool:
    """rayscale puts work on a host of replica (or host) ``key``."""
    assert outcome.decision is not None
    hosts = _hosts_of(outcome, key)
    return any(hosts & set(t.nodes) for p in outcome.decision.placements for t in p.targets)


def _ray_worked(outcome: Outcome, key: str) -> bool:
    """Ray puts pending work or request_resources bundles on a host of ``key``."""
    hosts = _hosts_of(outcome, key)
    return any(n["node"] in hosts and (n["demand"] or n["constraint"]) for n in outcome.ray.get("nodes", []))


def _split_groups(outcome: Outcome, causes: set[str]) -> set[str]:
    """Groups of which Ray removes some but not all hosts of a replica (for one of ``causes``)."""
    gone = {t["instance"] for t in outcome.ray.get("terminate", []) if t["cause"] in causes}
    replicas: dict[str, list[str]] = {}
    for n in outcome.snapshot.nodes:
        if n.replica is not None:
            replicas.setdefault(n.replica, []).append(n.name)
    return {
        group_of(outcome, r) or "" for r, hosts in replicas.items() if 0 < len(gone & set(hosts)) < len(hosts)
    }


def whole_replica_groups(outcome: Outcome) -> frozenset[str]:
    """The multi-host groups where Ray plans a partial replica or removes part of one."""
    launch = outcome.ray.get("launch", {})
    partial = {
        g.name
        for g in outcome.snapshot.groups
        if g.num_of_hosts > 1 and launch.get(g.name, 0) % g.num_of_hosts
    }
    return frozenset(partial | _split_groups(outcome, {"IDLE", *RAY_CAP_CAUSES}))


def _cap_split_kept(outcome: Outcome) -> bool:
    """Ray's cap kept single hosts of a replica (which KubeRay cannot keep alone), and each
    replica Ray keeps but rayscale removes for a cap would not fit in the room rayscale has left
    (the worker cap, the group's maxReplicas)."""
    decision = outcome.decision
    assert decision is not None
    snap, ray = outcome.snapshot, outcome.ray
    gone = {t["instance"] for t in ray.get("terminate", []) if t["instance"]}
    replicas: dict[str, set[str]] = {}
    for n in counted(snap):
        replicas.setdefault(n.replica or n.name, set()).add(n.name)
    if not any(0 < len(gone & hosts) < len(hosts) for hosts in replicas.values()):
        return False
    counts = host_counts(snap, decision, ray)
    mine_total = sum(c[0] for c in counts.values())
    cap = snap.options.max_workers
    if cap is not None and mine_total > cap:
        return False
    groups = {g.name: g for g in snap.groups}
    capped = {r.replica or r.name for r in decision.terminate if r.reason in RAYSCALE_CAP_CAUSES}
    for key in capped:
        hosts = replicas.get(key, set())
        if not hosts - gone:
            continue  # Ray removes it too
        g = groups[group_of(outcome, key) or ""]
        room = g.max_replicas * g.num_of_hosts - counts[g.name][0]
        if cap is not None:
            room = min(room, cap - mine_total)
        if len(hosts) <= room:
            return False
    return True


def _cap_cuts_fewer(outcome: Outcome) -> bool:
    """rayscale removes for the cap only replicas of which Ray's cap cuts a host, and ends within
    the cap: Ray cut single hosts of more replicas where fewer whole ones made the room."""
    decision = outcome.decision
    assert decision is not None
    snap, cap = outcome.snapshot, outcome.snapshot.options.max_workers
    mine = {r.replica or r.name for r in decision.terminate if r.reason in RAYSCALE_CAP_CAUSES}
    ray_cut = {
        replica_key(snap, t["instance"])
        for t in outcome.ray["terminate"]
        if t["cause"] in RAY_CAP_CAUSES and t["instance"]
    }
    kept = sum(c[0] for c in host_counts(snap, decision, outcome.ray).values())
    return cap is not None and bool(mine) and mine < ray_cut and kept <= cap


def _shortfall(outcome: Outcome, subject: str) -> int:
    """How many more units of ``subject`` rayscale leaves than Ray (demands; gangs count 1)."""
    assert outcome.decision is not None
    snap = outcome.snapshot
    if not subject.startswith("demand["):
        return 1
    i = int(subject[len("demand[") : -1])
    mine = sum(u.count for u in outcome.decision.unmet if u.kind == "demand" and demand_index(snap, u) == i)
    return mine - int(outcome.ray["infeasible_demands"][i])


def _shapes(outcome: Outcome, subject: str) -> set[tuple[tuple[str, float], ...]] | None:
    """The request shapes Ray schedules for ``subject`` (None for request_resources)."""
    snap = outcome.snapshot
    if subject.startswith("demand["):
        return {resources_key(snap.demands[int(subject[len("demand[") : -1])].resources)}
    if subject.startswith("gang["):
        gang = snap.gangs[int(subject[len("gang[") : -1])]
        shapes = {resources_key(b) for b in gang.bundles}
        total: dict[str, float] = {}
        for b in gang.bundles:
            for k, v in b.items():
                total[k] = total.get(k, 0.0) + v
        return shapes | {resources_key(total)}
    return None


def _ray_placed_in(outcome: Outcome, subject: str, groups: frozenset[str]) -> int:
    """Units of ``subject`` Ray places on hosts of ``groups``."""
    shapes = _shapes(outcome, subject)
    found = 0
    for n in outcome.ray.get("nodes", []):
        if n["type"] not in groups:
            continue
        if shapes is None:
            found += len(n["constraint"])
        else:
            found += sum(1 for r in n["demand"] if resources_key(r["resources"]) in shapes)
    return found


@predicate("whole-replicas")
def _whole_replicas(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """Ray planned, capped or idled single hosts of a multi-host replica: excuses differences
    about those groups only (counts computed without them)."""
    concerned = whole_replica_groups(outcome)
    if not concerned:
        return False
    kind, subject = difference.kind, difference.subject
    if kind.startswith(COUNT_KINDS):
        # Ray's hosts there already count as whole replicas: what is left is the cap's room.
        return within_cap(outcome)
    if kind == "idle-only-ray":
        # Ray idles single hosts of the replica; or, having cut single hosts at the cap, left
        # the work elsewhere, and rayscale put work on this host.
        return group_of(outcome, subject) in concerned or _rayscale_worked(outcome, subject)
    if kind == "idle-only-rayscale":
        # Ray kept the host for work it placed with part of a replica.
        return group_of(outcome, subject) in concerned or _ray_worked(outcome, subject)
    if kind == "cap-removals":
        in_groups = all(group_of(outcome, r) in concerned for r in subject.split(",") if r)
        return in_groups or _cap_split_kept(outcome) or _cap_cuts_fewer(outcome)
    if kind.startswith("unplaced-"):
        # Ray put the work on single hosts of those groups (at least what rayscale leaves), or
        # used the worker cap's room their whole replicas take in rayscale's plan.
        if _ray_placed_in(outcome, subject, concerned) >= _shortfall(outcome, subject):
            return True
        return _unmet_for_cap(outcome, subject) and within_cap(outcome)
    return False


def cap_below_minimum_groups(outcome: Outcome) -> frozenset[str]:
    """Groups whose hosts Ray's caps remove below the group's minimum."""
    snap, ray = outcome.snapshot, outcome.ray
    gone: dict[str, int] = {}
    cut: dict[str, int] = {}  # hosts cut, its own launches cancelled in the same pass included
    for t in ray.get("terminate", []):
        if t["cause"] in RAY_CAP_CAUSES:
            cut[t["type"]] = cut.get(t["type"], 0) + 1
            if t["instance"]:
                gone[t["type"]] = gone.get(t["type"], 0) + 1
    nodes = counted(snap)  # neither side counts hosts past their launch limit
    out = set()
    for g in snap.groups:
        live = sum(1 for n in nodes if n.group == g.name)
        left = live + ray.get("launch", {}).get(g.name, 0) - gone.get(g.name, 0)
        if cut.get(g.name) and left < g.min_replicas * g.num_of_hosts:
            out.add(g.name)
    return frozenset(out)


@predicate("cap-keeps-minimum")
def _cap_keeps_minimum(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """Ray's worker cap removed hosts of a group below its minimum: excuses the removals, the
    counts of those groups (their minimum, plus the hosts launched for work into the room that
    taking the surplus as whole replicas leaves), the idle hosts the other removals freed, and
    the work rayscale leaves for the cap."""
    below = cap_below_minimum_groups(outcome)
    decision = outcome.decision
    if not below or decision is None:
        return False
    kind, subject = difference.kind, difference.subject
    if kind.startswith(COUNT_KINDS):
        # Only the groups Ray cut below their minimum have more, and no more than that minimum,
        # but for hosts launched for work into the room the cap's whole replicas left (Ray cut
        # one host of the minimum where rayscale cut a wider replica of another group).
        counts = host_counts(outcome.snapshot, decision, outcome.ray)
        floor = {g.name: g.min_replicas * g.num_of_hosts for g in outcome.snapshot.groups}
        over = [g for g in subject.split(",") if g]
        beyond = {g: counts[g][0] - floor[g] for g in over if g in below and counts[g][0] > floor[g]}
        if not over or (beyond and not launched_into_cut_room(outcome, beyond)):
            return False
        if all(g in below for g in over):
            return True
        # Or, among the hosts of the kind, no more extra than the minimum hosts Ray cut: the
        # cap's cut then fell on another group's host, whose work went to a host Ray idled.
        kind_of = {g.name: checks.accelerator_kind(g) for g in outcome.snapshot.groups}
        same = [g for g in counts if kind_of[g] == kind_of[over[0]]] if kind.startswith("more-hosts:") else []
        extra = sum(counts[g][0] - counts[g][1] for g in same)
        kept = sum(max(floor[g] - counts[g][1], 0) for g in below if g in same)
        launched = ray_hosts(outcome.snapshot, outcome.ray)
        hosts = {g.name: g.num_of_hosts for g in outcome.snapshot.groups}
        no_more_launched = all(decision.groups[g].launch * hosts[g] <= launched.get(g, 0) for g in same)
        return bool(same) and extra <= kept and no_more_launched
    if kind == "cap-removals":
        snap = outcome.snapshot
        mine = {r.replica or r.name for r in decision.terminate if r.reason in RAYSCALE_CAP_CAUSES}
        ray_only = {
            replica_key(snap, t["instance"])
            for t in outcome.ray["terminate"]
            if t["cause"] in RAY_CAP_CAUSES and t["instance"]
        } - mine
        return bool(ray_only) and all(group_of(outcome, r) in below for r in ray_only)
    if kind == "idle-only-ray":
        # rayscale took the surplus from this replica instead, or put work on it; or it took the
        # surplus from another replica of this group (Ray took it from a group it cut below the
        # minimum), which leaves this idle one as the group's minimum.
        capped = {r.replica or r.name for r in decision.terminate if r.reason in RAYSCALE_CAP_CAUSES}
        if subject in capped or _rayscale_worked(outcome, subject):
            return True
        group = group_of(outcome, subject)
        if group is None:
            return False
        spec = next(g for g in outcome.snapshot.groups if g.name == group)
        cut_here = any(group_of(outcome, r) == group for r in capped)
        return cut_here and group not in below and decision.groups[group].replicas == spec.min_replicas
    if kind == "idle-only-rayscale":
        return _ray_worked(outcome, subject)
    if kind.startswith("unplaced-"):
        return _unmet_for_cap(outcome, subject)
    return False


def _unmet_for_cap(outcome: Outcome, subject: str) -> bool:
    """rayscale leaves ``subject`` unplaced because of the worker cap."""
    assert outcome.decision is not None
    snap = outcome.snapshot
    for u in outcome.decision.unmet:
        if u.reason is not UnmetReason.MAX_WORKERS:
            continue
        if u.kind == "demand" and f"demand[{demand_index(snap, u)}]" == subject:
            return True
        if u.kind == "gang" and f"gang[{gang_index(snap, u)}]" == subject:
            return True
        if u.kind == "constraint" and subject == "constraint":
            return True
    return False


def _split_pack(outcome: Outcome, subject: str) -> bool:
    """``subject`` is a STRICT_PACK gang whose bundles carry different selectors."""
    if not subject.startswith("gang["):
        return False
    gang = outcome.snapshot.gangs[int(subject[len("gang[") : -1])]
    return gang.strategy is Strategy.STRICT_PACK and len(set(gang.bundle_selectors)) > 1


@predicate("strict-pack-split-by-selectors")
def _strict_pack_split(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """A STRICT_PACK gang has different bundle selectors, and the difference (the same kind about
    the same subject) is gone, or explained by another entry, when every bundle carries all of
    the gang's selectors, so that Ray packs them together too."""
    if not any(_split_pack(outcome, f"gang[{i}]") for i in range(len(outcome.snapshot.gangs))):
        return False
    return gone_in_variant(outcome, difference, others, "merged-packs")


def _placed_beyond_ray(outcome: Outcome) -> dict[str, int]:
    """Per group: units rayscale puts on new hosts of demands and placement groups it places
    beyond what Ray places."""
    decision = outcome.decision
    assert decision is not None
    snap, ray = outcome.snapshot, outcome.ray
    mine_left: dict[tuple[str, int | None], int] = {}
    for u in decision.unmet:
        key = (str(u.kind), demand_index(snap, u) if u.kind == "demand" else gang_index(snap, u))
        mine_left[key] = mine_left.get(key, 0) + u.count
    ray_left = {("demand", i): int(n) for i, n in enumerate(ray["infeasible_demands"])}
    for j in range(len(snap.gangs)):
        ray_left[("gang", j)] = sum(
            1
            for copy in range(snap.gangs[j].count)
            if pg_id(outcome.case_id, j, copy) in ray["infeasible_pgs"]
        )
    out: dict[str, int] = {}
    for p in decision.placements:
        what = Unmet(p.kind, p.resources, p.bundles, p.strategy, p.label_selector, 0, UnmetReason.MAX_WORKERS)
        key = (str(p.kind), demand_index(snap, what) if p.kind == "demand" else gang_index(snap, what))
        if key not in ray_left or mine_left.get(key, 0) >= ray_left[key]:
            continue
        for t in p.targets:
            if t.on is Target.NEW:
                out[t.group] = out.get(t.group, 0) + t.count
    return out


@predicate("places-what-ray-cannot")
def _places_more(outcome: Outcome, difference: Difference, others: list[Entry]) -> bool:
    """Each group with more hosts than Ray has no more extra hosts than it launches for units of
    work Ray leaves infeasible, plus the request_resources bundles it holds where Ray cannot
    satisfy the request; in a group Ray's cap cut below its minimum, the minimum (plus the new
    hosts for work) or those, whichever is more: the kept minimum may hold the bundles."""
    decision = outcome.decision
    if decision is None or not difference.kind.startswith(COUNT_KINDS) or not difference.subject:
        return False
    held = _placed_beyond_ray(outcome)
    counts = host_counts(outcome.snapshot, decision, outcome.ray)
    hosts = {g.name: g.num_of_hosts for g in outcome.snapshot.groups}
    bundles = _constraint_beyond_ray(outcome)
    below = cap_below_minimum_groups(outcome)  # there the minimum rayscale keeps is cap-keeps-minimum's
    floor = {g.name: g.min_replicas * g.num_of_hosts for g in outcome.snapshot.groups}
    for g in difference.subject.split(","):
        for_work = min(held.get(g, 0), decision.groups[g].launch) * hosts[g]
        allowed = counts[g][1] + for_work + bundles.get(g, 0)
        if g in below:
            allowed = max(allowed, floor[g] + for_work)
        if counts[g][0] > allowed:
            return False
    return True


def _constraint_beyond_ray(outcome: Outcome) -> dict[str, int]:
    """Per group: hosts that hold request_resources bundles (new ones, or ones Ray removes) when
    Ray reports the request infeasible and rayscale satisfies it."""
    decision = outcome.decision
    assert decision is not None
    if not outcome.ray["constraint_infeasible"] or any(u.kind == "constraint" for u in decision.unmet):
        return {}
    ray_gone = {t["instance"] for t in outcome.ray["terminate"] if t["instance"]}
    hosts: dict[str, set[str]] = {}
    for p in decision.placements:
        if p.kind == "constraint":
            for t in p.targets:
                held = hosts.setdefault(t.group, set())
                if t.on is Target.NEW:
                    held |= {f"new-{i}" for i in range(t.count)}
                else:
                    held |= set(t.nodes) & ray_gone  # hosts Ray does not keep
    return {g: len(h) for g, h in hosts.items()}
