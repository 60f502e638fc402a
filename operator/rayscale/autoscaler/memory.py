"""What the autoscaler keeps about each cluster from round to round: `ClusterMemory`, `Memories`.

Per cluster: each group's backoff, since when each group has been short of pods, since when each
running pod has had no Ray node, the pods whose drain was accepted, the drains asked for disruption
notices and the latest disruption plan, the GCS session last seen, which
GCS methods answered (UNIMPLEMENTED ones make the cluster incompatible), the recent launch failures,
the version of the last report to Ray and where its GCS was dialed; and what the operator serves
about the cluster (`Served`: replica lives, recent decisions, what the latest round saw, and what
marked the cluster since its last round). Plain data, no I/O; `Shared`: what the
parts of the autoscaler share.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kubernetes_asyncio import client

from rayscale.autoscaler.backoff import Backoff
from rayscale.autoscaler.compat import GcsSupport
from rayscale.autoscaler.config import AutoscalerConfig
from rayscale.autoscaler.history import DecisionHistory
from rayscale.autoscaler.lifecycle import Lives
from rayscale.autoscaler.ray_report import LaunchFailure
from rayscale.autoscaler.refusals import QuotaRefusal, Refused
from rayscale.autoscaler.spec_removals import Leaving
from rayscale.autoscaler.status import GcsHealth, UnmetKey
from rayscale.autoscaler.trust import Hold, Session
from rayscale.autoscaler.view import Observed
from rayscale.common.types import ClusterKey, Obj
from rayscale.disruption.notice import Notice
from rayscale.disruption.plan import AskedDrain, DisruptionPlan
from rayscale.kube.events import EventSink
from rayscale.metrics import Metrics
from rayscale.ray.address import GcsTarget
from rayscale.ray.model import AutoscalingState

if TYPE_CHECKING:  # gRPC is loaded when a cluster first needs a GCS connection
    from rayscale.ray.client import GcsClient

__all__ = ["ClusterMemory", "Memories", "Served", "Shared"]


@dataclasses.dataclass
class Served:
    """What the operator serves about one cluster (view.py), kept from round to round."""

    triggers: set[str] = dataclasses.field(default_factory=set)  # what marked it since its last round
    lives: Lives = dataclasses.field(default_factory=Lives)
    history: DecisionHistory = dataclasses.field(default_factory=DecisionHistory)
    observed: Observed | None = None  # the latest round


@dataclasses.dataclass
class ClusterMemory:
    """What the rounds keep about one cluster (`Memories`).

    `Autoscaler._forget` drops it when rayscale stops autoscaling the cluster, but for what must
    outlive that (`forgotten`): the refusal posted and the request statuses written (so that they
    are not posted or written again) and, while the cluster exists, its groups' backoff.
    """

    backoff: Backoff  # each group's backoff after launch failures (the loop's monotonic clock)
    # group -> until when it backs off (wall clock), for status.autoscaler and the view
    backoff_until: dict[str, datetime] = dataclasses.field(default_factory=dict)
    # group -> since when it has had replicas without pods (the provisioning clock of unborn replicas)
    short_since: dict[str, datetime] = dataclasses.field(default_factory=dict)
    # pod -> since when it has run without a Ray node (the boot clock of running pods)
    missing_since: dict[str, datetime] = dataclasses.field(default_factory=dict)
    draining: frozenset[str] = frozenset()  # pods whose drain was accepted, until their removal is written
    # pod -> the PREEMPTION drain asked of its Ray node for a disruption notice and accepted, while it exists
    asked: dict[str, AskedDrain] = dataclasses.field(default_factory=dict)
    disruption: DisruptionPlan | None = None  # the latest round's disruption plan
    # pod -> why the spec no longer wants it (a removed group, above maxReplicas), while it drains
    leaving: dict[str, Leaving] = dataclasses.field(default_factory=dict)
    removed_directly: frozenset[str] = frozenset()  # removed groups' pods it deleted, while they exist
    removal_problem: str | None = None  # why rayscale.io/removal-drain-seconds is read as unset
    # group -> a ResourceQuota's refusal of its pod create, until it ends (quota_check.py)
    quota_refusals: dict[str, QuotaRefusal] = dataclasses.field(default_factory=dict)
    # group -> when its refusing quota was last read (monotonic)
    quota_checked: dict[str, float] = dataclasses.field(default_factory=dict)
    blocked: dict[str, Refused] = dataclasses.field(default_factory=dict)  # the latest round's refused groups
    head_notice: tuple[str, str, datetime | None] | None = None  # the head's notice last posted
    session: Session | None = None  # the GCS session last seen
    back_at: float | None = None  # when the GCS last answered again after an outage (monotonic)
    hold: Hold | None = None  # the hold of the last round (logged once per reason)
    gcs: tuple[str, str | None, GcsClient] | None = None  # the GCS client: address, token, client
    gcs_health: GcsHealth | None = None  # whether the GCS answered, and when it last did
    target: GcsTarget | None = None  # where the GCS was dialed this round (None: no address)
    # the GcsAddressOverride condition last reported (None: none), once `override_reported`
    override: Obj | None = None
    override_reported: bool = False
    unreachable: bool = False  # the GCS was logged as unreachable
    warned: bool = False  # a GcsUnreachable Event was posted
    unmet: UnmetKey | None = None  # the unmet demand last posted as an Event
    support: GcsSupport | None = None  # which GCS methods answered
    compat: Obj | None = None  # the RayCompatible condition last reported
    refused: str | None = None  # the refusal last posted as an Event (outlives `_forget`)
    failures: tuple[LaunchFailure, ...] = ()  # recent launch failures (Ray's "Recent failures")
    report_version: int | None = None  # the version of the last report to Ray
    told: tuple[str, AutoscalingState, float] | None = None  # its session, content, when (monotonic)
    # request -> (its resourceVersion, the status patch written from it): the watch may not show
    # a write before the next round, which must not write (and post its Event) again (outlives `_forget`)
    written: dict[str, tuple[Any, dict[str, Any]]] = dataclasses.field(default_factory=dict)
    served: Served | None = None  # what view(), fleet() and history_scenario() serve
    # made by `forgotten` and not used by a round since: holds nothing but what outlives `_forget`,
    # so forgetting it again (every pod event of a cluster rayscale does not autoscale) keeps it
    dormant: bool = False
    # what the last full round read from Ray (poll.fingerprint) and when it ran (monotonic)
    seen: Hashable = None
    full_at: float | None = None
    settled: bool = False  # the last full round found nothing that time alone changes (poll.settled)

    def forgotten(self, clock: Callable[[], float], *, keep_backoff: bool) -> ClusterMemory:
        """What outlives `Autoscaler._forget`; the backoff only when `keep_backoff` (the cluster
        exists), else a fresh one on `clock`."""
        if keep_backoff:
            kept = ClusterMemory(self.backoff, backoff_until=self.backoff_until)
        else:
            kept = ClusterMemory(Backoff(clock))
        kept.refused, kept.written = self.refused, self.written
        kept.dormant = True
        return kept

    def client(self) -> GcsClient | None:
        """The GCS client of the cluster, None before one was dialed."""
        return None if self.gcs is None else self.gcs[2]

    def token(self) -> str | None:
        """The Ray auth token the GCS was dialed with (the raylets take it too)."""
        return None if self.gcs is None else self.gcs[1]


class Memories(dict[ClusterKey, ClusterMemory]):
    """Every cluster's memory, by key; `of` makes one on first use (backoff on `clock`)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__()
        self.clock = clock

    def of(self, key: ClusterKey) -> ClusterMemory:
        memory = self.get(key)
        if memory is None:
            memory = self[key] = ClusterMemory(Backoff(self.clock))
        return memory

    def served(self, key: ClusterKey) -> Served:
        memory = self.of(key)
        if memory.served is None:
            memory.served = Served()
        return memory.served

    def served_now(self, key: ClusterKey) -> Served | None:
        """What is served about `key`, None before its first round (or since it was forgotten)."""
        memory = self.get(key)
        return None if memory is None else memory.served


@dataclasses.dataclass(frozen=True)
class Shared:
    """What the autoscaler's parts (the round, the GCS link, the reporter) share."""

    api: client.ApiClient
    events: EventSink
    config: AutoscalerConfig
    memories: Memories
    metrics: Metrics
    pods: Callable[[ClusterKey], Sequence[Obj]]  # a cluster's pods as the watch shows them now
    virtual_clusters: Callable[[ClusterKey], Sequence[Obj]]  # its RayVirtualClusters
    clock: Callable[[], float]  # backoff and grace periods
    wall_clock: Callable[[], datetime]  # pod ages and the boot clocks (compared with pod timestamps)
    # node name -> its disruption notice (rayscale.disruption.nodes.NodeNotices; empty: no Node watch)
    node_notices: Mapping[str, Notice] = dataclasses.field(default_factory=dict)
