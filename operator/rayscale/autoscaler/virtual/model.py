"""What the virtual-cluster layer reads and answers: plain frozen dataclasses, no I/O.

A virtual cluster (VC) is a set of worker hosts of one RayCluster. Membership is a pod label
(``rayscale.io/virtual-cluster``, plus ``rayscale.io/job-cluster`` for a job cluster inside a
divisible VC); the Ray side gets a custom resource per VC (and per job cluster) on each member node,
which is what work asks for to run inside.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rayscale.autoscaler.scheduling.model import Decision, Unmet

__all__ = [
    "PART_SEPARATOR",
    "VC_KEY",
    "JobCluster",
    "Member",
    "VcGroup",
    "VcPlan",
    "VirtualCluster",
]

# The scheduling label a host of a VC carries in the scheduler's view (never written anywhere):
# ``<vc>`` for undivided hosts, ``<vc>/<job>`` for a job cluster's. Hosts of no VC have none.
VC_KEY = "rayscale.io/virtual-cluster"
# A group's share inside a VC is scheduled as its own group named ``<group>@<vc>[/<job>]``.
# Group names are Kubernetes label values, which never contain '@'.
PART_SEPARATOR = "@"


@dataclass(frozen=True, slots=True)
class VcGroup:
    """One worker group's share of a VC: ``desired`` is the current target (hosts), kept within
    ``[min_nodes, max_nodes]`` by autoscaling; a new revision resets it to ``nodes``."""

    name: str
    nodes: int
    min_nodes: int
    max_nodes: int
    desired: int


@dataclass(frozen=True, slots=True)
class VirtualCluster:
    name: str
    groups: tuple[VcGroup, ...]
    divisible: bool = False
    removing: bool = False  # being deleted: no growth, members go back once idle

    def group(self, name: str) -> VcGroup | None:
        return next((g for g in self.groups if g.name == name), None)


@dataclass(frozen=True, slots=True)
class Member:
    """A pod's place: the VC, and the job cluster inside it (None: undivided)."""

    vc: str
    job: str | None = None

    @property
    def part(self) -> str:
        return self.vc if self.job is None else f"{self.vc}/{self.job}"


@dataclass(frozen=True, slots=True)
class JobCluster:
    """A job cluster inside a divisible VC: its hosts per group, and whether it is being destroyed
    (its job ended or nothing asks for it) with the reason it still stands."""

    vc: str
    name: str
    hosts: Mapping[str, int]
    destroying: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True)
class VcPlan:
    """The scheduler's decision in the RayCluster's own groups, and what changes for the VCs.

    ``assign``: pods whose membership changes (None: back to the RayCluster's unassigned hosts).
    ``desired``: the new target hosts per VC and group. ``unmet``: demand that asked for a VC.
    ``removed``: VCs being deleted that hold no host any more.
    """

    decision: Decision
    assign: Mapping[str, Member | None] = field(default_factory=dict)
    desired: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    jobs: tuple[JobCluster, ...] = ()
    unmet: Mapping[str, tuple[Unmet, ...]] = field(default_factory=dict)
    removed: frozenset[str] = frozenset()
