"""A quota refusal with a real Ray: `rayscale run --mode all` on the local control plane, the e2e
Ray bridge (a real Ray head, a real ``ray start`` worker for each Running worker pod) and a Ray
driver whose task needs a worker.

Two groups of 1-CPU workers: ``spot`` (``priority: 10``, so Ray's rules pick it first) and
``on-demand``. ``spot``'s pods name a PriorityClass that the namespace's ResourceQuota allows no
pod of. The task's demand goes to ``spot``; the API server refuses the pod; in the next round
the demand is on ``on-demand``, whose worker joins Ray and runs the task to its end (0 tasks
failed), while ``maxNodeProvisionSeconds`` (900 s) is still far off. Ray's own autoscaler would
wait 60 minutes before trying another group.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.harness import NAME, group, raycluster
from e2e.raybridge.bridge import RayBridge
from e2e.raybridge.driver import RayDriver
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from tests.support.kube import Kube, names
from tests.support.operators import Operator
from tests.support.polling import eventually
from tests.support.quota import PRIORITY_CLASS, QUOTA, priority_class, quota_condition, spot_quota
from tests.support.ray_tasks import bridge_for

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray 2.60 (the dev extra)"),
    pytest.mark.timeout(360),
]

START = 120.0  # a worker pod Running with its Ray node, on a busy 2-core machine
SETTLE = 60.0  # rayscale's rounds and the controller's work after a change


@pytest.fixture
def bridge(cluster: testcluster.ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[RayBridge]:
    yield from bridge_for(cluster.kubeconfig, namespace, NAME, tmp_path / "ray")


@pytest.fixture
async def driver(
    bridge: RayBridge, autoscaling_operator: Operator, tmp_path: Path
) -> AsyncIterator[RayDriver]:
    async with RayDriver.start(bridge.gcs_address, tmp_path / "driver.log") as ray:
        yield ray
        (tmp_path / "release").touch()  # a task still waiting ends, so the driver exits cleanly


def groups() -> list[dict[str, Any]]:
    spot, on_demand = group("spot", max_replicas=2), group("on-demand", max_replicas=2)
    spot["priority"] = 10
    spot["template"]["spec"]["priorityClassName"] = PRIORITY_CLASS
    return [spot, on_demand]


async def test_a_task_whose_preferred_group_is_out_of_quota_runs_on_the_fallback(
    api: client.ApiClient, namespace: str, bridge: RayBridge, driver: RayDriver, tmp_path: Path
) -> None:
    kube = Kube(api, namespace)
    await priority_class(api)
    await kube.core.create_namespaced_resource_quota(namespace, spot_quota(0))
    await kube.create(raycluster(bridge.gcs_address, groups(), idle_timeout=600))
    marker = tmp_path / "release"
    started = time.monotonic()
    await driver.call("task", name="t", marker=str(marker), num_cpus=1)

    refused = await eventually(
        lambda: _events(kube, "QuotaExceeded"), timeout=START, message="the spot launch refused"
    )
    assert refused[0].message.startswith(f"group spot: ResourceQuota {QUOTA} refused its pods")
    ran = Path(str(marker) + ".started")
    await eventually(ran.exists, timeout=START, message="the task started on a worker")
    print(f"task submitted -> running on the fallback: {time.monotonic() - started:.1f}s")
    workers = await kube.workers(NAME, live=True)
    assert {p.metadata.labels["ray.io/group"] for p in workers} == {"on-demand"}
    assert names(workers) <= set(bridge.workers())
    said = await eventually(
        lambda: quota_condition(kube, NAME, "True"), timeout=SETTLE, message="QuotaExceeded True"
    )
    assert said["reason"] == "ResourceQuota"
    assert await _events(kube, "BackingOff") == []

    marker.touch()
    await eventually(lambda: _done(driver), timeout=SETTLE, message="the task done, 0 failed")


async def _events(kube: Kube, reason: str) -> list[Any]:
    return [e for e in await kube.events(reason) if e.involved_object.name == NAME]


async def _done(driver: RayDriver) -> bool:
    outcome: dict[str, Any] = await driver.call("task_outcome", name="t")
    assert outcome["state"] != "failed", outcome
    return bool(outcome["state"] == "done")
