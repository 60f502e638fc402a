"""Refused writes back off per cluster, their Events are aggregated, and other clusters are unaffected.

A ResourceQuota of one pod lets the head of RayCluster `quota` in and refuses its two workers (403
exceeded quota), on the real API server. The operator (resync every 5 s) must retry the cluster
further and further apart and count the refusals in one Event, while RayCluster `healthy`, created
at the same moment in another namespace the same operator watches, gets its pods and Events at once.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from tests.support.builders import example
from tests.support.kube import Kube
from tests.support.operators import Operator, running
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
ATTEMPTS = 6  # nominal times 0, 1, 3, 7, 15, 31 s; at least 24.8 s with the 20% jitter


def two_workers(name: str) -> dict[str, Any]:
    body = example("raycluster-basic.yaml")
    body["metadata"]["name"] = name
    body["spec"]["workerGroupSpecs"][0].update(replicas=2, minReplicas=2, maxReplicas=2)
    return body


@pytest.fixture
def both(
    cluster: testcluster.ClusterHandle,
    namespace: str,
    other_namespace: str,
    raycluster_crd: None,
    request: pytest.FixtureRequest,
) -> Iterator[Operator]:
    op = Operator(cluster, namespace, extra=["--namespace", other_namespace])
    yield from running(op, request)


def failed_attempts(log: str, namespace: str, name: str) -> list[tuple[datetime, int, float]]:
    """(when, failures in a row, the wait announced) of each failed reconcile of the cluster."""
    line = re.compile(
        r"^(\S+ \S+) WARNING rayscale\.common\.workqueue: reconcile of RayCluster "
        + re.escape(f"{namespace}/{name}")
        + r" failed \((\d+) in a row\): .*; retrying in ([\d.]+)s$",
        re.MULTILINE,
    )
    return [
        (datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f"), int(m[2]), float(m[3])) for m in line.finditer(log)
    ]


async def test_refused_pod_creates_back_off_in_one_event_and_spare_another_cluster(
    api: client.ApiClient, namespace: str, other_namespace: str, both: Operator
) -> None:
    kube, other = Kube(api, namespace), Kube(api, other_namespace)
    quota = {"metadata": {"name": "one-pod"}, "spec": {"hard": {"pods": "1"}}}
    await kube.core.create_namespaced_resource_quota(namespace, quota)

    async def quota_active() -> bool:  # admission refuses every pod until the controller fills status
        found = await kube.core.read_namespaced_resource_quota("one-pod", namespace)
        return bool(found.status and found.status.hard)

    await eventually(quota_active, timeout=30, message="ResourceQuota status")

    started = time.monotonic()
    await kube.create(two_workers("quota"))
    await other.create(two_workers("healthy"))

    # The healthy cluster is served at once, whatever the other one does.
    await eventually(lambda: other.running_workers("healthy", 2), timeout=30, message="healthy's 2 workers")

    async def healthy_events() -> list[Any]:  # one Event names both workers
        workers = {p.metadata.name for p in await other.workers("healthy")}
        created = [e for e in await other.events("CreatedWorkerPod") if e.involved_object.name == "healthy"]
        told = " ".join(e.message for e in created)
        return created if len(workers) == 2 and all(name in told for name in workers) else []

    await eventually(healthy_events, timeout=30, message="healthy's CreatedWorkerPod Events")
    healthy_seconds = time.monotonic() - started

    # The refused cluster is retried further and further apart, however often it is marked.
    def enough() -> list[tuple[datetime, int, float]]:
        found = failed_attempts(both.log.read_text(errors="replace"), namespace, "quota")
        return found if len(found) >= ATTEMPTS else []

    attempts = await eventually(
        enough,
        timeout=150,
        interval=1,
        message=f"{ATTEMPTS} failed reconciles of quota",
    )
    times = [when for when, _, _ in attempts[:ATTEMPTS]]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    assert [n for _, n, _ in attempts[:ATTEMPTS]] == list(range(1, ATTEMPTS + 1)), attempts
    # A fixed 2 s retry (or the 5 s resync) would fit six attempts into 10 s; the backoff needs 24.8 s.
    assert (times[-1] - times[0]).total_seconds() >= 20, gaps
    assert gaps[-1] > 3 * gaps[0], gaps
    waits = [wait for _, _, wait in attempts[:ATTEMPTS]]
    assert all(later > earlier for earlier, later in itertools.pairwise(waits)), waits
    assert await kube.workers("quota") == []  # the quota let none in

    # Two refusals per attempt, counted in one Event instead of one Event each.
    async def counted() -> list[Any]:
        refused = [
            e for e in await kube.events("FailedToCreateWorkerPod") if e.involved_object.name == "quota"
        ]
        return refused if refused and max(e.count for e in refused) >= 2 * (ATTEMPTS - 1) else []

    refused = await eventually(counted, timeout=30, message="the refusals counted in one Event")
    assert len(refused) <= 2, [(e.metadata.name, e.count, e.message) for e in refused]
    top = max(refused, key=lambda e: e.count)
    assert "exceeded quota" in top.message
    assert top.last_timestamp > top.first_timestamp
    assert healthy_seconds < 30
