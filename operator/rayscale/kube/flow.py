"""Whose work a task does for the API client: its flow.

The Event recorder's workers run as the `EVENTS` flow, which the API client gives a token bucket of
its own (`rayscale.kube.client`). Every other flow shares the main bucket, which serves the flows
waiting for a token in turn (`rayscale.kube.fairbucket`): the controller's reconcile of a
RayCluster runs as that cluster's flow (`cluster_flow`), the rest as the ``None`` flow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator
from contextvars import ContextVar

__all__ = ["EVENTS", "cluster_flow", "current", "working_for"]

#: The flow of the Event recorder's writes.
EVENTS = "rayscale.events"


def cluster_flow(key: tuple[str, str]) -> Hashable:
    """The flow of the work for the RayCluster `key` (namespace, name)."""
    return ("raycluster", *key)


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
