"""rayscale's autoscaler under Kueue's elastic jobs, with Kueue's real manager (v0.17.0): a scale-up
whose Workload slice Kueue cannot admit is a quota refusal at once, not a slow launch.

An elastic RayCluster (``kueue.x-k8s.io/elastic-job``, ``enableInTreeAutoscaling``) in a queue of 3
CPUs: the head (1 CPU) is admitted and runs. A RayResourceRequest asks for 4 x {CPU: 1}; the
autoscaler raises the workers to 4, rayscale's controller makes their pods, and Kueue gates them
(``kueue.x-k8s.io/elastic-job``) behind a new slice it cannot admit (1 + 4 CPUs > 3). rayscale reads
the slice's ``QuotaReserved=False`` and fails the gated pods in its next round: the workers go back
to 0, ``QuotaExceeded`` (reason ``Kueue``) names the pod set and Kueue's words, the request's demand
is unmet with ``QUOTA``, no ``BackingOff``, and the head is never gated again. Without the signal the
gated pods would wait out ``maxNodeProvisionSeconds`` (900 s).
"""

from __future__ import annotations

from typing import Any

from rayscale.api.names import RAYRESOURCEREQUEST
from tests.support.builders import resource_request
from tests.support.kube import Kube
from tests.support.kueue import LONG, WAIT, Queues, make_cluster
from tests.support.operators import Operator
from tests.support.polling import eventually, holds
from tests.support.quota import quota_condition

ELASTIC = "kueue.x-k8s.io/elastic-job"
GROUP = "workers-group-0"


async def head_running(kube: Kube, name: str) -> bool:
    heads = [p for p in await kube.pods(name, live=True) if p.metadata.labels["ray.io/node-type"] == "head"]
    return len(heads) == 1 and heads[0].status.phase == "Running" and not heads[0].spec.scheduling_gates


async def test_a_scale_up_kueue_cannot_admit_is_refused_at_once(
    kube: Kube, autoscaling_operator: Operator, queues: Queues
) -> None:
    ns = kube.ns
    flavor = await queues.flavor(f"default-{ns}", {})
    cq = await queues.cluster_queue(f"default-{ns}", {flavor: {"cpu": "3"}})
    lq = await queues.local_queue("default", cq)
    body = make_cluster("foo", lq, head_cpu="1", worker_cpu="1")
    body["metadata"]["annotations"] = {ELASTIC: "true", "rayscale.io/gcs-address": "127.0.0.1:1"}
    body["spec"]["enableInTreeAutoscaling"] = True
    body["spec"]["workerGroupSpecs"][0].update(replicas=0, maxReplicas=5)
    await kube.create(body)
    await eventually(lambda: head_running(kube, "foo"), timeout=LONG, message="the head admitted and Running")

    request = resource_request("four", "foo", ({"CPU": 1}, 4))
    await kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(ns), request)
    refused = await eventually(
        lambda: quota_condition(kube, "foo", "True"), timeout=WAIT, message="QuotaExceeded True"
    )
    assert refused["reason"] == "Kueue"
    assert f"group {GROUP}: Kueue did not admit" in refused["message"]
    assert f"couldn't assign flavors to pod set {GROUP}" in refused["message"]
    await eventually(lambda: _workers(kube, 0), timeout=WAIT, message="the gated workers removed")
    assert await kube.events("BackingOff") == []
    said = [e.message for e in await kube.events("QuotaExceeded")]
    assert any(m.startswith(f"group {GROUP}: Kueue did not admit") for m in said), said
    unmet = await eventually(lambda: _unmet(kube), timeout=WAIT, message="the demand unmet with QUOTA")
    assert unmet[0]["reason"] == "QUOTA"
    await holds(lambda: _refused_still(kube), seconds=10, message="the group not tried again at once")


async def _workers(kube: Kube, count: int) -> bool:
    return len(await kube.workers("foo", live=True)) == count


async def _unmet(kube: Kube) -> list[Any]:
    auto = (await kube.get("foo")).get("status", {}).get("autoscaler") or {}
    return list(auto.get("unmetDemand") or [])


async def _refused_still(kube: Kube) -> bool:
    assert await head_running(kube, "foo"), "the head stopped running"
    specs = (await kube.get("foo"))["spec"]["workerGroupSpecs"]
    assert specs[0].get("replicas", 0) == 0, "the refused group grew again"
    return True
