"""Seeded generator of small scheduling cases, as rayscale Snapshots.

Every case is something Ray's scheduler can be asked too (see ``ray_case``): worker groups with
labels, min/max and sometimes two hosts per replica; the head with or without CPUs; running hosts
busy, partly used or idle for a while; pending (unscheduled or booting), draining and dead hosts;
tasks and actors with label selectors and fallbacks; placement groups of every strategy with
bundle label selectors; one ``request_resources`` with selectors; the idle timeout and a worker cap.

Also: multi-host TPU groups with ``TPU-<type>-head`` (on host 0 of a replica only: the first of
the replica's hosts in the snapshot, whose names are not in host order), terminating hosts,
replicas whose hosts are in different states, running hosts with the ``_PG_<id>`` labels of
placement groups already placed there, idle times exactly at an idle timeout.

``Features`` switches on what another change is still fixing (``make fuzz`` turns them on):
busy draining hosts (drained by someone else with work on them), pending hosts past the
provisioning or boot limit, TPU slice heads, replicas whose hosts are in different states.

What Ray's scheduler cannot be asked is never generated: RayResourceRequests (their own
all-or-nothing units), backoff, Conservative mode, partly placed placement groups.

Cases are keyed so that the comparison can map answers back: demands differ in (resources,
first selector) and gangs in (strategy, bundles).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from rayscale.autoscaler.scheduling.model import (
    UNLIMITED,
    Constraint,
    Demand,
    Gang,
    Group,
    Head,
    LabelConstraint,
    LabelOp,
    Node,
    NodeState,
    Options,
    Selector,
    Snapshot,
    Strategy,
)
from rayscale.cluster.accelerators import is_tpu_slice_head_resource
from tests.differential.replay import host_capacity

GI = float(1024**3)
LABELS: dict[str, tuple[str, ...]] = {
    "zone": ("a", "b", "c"),
    "tier": ("spot", "ondemand"),
    "accel": ("a100", "t4"),
}
# 30, 60, 120 and 300 are idle timeouts too: exactly at the timeout is not past it.
IDLE_CHOICES = (0.0, 0.0, 10.0, 30.0, 45.0, 60.0, 61.0, 120.0, 200.0, 300.0, 1000.0)
TPU_TYPES = ("v6e-8", "v4-16", "v5p-8")


@dataclass(frozen=True, slots=True)
class Features:
    """Generated features behind a switch (off by default: another change is fixing them)."""

    busy_draining: bool = False
    stuck_pending: bool = False
    tpu_head: bool = False
    mixed_replicas: bool = False

    @classmethod
    def all(cls) -> Features:
        return cls(busy_draining=True, stuck_pending=True, tpu_head=True, mixed_replicas=True)

    def names(self) -> list[str]:
        return [
            n for n in ("busy_draining", "stuck_pending", "tpu_head", "mixed_replicas") if getattr(self, n)
        ]


DEFAULT = Features()


def _pick_labels(rng: random.Random, most: int = 2) -> dict[str, str]:
    keys = rng.sample(sorted(LABELS), rng.randint(0, most))
    return {k: rng.choice(LABELS[k]) for k in sorted(keys)}


def selector(rng: random.Random, known: list[Mapping[str, str]]) -> Selector:
    """One or two constraints, usually about labels some group (or the head) really has."""
    out: list[LabelConstraint] = []
    for _ in range(rng.choice((1, 1, 1, 2))):
        source = [lab for lab in known if lab]
        if source and rng.random() < 0.75:
            labels = rng.choice(source)
            key = rng.choice(sorted(labels))
            value = labels[key]
        else:
            key = rng.choice(sorted(LABELS))
            value = rng.choice(LABELS[key])
        if any(c.key == key for c in out):
            continue
        if rng.random() < 0.2:
            others = [v for v in LABELS[key] if v != value]
            out.append(LabelConstraint(key, LabelOp.NOT_IN, (rng.choice(others or [value]),)))
        elif rng.random() < 0.15:
            out.append(LabelConstraint(key, LabelOp.IN, tuple(sorted({value, rng.choice(LABELS[key])}))))
        else:
            out.append(LabelConstraint(key, LabelOp.IN, (value,)))
    return tuple(out)


def _group(rng: random.Random, name: str, features: Features) -> Group:
    hosts = 1
    res: dict[str, float] = {}
    kind = rng.random()
    cpus = float(rng.choice((1, 2, 4, 8, 16)))
    res["CPU"] = cpus
    res["memory"] = cpus * rng.choice((2, 4, 8)) * GI
    if kind < 0.3:
        res["GPU"] = float(rng.choice((1, 2, 4, 8)))
    elif kind < 0.42:
        res["custom"] = float(rng.choice((1, 2, 4)))
    elif kind < 0.57:
        res["TPU"] = 4.0
        hosts = 2
        if (
            features.tpu_head and rng.random() < 0.5
        ):  # a GKE TPU slice: host 0 of each replica has the slice head
            res[f"TPU-{rng.choice(TPU_TYPES)}-head"] = 1.0
            hosts = rng.choice((2, 2, 4))
    if rng.random() < 0.1 and kind >= 0.3:  # a memory-less group (Ray counts absent as 0)
        res.pop("memory")
    low = 1 if rng.random() < 0.15 else 0
    high = rng.choice((1, 2, 3, 5, 10, UNLIMITED, UNLIMITED))
    high = max(high, low)
    return Group(
        name=name,
        resources=res,
        labels=_pick_labels(rng),
        min_replicas=low,
        max_replicas=high,
        num_of_hosts=hosts,
        idle_timeout_seconds=rng.choice((None, None, None, 30.0, 120.0)),
        priority=rng.choice((0, 0, 0, 0, 1, -1)),
    )


def _head(rng: random.Random) -> Head:
    kind = rng.random()
    if kind < 0.4:
        res: dict[str, float] = {}
    elif kind < 0.6:
        res = {"memory": 8 * GI}
    else:
        cpus = float(rng.choice((1, 2, 4, 8)))
        res = {"CPU": cpus, "memory": cpus * 4 * GI}
    available: dict[str, float] | None = None
    if res and rng.random() < 0.5:
        available = _free(rng, res)
    labels = {"zone": rng.choice(LABELS["zone"])} if rng.random() < 0.3 else {}
    return Head(resources=res, available=available, labels=labels)


def _free(rng: random.Random, total: Mapping[str, float]) -> dict[str, float]:
    """Free resources of a host in use (amounts that are all used are left out, as Ray does)."""
    free = {k: _partly(rng, k, v) for k, v in total.items()}
    return {k: v for k, v in free.items() if v > 0}


def _partly(rng: random.Random, name: str, total: float) -> float:
    """A used amount left free: whole GPUs, half CPUs, GiB of memory."""
    if name == "memory":
        return float(rng.randint(0, int(total / GI))) * GI
    if name == "CPU":
        return rng.randint(0, int(total * 2)) / 2.0
    return float(rng.randint(0, int(total)))


def _state(rng: random.Random) -> NodeState:
    roll = rng.random()
    if roll < 0.55:
        return NodeState.RUNNING
    if roll < 0.78:
        return NodeState.PENDING
    if roll < 0.88:
        return NodeState.DRAINING
    if roll < 0.95:
        return NodeState.DEAD
    return NodeState.TERMINATING


def _host_names(rng: random.Random, group: Group, index: int) -> list[str]:
    """The names of a replica's hosts in host order; often not in name order."""
    if group.num_of_hosts == 1:
        return [f"{group.name}-{index}"]
    suffixes = [f"h{h}" for h in range(group.num_of_hosts)]
    if rng.random() < 0.5:
        rng.shuffle(suffixes)
    return [f"{group.name}-r{index}-{x}" for x in suffixes]


