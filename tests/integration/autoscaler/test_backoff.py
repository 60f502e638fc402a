"""Launch failures on the local control plane: a group whose pods no node takes is removed after the
provisioning timeout (LAUNCH_FAILED), backs off, and its demand moves to a group that schedules.

Two GPU groups can hold a ``{CPU: 1, GPU: 1}`` bundle. The scheduler scores a fresh host as Ray
does, by how fully the work uses it, so it picks ``gpu-bad`` (1 CPU, 1Gi per pod: CPU and GPU fully
used) over ``gpu-good`` (4 CPU, 8Gi) for both bundles. ``gpu-bad``'s pods ask for a node label no
node has, so kube-scheduler leaves them Pending (Unschedulable). The cluster's
``rayscale.io/max-node-provision-seconds: "5"`` makes them launch failures after 5 s; the backoff
is then 5 minutes, far longer than the test.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rayscale.api.names import RAYRESOURCEREQUEST
from tests.support.builders import BASIC as NAME
from tests.support.builders import example, gpu_request
from tests.support.kube import Kube, names
from tests.support.operators import Operator
from tests.support.polling import eventually
from tests.support.watching import versions

pytestmark = pytest.mark.integration
BAD, GOOD = "gpu-bad", "gpu-good"
NOWHERE = {"rayscale.io/test-pool": "no-such-pool"}  # no node of hack/localk8s/nodes.yaml has this label


def gpu_group(
    name: str, cpu: str, memory: str, node_selector: dict[str, str] | None = None
) -> dict[str, Any]:
    group: dict[str, Any] = copy.deepcopy(example("raycluster-basic.yaml")["spec"]["workerGroupSpecs"][0])
    group.update({"groupName": name, "replicas": 0, "minReplicas": 0, "maxReplicas": 4})
    amounts = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": 1}
    group["template"]["spec"]["containers"][0]["resources"] = {"requests": amounts, "limits": amounts}
    if node_selector:
        group["template"]["spec"]["nodeSelector"] = node_selector
    return group


def two_gpu_groups() -> dict[str, Any]:
    body = example("raycluster-basic.yaml")
    body["metadata"]["annotations"] = {
        "rayscale.io/gcs-address": "127.0.0.1:1",  # no Ray: the GCS is unreachable
        "rayscale.io/max-node-provision-seconds": "5",
    }
    body["spec"]["enableInTreeAutoscaling"] = True
    body["spec"]["workerGroupSpecs"] = [
        gpu_group(BAD, "1", "1Gi", NOWHERE),
        gpu_group(GOOD, "4", "8Gi"),
    ]
    return body


def request(count: int) -> dict[str, Any]:
    """`count` x {CPU: 1, GPU: 1}: a bundle that fills a ``gpu-bad`` pod's CPU, so Ray's score picks it."""
    body = gpu_request(count)
    body["spec"]["bundles"][0]["resources"] = {"CPU": 1, "GPU": 1}
    return body


def _groups(versions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each recorded RayCluster version as {groupName: worker group spec}."""
    return [{g["groupName"]: g for g in v["spec"]["workerGroupSpecs"]} for v in versions]


async def _replicas(kube: Kube) -> dict[str, int]:
    specs = (await kube.get(NAME))["spec"]["workerGroupSpecs"]
    return {g["groupName"]: g.get("replicas", 0) for g in specs}


async def _phase(kube: Kube) -> str:
    body = await kube.objects.get_namespaced_custom_object(*RAYRESOURCEREQUEST.at(kube.ns), "reserve-gpus")
    return str((body.get("status") or {}).get("phase"))


async def _unschedulable(kube: Kube, count: int) -> list[Any]:
    """The live `gpu-bad` pods when exactly `count` exist, all Pending and refused by kube-scheduler."""
    pods = await kube.workers(NAME, group=BAD, live=True)

    def refused(pod: Any) -> bool:
        conditions = pod.status.conditions or []
        return any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conditions)

    ok = len(pods) == count and all(p.status.phase == "Pending" and refused(p) for p in pods)
    return pods if ok else []


