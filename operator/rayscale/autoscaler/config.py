"""`AutoscalerConfig`: the autoscaler's flags, as the loop and its parts read them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from rayscale.autoscaler.lifecycle import SLOW_START_SECONDS
from rayscale.autoscaler.status import REFRESH_SECONDS
from rayscale.autoscaler.trust import DEFAULT_GRACE_SECONDS
from rayscale.cluster.limits import DEFAULT_MAX_PODS

__all__ = [
    "DEFAULT_AUTOSCALER_CONCURRENCY",
    "DEFAULT_GCS_POLL_SECONDS",
    "STATUS_PACE_SECONDS",
    "AutoscalerConfig",
]

# --autoscaler-concurrency: rounds in flight. A round mostly waits for its cluster's GCS; at one read a
# second per cluster, N clusters whose GCS answers in L seconds keep N * L rounds in flight.
DEFAULT_AUTOSCALER_CONCURRENCY = 64
# status.autoscaler of a cluster is written at most this often (status_writer.py): at 1,000 clusters
# whose replicas move every few seconds, a write per move was 30 whole-RayCluster writes a second.
STATUS_PACE_SECONDS = 5.0
DEFAULT_GCS_POLL_SECONDS = 1.0  # --gcs-poll-interval: read Ray's demand this often between rounds (poll.py)
DEFAULT_GCS_POLL_BUDGET = 200.0  # --gcs-poll-budget: those reads per second over all clusters, at most


@dataclasses.dataclass(frozen=True)
class AutoscalerConfig:
    interval: float = 5.0
    gcs_poll_interval: float = DEFAULT_GCS_POLL_SECONDS  # 0: no reads between full rounds
    gcs_poll_budget: float = DEFAULT_GCS_POLL_BUDGET  # 0: no budget
    concurrency: int = DEFAULT_AUTOSCALER_CONCURRENCY
    gcs_timeout: float = 2.0
    gcs_retries: int = 1
    max_node_provision_seconds: float = 900.0
    max_node_boot_seconds: float = 3600.0
    unprovisioned_grace_seconds: float = 120.0  # unschedulable, no node being provisioned: fails then
    head_restart_grace_seconds: float = DEFAULT_GRACE_SECONDS  # no removals this long after a session change
    status_refresh_seconds: float = REFRESH_SECONDS  # rewrite an unchanged status.autoscaler this often
    status_pace_seconds: float = STATUS_PACE_SECONDS  # write a cluster's status.autoscaler at most this often
    beside_kuberay: bool = False  # --mode autoscaler: only opted-in clusters (eligibility.py)
    # --mode controller: no cluster is autoscaled; only the disruption notices of the ones without
    # in-tree autoscaling are acted on (notices_only.py)
    notices_only: bool = False
    max_pods: int = DEFAULT_MAX_PODS  # --max-pods-per-cluster: never more worker pods than this
    # --allow-gcs-address-override: follow rayscale.io/gcs-address (and send the token there)
    allow_gcs_address_override: bool = False
    slow_start_seconds: float = SLOW_START_SECONDS  # a replica starting longer: ReplicaSlowToStart
    # --cluster-selector: is a RayCluster read fresh from the API server still this operator's? (its
    # labels may have moved it to another shard since the watch delivered it)
    owns: Callable[[Mapping[str, Any]], bool] = lambda _: True