def _replica_nodes(rng: random.Random, group: Group, index: int, features: Features) -> list[Node]:
    """One existing replica: its hosts usually share a state (a busy host may sit next to an idle
    one); sometimes each has its own."""
    state = _state(rng)
    mixed = features.mixed_replicas and group.num_of_hosts > 1 and rng.random() < 0.2
    replica = f"{group.name}-r{index}" if group.num_of_hosts > 1 else None
    booting = rng.random() < 0.5
    waits = (0, 5, 60, 300, 1000, 4000) if features.stuck_pending else (0, 5, 60, 300)
    pending_seconds = float(rng.choice(waits))
    idle = rng.choice(IDLE_CHOICES)
    out = []
    for h, name in enumerate(_host_names(rng, group, index)):
        capacity = host_capacity(group, h)
        here = _state(rng) if mixed and h else state
        if here is NodeState.RUNNING:
            available: dict[str, float] | None = None
            idle_seconds = idle
            if h > 0 and rng.random() < 0.3:
                idle_seconds = rng.choice(IDLE_CHOICES)
            if idle_seconds == 0 and rng.random() < 0.7:  # busy: something in use
                available = _free(rng, capacity)
            labels: dict[str, str] | None = None
            if rng.random() < 0.15:
                labels = {**group.labels, **_pick_labels(rng, 1)}
            if rng.random() < 0.1:  # a placement group already has bundles here
                labels = {
                    **(labels if labels is not None else group.labels),
                    f"_PG_{rng.getrandbits(64):016x}": "",
                }
            node = Node(name, group.name, here, replica, available, idle_seconds, labels=labels)
        elif here is NodeState.PENDING:
            node = Node(name, group.name, here, replica, pending_seconds=pending_seconds, booting=booting)
        elif here is NodeState.DRAINING and features.busy_draining and rng.random() < 0.5:
            node = Node(name, group.name, here, replica, available=_free(rng, capacity))
        else:
            node = Node(name=name, group=group.name, state=here, replica=replica)
        out.append(node)
    return out