async def test_unschedulable_group_backs_off_and_its_demand_moves_to_the_fallback(
    kube: Kube,
    autoscaling_operator: Operator,
) -> None:
    async with versions(kube, NAME) as seen:
        await kube.create(two_gpu_groups())
        await kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(kube.ns), request(2))

        # The group the bundles fill is chosen first; kube-scheduler finds no node for its pods.
        await eventually(
            lambda: any(v[BAD].get("replicas") == 2 for v in _groups(seen)), timeout=60, message=f"{BAD} -> 2"
        )
        stuck = names(
            await eventually(
                lambda: _unschedulable(kube, 2), timeout=60, message=f"2 {BAD} pods Unschedulable"
            )
        )
        assert await kube.workers(NAME, group=GOOD, live=True) == []

        # After 5 s pending: removed as launch failures, and the bundles go to the fallback group.
        await eventually(
            lambda: _backing_off(kube), timeout=60, message=f"a Warning BackingOff Event naming {BAD}"
        )

        # Both stuck pods go (in one patch, or two when their clocks straddle a second: the
        # unschedulable time has second precision), each patch moving its share of the demand.
        def removed() -> set[str] | None:
            lists = [v[BAD].get("scaleStrategy", {}).get("workersToDelete") or [] for v in _groups(seen)]
            gone = set().union(*map(set, lists))
            return gone if gone == stuck else None

        await eventually(removed, timeout=60, message=f"both {BAD} pods in workersToDelete")
        for version in _groups(seen):
            listed = version[BAD].get("scaleStrategy", {}).get("workersToDelete") or []
            if listed:  # the same patch moved the demand of the replicas it removed
                assert version[BAD]["replicas"] + version[GOOD]["replicas"] == 2, version
        scaled_down = [e.message for e in await kube.events("ScaledDown")]
        assert scaled_down
        assert all(m.startswith(f"group {BAD}: ") and m.endswith("(LAUNCH_FAILED)") for m in scaled_down)

        await eventually(
            lambda: kube.running_workers(NAME, 2, group=GOOD), timeout=60, message=f"2 {GOOD} pods Running"
        )
        await eventually(lambda: _gone(kube, BAD), timeout=60, message=f"the {BAD} pods deleted")
        await eventually(lambda: _is(kube, "Satisfied"), timeout=60, message="the request Satisfied")

        # More demand while gpu-bad backs off: gpu-bad would be preferred, yet gpu-good takes it.
        await kube.objects.patch_namespaced_custom_object(
            *RAYRESOURCEREQUEST.at(kube.ns), "reserve-gpus",
            [{"op": "replace", "path": "/spec/bundles/0/count", "value": 4}],
            _content_type="application/json-patch+json",
        )  # fmt: skip
        await eventually(
            lambda: kube.running_workers(NAME, 4, group=GOOD), timeout=60, message=f"4 {GOOD} pods Running"
        )
        await eventually(lambda: _is(kube, "Satisfied"), timeout=60, message="the request Satisfied again")
        assert await _replicas(kube) == {BAD: 0, GOOD: 4}
        history = _groups(seen)
        listed = [bool(v[BAD].get("scaleStrategy", {}).get("workersToDelete")) for v in history]
        first = listed.index(True)
        after = [v[BAD].get("replicas", 0) for v in history[first:]]
        assert after == sorted(after, reverse=True), f"{BAD} scaled up again during its backoff: {after}"
        assert after[-1] == 0
        assert len(await kube.events("BackingOff")) == 1


async def _backing_off(kube: Kube) -> bool:
    events = await kube.events("BackingOff")
    return any(e.type == "Warning" and f"group {BAD}:" in e.message for e in events)


async def _gone(kube: Kube, group: str) -> bool:
    return await kube.workers(NAME, group=group) == []


async def _is(kube: Kube, phase: str) -> bool:
    return await _phase(kube) == phase


async def test_pods_refused_at_creation_back_off_like_unscheduled_ones(
    kube: Kube,
    autoscaling_operator: Operator,
) -> None:
    """``gpu-bad``'s pods name a PriorityClass that does not exist, so the API server refuses to create
    them (as a ResourceQuota or an admission webhook would): its replicas never get pods, fail to
    launch after the provisioning timeout, and the demand moves to ``gpu-good``."""
    body = two_gpu_groups()
    bad = body["spec"]["workerGroupSpecs"][0]
    del bad["template"]["spec"]["nodeSelector"]
    bad["template"]["spec"]["priorityClassName"] = "rayscale-test-no-such-priority-class"
    async with versions(kube, NAME) as seen:
        await kube.create(body)
        await kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(kube.ns), request(2))
        await eventually(
            lambda: any(v[BAD].get("replicas") == 2 for v in _groups(seen)), timeout=60, message=f"{BAD} -> 2"
        )
        await eventually(
            lambda: _backing_off(kube), timeout=60, message=f"a Warning BackingOff Event naming {BAD}"
        )
        history = _groups(seen)
        removal = next(v for v in history if v[BAD].get("replicas") == 0 and v[GOOD].get("replicas"))
        assert removal[GOOD]["replicas"] == 2  # the same patch moved the demand
        assert not removal[BAD].get("scaleStrategy", {}).get("workersToDelete"), "no pod to name"
        assert f"group {BAD}: 2 -> 0 replicas (LAUNCH_FAILED)" in [
            e.message for e in await kube.events("ScaledDown")
        ]
        assert await kube.workers(NAME, group=BAD) == [], f"a {BAD} pod was created"
        await eventually(
            lambda: kube.running_workers(NAME, 2, group=GOOD), timeout=60, message=f"2 {GOOD} pods Running"
        )
        await eventually(lambda: _is(kube, "Satisfied"), timeout=60, message="the request Satisfied")
        assert await _replicas(kube) == {BAD: 0, GOOD: 2}
