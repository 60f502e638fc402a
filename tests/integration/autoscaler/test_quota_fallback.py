"""Quota is a signal, not a timeout, on the local control plane: a group whose pods a ResourceQuota
refuses, or that a ``scaleGate`` holds, fails its launches at once and its demand moves to the
next group in the round that follows, not after the provisioning timeout (900 s by default) and
its backoff.

Two GPU groups can hold a ``{CPU: 1, GPU: 1}`` bundle. ``spot`` (1 CPU per pod: the bundle fills
it) is the one Ray's score picks; ``on-demand`` (4 CPU) is the fallback. ``spot``'s pods carry the
PriorityClass ``rayscale-test-spot``, and the namespace's ResourceQuota ``spot-quota``, scoped to
that class, allows no such pod: the API server refuses each create (403 ``exceeded quota``). The
cluster's provisioning timeout stays at its default (900 s), far longer than the test: only the
refusal can move the demand.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from kubernetes_asyncio import client

from rayscale.api.names import RAYRESOURCEREQUEST
from tests.support.builders import BASIC as NAME
from tests.support.builders import example, gpu_request
from tests.support.kube import Kube
from tests.support.operators import Operator
from tests.support.polling import eventually
from tests.support.quota import PRIORITY_CLASS, QUOTA, priority_class, quota_condition, spot_quota
from tests.support.watching import versions

pytestmark = pytest.mark.integration
SPOT, ON_DEMAND = "spot", "on-demand"
GATE = "kueue.k8s.io/quota-exceeded"


def gpu_group(name: str, cpu: str, memory: str) -> dict[str, Any]:
    group: dict[str, Any] = copy.deepcopy(example("raycluster-basic.yaml")["spec"]["workerGroupSpecs"][0])
    group.update({"groupName": name, "replicas": 0, "minReplicas": 0, "maxReplicas": 4})
    amounts = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": 1}
    group["template"]["spec"]["containers"][0]["resources"] = {"requests": amounts, "limits": amounts}
    return group


def spot_and_on_demand() -> dict[str, Any]:
    body = example("raycluster-basic.yaml")
    body["metadata"]["annotations"] = {"rayscale.io/gcs-address": "127.0.0.1:1"}  # no Ray
    body["spec"]["enableInTreeAutoscaling"] = True
    spot = gpu_group(SPOT, "1", "1Gi")
    spot["template"]["spec"]["priorityClassName"] = PRIORITY_CLASS
    body["spec"]["workerGroupSpecs"] = [spot, gpu_group(ON_DEMAND, "4", "8Gi")]
    return body


def request(count: int) -> dict[str, Any]:
    """`count` x {CPU: 1, GPU: 1}: a bundle that fills a ``spot`` pod's CPU, so Ray's score picks it."""
    body = gpu_request(count)
    body["spec"]["bundles"][0]["resources"] = {"CPU": 1, "GPU": 1}
    return body


def _groups(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{g["groupName"]: g for g in v["spec"]["workerGroupSpecs"]} for v in seen]


async def _messages(kube: Kube, reason: str) -> list[str]:
    return [e.message for e in await kube.events(reason)]


async def _quota_has_room(kube: Kube) -> bool:
    quota = await kube.core.read_namespaced_resource_quota(QUOTA, kube.ns)
    return bool(quota.status and quota.status.hard and quota.status.hard.get("pods") == "2")


async def test_quota_refused_group_falls_back_in_the_next_round(
    kube: Kube, autoscaling_operator: Operator, api: client.ApiClient
) -> None:
    await priority_class(api)
    await kube.core.create_namespaced_resource_quota(kube.ns, spot_quota(0))
    async with versions(kube, NAME) as seen:
        await kube.create(spot_and_on_demand())
        await kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(kube.ns), request(2))
        await eventually(
            lambda: any(v[SPOT].get("replicas") == 2 for v in _groups(seen)), timeout=60, message="spot -> 2"
        )
        asked = time.monotonic()
        await eventually(
            lambda: kube.running_workers(NAME, 2, group=ON_DEMAND), timeout=60, message="2 on-demand Running"
        )
        print(f"spot asked -> 2 on-demand Running: {time.monotonic() - asked:.1f}s")
        history = _groups(seen)
        moved = next(v for v in history if v[SPOT].get("replicas") == 0 and v[ON_DEMAND].get("replicas"))
        assert moved[ON_DEMAND]["replicas"] == 2  # the same patch moved the demand
        assert await kube.workers(NAME, group=SPOT) == [], "a spot pod was created past the quota"
        assert await kube.events("BackingOff") == [], "a quota refusal is no failed provisioning"
        refused = await eventually(
            lambda: _messages(kube, "QuotaExceeded"), timeout=30, message="a QuotaExceeded Event"
        )
        assert all(m.startswith(f"group {SPOT}: ResourceQuota {QUOTA} refused") for m in refused)
        on = await eventually(
            lambda: quota_condition(kube, NAME, "True"), timeout=30, message="QuotaExceeded True"
        )
        assert on["reason"] == "ResourceQuota"
        assert QUOTA in on["message"]

        # The quota grows: the refusal ends, the condition clears, and new work goes to spot again.
        await kube.core.patch_namespaced_resource_quota(QUOTA, kube.ns, {"spec": {"hard": {"pods": "2"}}})
        await eventually(lambda: _quota_has_room(kube), timeout=30, message="the quota raised")
        off = await eventually(
            lambda: quota_condition(kube, NAME, "False"), timeout=60, message="QuotaExceeded cleared"
        )
        assert off["reason"] == "QuotaAvailable"
        await kube.objects.patch_namespaced_custom_object(
            *RAYRESOURCEREQUEST.at(kube.ns), "reserve-gpus",
            [{"op": "replace", "path": "/spec/bundles/0/count", "value": 4}],
            _content_type="application/json-patch+json",
        )  # fmt: skip
        await eventually(
            lambda: kube.running_workers(NAME, 2, group=SPOT), timeout=60, message="2 spot pods Running"
        )
        assert len(await kube.workers(NAME, group=ON_DEMAND, live=True)) == 2


async def test_scale_gate_holds_a_group_and_rayscale_never_removes_it(
    kube: Kube, autoscaling_operator: Operator
) -> None:
    body = spot_and_on_demand()
    del body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["priorityClassName"]
    body["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"scaleGate": [{"name": GATE, "reason": "NoFit"}]}
    async with versions(kube, NAME) as seen:
        await kube.create(body)
        await kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(kube.ns), request(2))
        await eventually(
            lambda: kube.running_workers(NAME, 2, group=ON_DEMAND), timeout=60, message="2 on-demand Running"
        )
        assert all(v[SPOT].get("replicas", 0) == 0 for v in _groups(seen)), "the gated group grew"
        on = await eventually(
            lambda: quota_condition(kube, NAME, "True"), timeout=30, message="QuotaExceeded True"
        )
        assert (on["reason"], GATE in on["message"]) == ("ScaleGate", True)
        unmet = (await kube.get(NAME)).get("status", {}).get("autoscaler", {}).get("unmetDemand") or []
        assert unmet == []  # the fallback held it all

        # rayscale's own writes (replicas, workersToDelete) leave the gate alone.
        gates = [v[SPOT].get("scaleStrategy", {}).get("scaleGate") for v in _groups(seen)]
        assert all(g == [{"name": GATE, "reason": "NoFit"}] for g in gates), gates

        # The gate's owner removes it: the group grows again for new work.
        await kube.patch_json(
            NAME, [{"op": "remove", "path": "/spec/workerGroupSpecs/0/scaleStrategy/scaleGate"}]
        )
        await eventually(
            lambda: quota_condition(kube, NAME, "False"), timeout=60, message="QuotaExceeded cleared"
        )
        await kube.objects.patch_namespaced_custom_object(
            *RAYRESOURCEREQUEST.at(kube.ns), "reserve-gpus",
            [{"op": "replace", "path": "/spec/bundles/0/count", "value": 3}],
            _content_type="application/json-patch+json",
        )  # fmt: skip
        await eventually(
            lambda: kube.running_workers(NAME, 1, group=SPOT), timeout=60, message="1 spot pod Running"
        )
