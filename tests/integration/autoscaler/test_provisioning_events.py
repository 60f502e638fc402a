"""Node provisioners' Events on the local control plane: an unscheduled worker pod whose node is
being provisioned (cluster-autoscaler's ``TriggeredScaleUp`` Event, posted here as
cluster-autoscaler posts it) outlives the provisioning limit; one that nothing will provision
(``NotTriggerScaleUp``) fails over after the short grace, long before the provisioning limit.

The ``gpu`` group's pods ask for a node label no node has, so kube-scheduler leaves them Pending
(Unschedulable); a RayResourceRequest of two GPU bundles gives the group two pods; the cluster's
annotations set short limits. The cluster has no Ray (its GCS is unreachable): only pending pods
are judged.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from rayscale.api.names import RAYRESOURCEREQUEST
from tests.support.builders import BASIC as NAME
from tests.support.builders import cpu_and_gpu_cluster, gpu_request
from tests.support.kube import Kube
from tests.support.operators import Operator
from tests.support.polling import eventually
from tests.support.watching import versions

pytestmark = pytest.mark.integration
BAD = "gpu"
NOWHERE = {"rayscale.io/test-pool": "no-such-pool"}  # no node of hack/localk8s/nodes.yaml has this label


def cluster(**limits: str) -> dict[str, Any]:
    body = cpu_and_gpu_cluster()
    body["spec"]["workerGroupSpecs"][1]["template"]["spec"]["nodeSelector"] = NOWHERE
    body["metadata"]["annotations"].update(
        {f"rayscale.io/{k.replace('_', '-')}": v for k, v in limits.items()}
    )
    return body


async def _stuck(kube: Kube) -> list[Any]:
    """Both ``gpu-bad`` pods, once kube-scheduler has found each unschedulable, oldest first."""
    pods = await kube.workers(NAME, group=BAD, live=True)

    def refused(pod: Any) -> bool:
        return any(
            c.type == "PodScheduled" and c.reason == "Unschedulable" for c in pod.status.conditions or []
        )

    if len(pods) != 2 or not all(refused(p) for p in pods):
        return []
    return sorted(pods, key=lambda p: (p.metadata.creation_timestamp, p.metadata.name))


async def provisioner_says(kube: Kube, pod: Any, reason: str) -> None:
    """An Event on `pod` as cluster-autoscaler posts one."""
    now = datetime.now(UTC)
    body = {
        "metadata": {"name": f"{pod.metadata.name}.{uuid.uuid4().hex[:12]}", "namespace": kube.ns},
        "involvedObject": {
            "kind": "Pod", "apiVersion": "v1", "namespace": kube.ns,
            "name": pod.metadata.name, "uid": pod.metadata.uid,
        },
        "reason": reason,
        "message": f"pod {reason} (posted by the test as cluster-autoscaler would)",
        "type": "Normal",
        "source": {"component": "cluster-autoscaler"},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }  # fmt: skip
    await kube.core.create_namespaced_event(kube.ns, body)


def _removals(seen: list[dict[str, Any]]) -> list[list[str]]:
    """The ``workersToDelete`` of ``gpu-bad`` in each recorded RayCluster version that has one."""
    out = []
    for version in seen:
        for g in version["spec"]["workerGroupSpecs"]:
            listed = (g.get("scaleStrategy") or {}).get("workersToDelete") or []
            if g["groupName"] == BAD and listed:
                out.append(sorted(listed))
    return out


async def _start(kube: Kube, body: dict[str, Any]) -> list[Any]:
    await kube.create(body)
    await kube.objects.create_namespaced_custom_object(*RAYRESOURCEREQUEST.at(kube.ns), gpu_request(2))
    return await eventually(lambda: _stuck(kube), timeout=60, message=f"2 {BAD} pods Unschedulable")


async def _failed(kube: Kube) -> bool:
    return any(
        f"group {BAD}: 2 -> 1 replicas (LAUNCH_FAILED)" in e.message for e in await kube.events("ScaledDown")
    )


async def test_a_pod_whose_node_is_being_provisioned_outlives_the_provisioning_limit(
    kube: Kube, autoscaling_operator: Operator
) -> None:
    """Provisioning limit 8 s, grace off: the pod without a provisioner Event fails at 8 s; the older
    one, whose node cluster-autoscaler is bringing up, stays."""
    async with versions(kube, NAME) as seen:
        older, younger = await _start(
            kube, cluster(max_node_provision_seconds="8", unprovisioned_grace_seconds="600")
        )
        await provisioner_says(kube, older, "TriggeredScaleUp")
        await eventually(lambda: _failed(kube), timeout=60, message=f"one {BAD} pod LAUNCH_FAILED")
        assert _removals(seen)
        assert set(_removals(seen)[0]) == {younger.metadata.name}
        live = {p.metadata.name for p in await kube.workers(NAME, group=BAD, live=True)}
        assert older.metadata.name in live  # as old as the one that failed, or older
        assert all(older.metadata.name not in listed for listed in _removals(seen))


async def test_a_pod_nothing_will_provision_fails_over_after_the_grace(
    kube: Kube, autoscaling_operator: Operator
) -> None:
    """Provisioning limit 600 s, grace 10 s: the pod cluster-autoscaler will not scale up for
    (NotTriggerScaleUp) fails over within the test's minute; the one it scales up for stays."""
    async with versions(kube, NAME) as seen:
        kept, refused = await _start(
            kube, cluster(max_node_provision_seconds="600", unprovisioned_grace_seconds="10")
        )
        await provisioner_says(kube, kept, "TriggeredScaleUp")
        await provisioner_says(kube, refused, "NotTriggerScaleUp")
        await eventually(lambda: _failed(kube), timeout=60, message=f"the refused {BAD} pod LAUNCH_FAILED")
        assert set(_removals(seen)[0]) == {refused.metadata.name}
        assert kept.metadata.name in {p.metadata.name for p in await kube.workers(NAME, group=BAD, live=True)}
