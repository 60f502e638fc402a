"""Reading what node provisioners said about a cluster's unschedulable worker pods (the I/O of
provisioning.py).

Only when some worker pod of the cluster is unschedulable: one LIST of the namespace's Events per
provisioner reason (``involvedObject.kind=Pod,reason=<reason>``: cluster-autoscaler's
``TriggeredScaleUp`` and ``NotTriggerScaleUp``, Karpenter's ``Nominated``), side by side, filtered
to those pods. A round with no unschedulable pod costs nothing. When the Events cannot be read (no
permission to list Events, the API server failing), the round goes on without them (None): pods
then age from their creation, as before.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Sequence

from kubernetes_asyncio import client

from rayscale.autoscaler.provisioning import (
    PROVISIONER_REASONS,
    Provisioning,
    is_unschedulable,
    pod_provisioning,
)
from rayscale.common.pods import is_terminating, is_worker
from rayscale.common.types import Obj
from rayscale.kube import ops

__all__ = ["ProvisionEvents"]

log = logging.getLogger(__name__)


class ProvisionEvents:
    """The provisioner Events on unschedulable worker pods, read once per round that needs them."""

    def __init__(self, api: client.ApiClient | None) -> None:
        self.api = api  # None: no API server (unit tests of the loop): nothing can be read
        self._failing: set[str] = set()  # namespaces whose Events could not be read (logged once)

    async def read(self, namespace: str, pods: Sequence[Obj]) -> dict[str, Provisioning] | None:
        """Pod name -> what its provisioner said; {} when no worker pod is unschedulable; None when
        the Events could not be read."""
        waiting = [p for p in pods if is_worker(p) and not is_terminating(p) and is_unschedulable(p)]
        if not waiting:
            return {}
        if self.api is None:
            return None
        selectors = [f"involvedObject.kind=Pod,reason={reason}" for reason in PROVISIONER_REASONS]
        try:
            found = await asyncio.gather(*(ops.list_events(self.api, namespace, s) for s in selectors))
        except ops.KubeError as exc:
            if namespace not in self._failing:
                self._failing.add(namespace)
                log.warning("cannot read node provisioners' Events in %s: %s", namespace, exc)
            return None
        self._failing.discard(namespace)
        return pod_provisioning(itertools.chain.from_iterable(found), waiting)