def _resources(rng: random.Random, groups: tuple[Group, ...], head: Head) -> dict[str, float]:
    """A request shape, usually one that some host could hold (or almost)."""
    if rng.random() < 0.7:
        base = rng.choice(groups).resources if rng.random() < 0.85 or not head.resources else head.resources
        out: dict[str, float] = {}
        for k, v in base.items():
            if k == "memory":
                if rng.random() < 0.3:
                    out[k] = float(rng.choice((1, 2, 4))) * GI
                continue
            if k == "CPU" or rng.random() < 0.8:
                out[k] = rng.choice((0.5, 1.0, 1.0, 2.0, v, v))
        if out:
            return out
    shape = rng.random()
    if shape < 0.5:
        return {"CPU": rng.choice((0.5, 1.0, 2.0, 4.0, 32.0))}
    if shape < 0.7:
        return {"CPU": 1.0, "GPU": float(rng.choice((1, 2)))}
    if shape < 0.8:
        return {"custom": 1.0}
    if shape < 0.9:
        return {"TPU": 4.0}
    return {"CPU": 2.0, "memory": 4 * GI}


def _head_demand(rng: random.Random, groups: tuple[Group, ...]) -> dict[str, float] | None:
    """A task for a TPU slice's head host (``TPU-<type>-head``), if some group has one."""
    heads = [k for g in groups for k in g.resources if is_tpu_slice_head_resource(k)]
    if not heads or rng.random() < 0.5:
        return None
    return {rng.choice(heads): 1.0, **rng.choice(({"TPU": 4.0}, {"CPU": 1.0}, {}))}


def generate(rng: random.Random, features: Features = DEFAULT) -> Snapshot:
    names = ["alpha", "beta", "gamma", "delta"]
    groups = tuple(_group(rng, names[i], features) for i in range(rng.randint(1, 4)))
    head = _head(rng)
    known: list[Mapping[str, str]] = [g.labels for g in groups] + [head.labels]

    nodes: list[Node] = []
    for g in groups:
        count = rng.choice((0, 0, 1, 1, 2, 3))
        if g.max_replicas < UNLIMITED:
            count = min(count, g.max_replicas + (1 if rng.random() < 0.15 else 0))
        for i in range(count):
            nodes += _replica_nodes(rng, g, i, features)

    demands: dict[tuple[object, ...], Demand] = {}
    for _ in range(rng.choice((0, 1, 1, 2, 3, 4))):
        res = _head_demand(rng, groups) or _resources(rng, groups, head)
        primary: Selector = selector(rng, known) if rng.random() < 0.35 else ()
        fallbacks: tuple[Selector, ...] = ()
        if primary and rng.random() < 0.45:
            fallbacks = tuple(selector(rng, known) for _ in range(rng.choice((1, 1, 2))))
            fallbacks = tuple(f for f in fallbacks if f != primary)
        key = (tuple(sorted(res.items())), primary)
        if key not in demands:
            demands[key] = Demand(res, rng.choice((1, 1, 2, 3, 5, 10)), primary, fallbacks)

    gangs: dict[tuple[object, ...], Gang] = {}
    for _ in range(rng.choice((0, 0, 1, 1, 2))):
        strategy = rng.choice(list(Strategy))
        bundles = tuple(_resources(rng, groups, head) for _ in range(rng.choice((1, 2, 2, 3, 4))))
        bundle_selectors: tuple[Selector, ...] = ()
        if rng.random() < 0.35:
            shared = selector(rng, known)
            bundle_selectors = tuple(
                shared if rng.random() < 0.6 else (selector(rng, known) if rng.random() < 0.5 else ())
                for _ in bundles
            )
            if not any(bundle_selectors):
                bundle_selectors = ()
        gkey = (strategy, tuple(tuple(sorted(b.items())) for b in bundles))
        if gkey not in gangs:
            gangs[gkey] = Gang(strategy, bundles, rng.choice((1, 1, 1, 2)), bundle_selectors)

    constraints: dict[tuple[object, ...], Constraint] = {}
    if rng.random() < 0.3:
        for _ in range(rng.choice((1, 1, 2, 3))):
            res = _resources(rng, groups, head)
            sel: Selector = selector(rng, known) if rng.random() < 0.3 else ()
            ckey = (tuple(sorted(res.items())), sel)
            if ckey not in constraints:
                constraints[ckey] = Constraint(res, rng.choice((1, 1, 2, 4)), sel)

    min_hosts = sum(g.min_replicas * g.num_of_hosts for g in groups)
    max_workers: int | None = None
    if rng.random() < 0.2:  # never below the groups' minimums (Ray assumes so too)
        max_workers = min_hosts + rng.choice((0, 1, 2, 3, 5))
    options = Options(
        idle_timeout_seconds=rng.choice((60.0, 60.0, 30.0, 300.0, None)),
        max_workers=max_workers,
    )
    return Snapshot(
        groups=groups,
        nodes=tuple(nodes),
        demands=tuple(demands.values()),
        gangs=tuple(gangs.values()),
        constraints=tuple(constraints.values()),
        options=options,
        head=head,
    )


def case(seed: int, index: int, features: Features = DEFAULT) -> Snapshot:
    """Case ``index`` of run ``seed``: the same inputs always give the same case."""
    return generate(random.Random(f"{seed}:{index}"), features)
