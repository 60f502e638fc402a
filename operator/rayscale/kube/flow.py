"""Whose work a task does for the API client: its flow.

The Event recorder's workers run as the `EVENTS` flow, which the API client gives a token bucket of
its own (`rayscale.kube.client`). Every other flow shares the main bucket, which serves the flows
waiting for a token in turn (`rayscale.kube.fairbucket`): the controller's reconcile of a
RayCluster and its autoscaling round run as that cluster's flow (`cluster_flow`), the writes that
only report (``status.autoscaler``) as its report flow (`report_flow`, served after every other
flow's waiting requests, see `is_report`), the reconcile of a RayJob or a RayCronJob as that
object's flow (`job_flow`), the rest as the ``None`` flow. A flow per object: all RayJobs in one
flow would have the most requests waiting and be served last, so a running job's status write
would wait behind every other cluster's creates. A RayJob status write that tells a new job or
deployment status (RUNNING, SUCCEEDED, Complete: what users, scripts and queues wait on, a few in
each job's life) is a transition flow (`transition_flow`), served before every other flow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator
from contextvars import ContextVar

__all__ = [
    "EVENTS",
    "cluster_flow",
    "current",
    "is_report",
    "is_transition",
    "job_flow",
    "kind_of",
    "report_flow",
    "transition_flow",
    "working_for",
]

#: The flow of the Event recorder's writes.
EVENTS = "rayscale.events"


def cluster_flow(key: tuple[str, str]) -> Hashable:
    """The flow of the work for the RayCluster `key` (namespace, name)."""
    return ("raycluster", *key)


def job_flow(kind: str, key: tuple[str, str]) -> Hashable:
    """The flow of the reconcile of the `kind` ("rayjob", "raycronjob") object `key`."""
    return (kind, *key)


TRANSITION = "rayscale.transition"


def transition_flow(kind: str, key: tuple[str, str]) -> Hashable:
    """The flow of the status write that tells the `kind` object `key`'s new state."""
    return (TRANSITION, kind, *key)


def is_transition(flow: Hashable) -> bool:
    """Whether `flow` tells a state change: its requests go before every other flow's."""
    return isinstance(flow, tuple) and len(flow) > 0 and flow[0] == TRANSITION


REPORT = "rayscale.report"


def report_flow(key: tuple[str, str]) -> Hashable:
    """The flow of the writes that only report on the RayCluster `key` (its ``status.autoscaler``)."""
    return (REPORT, *key)


def is_report(flow: Hashable) -> bool:
    """Whether `flow` only reports: its requests wait while requests of other flows do."""
    return isinstance(flow, tuple) and len(flow) > 0 and flow[0] == REPORT


def kind_of(flow: Hashable) -> str:
    """The kind of `flow`, as the metrics label it: cluster, report, transition, events, rayjob,
    raycronjob or other."""
    if flow == EVENTS:
        return "events"
    if is_report(flow):
        return "report"
    if is_transition(flow):
        return "transition"
    if isinstance(flow, tuple) and flow[:1] in (("rayjob",), ("raycronjob",)):
        return str(flow[0])
    return "cluster" if isinstance(flow, tuple) and flow[:1] == ("raycluster",) else "other"


_FLOW: ContextVar[Hashable] = ContextVar("rayscale_flow", default=None)


def current() -> Hashable:
    """The flow of the running task (None: no flow named)."""
    return _FLOW.get()


@contextlib.contextmanager
def working_for(key: Hashable) -> Iterator[None]:
    """Run the block, and every task it starts, as flow `key`."""
    token = _FLOW.set(key)
    try:
        yield
    finally:
        _FLOW.reset(token)
