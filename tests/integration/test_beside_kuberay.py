"""rayscale's autoscaler beside KubeRay's real operator never makes two autoscalers.

KubeRay v1.6.2's operator (the migration test's fixture, built on first use) is the controller;
`rayscale run --mode autoscaler` runs beside it on the same namespace. The GCS is unreachable
(no Ray here), so rayscale scales for RayResourceRequests alone.

- ``inside``: enableInTreeAutoscaling: true and the opt-in annotation. KubeRay runs Ray's
  autoscaler in its head; rayscale refuses it (one AutoscalingRefused Warning Event) and its
  request's demand changes nothing.
- ``optin``: in-tree autoscaling off and the annotation. rayscale scales it for its request, and
  KubeRay's controller creates the pods rayscale asked for.

Then KubeRay's operator goes and `rayscale run --mode all` takes over: the head KubeRay made for
``inside`` still runs Ray's autoscaler, so rayscale refuses the cluster until that head is
deleted; the new head (rayscale's) has no sidecar, and rayscale scales the cluster. Back under
KubeRay's operator, a recreated head gets Ray's autoscaler again.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from rayscale.api.names import RAYRESOURCEREQUEST
from tests.support.builders import example, resource_request
from tests.support.kube import Kube
from tests.support.operators import AUTOSCALING_EXTRA, KubeRayOperator, Operator, beside
from tests.support.polling import eventually

OPT_IN = {"rayscale.io/autoscaler": "true", "rayscale.io/gcs-address": "127.0.0.1:1"}


def _cluster(name: str, *, in_tree: bool) -> dict[str, Any]:
    body = copy.deepcopy(example("raycluster-basic.yaml"))
    body["metadata"] = {"name": name, "annotations": dict(OPT_IN)}
    body["spec"]["enableInTreeAutoscaling"] = in_tree
    group = body["spec"]["workerGroupSpecs"][0]
    group.update({"replicas": 0, "minReplicas": 0, "maxReplicas": 4})
    return body


def _request(cluster: str, cpus: int) -> dict[str, Any]:
    return resource_request(f"{cluster}-cpus", cluster, ({"CPU": 1}, cpus))


async def _replicas(kube: Kube, name: str) -> int:
    return int((await kube.get(name))["spec"]["workerGroupSpecs"][0].get("replicas") or 0)


@pytest.mark.parametrize("kuberay", [""], ids=["v1.6-defaults"], indirect=True)
async def test_autoscaler_mode_beside_kuberays_operator_takes_only_opted_in_clusters(
    api: client.ApiClient, cluster: testcluster.ClusterHandle, namespace: str, kuberay: KubeRayOperator
) -> None:
    kube = Kube(api, namespace)  # kuberay (its binary) stands on raycluster_crd: every CRD established
    rayscale = Operator(cluster, namespace, mode="autoscaler", extra=AUTOSCALING_EXTRA)
    kuberay.start()
    rayscale.start()
    with beside(kuberay, rayscale):
        await kube.create(_cluster("inside", in_tree=True))
        await kube.create(_cluster("optin", in_tree=False))
        for name in ("inside", "optin"):
            await kube.objects.create_namespaced_custom_object(
                *RAYRESOURCEREQUEST.at(namespace), _request(name, 2)
            )

        # KubeRay runs Ray's autoscaler in the head of the in-tree cluster ...
        (head,) = await eventually(lambda: kube.pods("inside", group="headgroup"), timeout=60, message="head")
        assert "autoscaler" in [c.name for c in head.spec.containers]
        # ... so rayscale refuses it, once, and the opted-in cluster gets its workers from KubeRay.
        refused = await eventually(lambda: kube.events("AutoscalingRefused"), timeout=60, message="refusal")
        assert [e.involved_object.name for e in refused] == ["inside"]
        assert "enableInTreeAutoscaling is true" in refused[0].message
        await eventually(lambda: kube.running_workers("optin", 2), timeout=60, message="2 optin workers")
        assert await _replicas(kube, "optin") == 2
        assert await _replicas(kube, "inside") == 0, "rayscale scaled a cluster Ray's autoscaler owns"
        assert await kube.workers("inside") == []

    # Switch to rayscale alone (--mode all): the head KubeRay made still runs Ray's autoscaler, so
    # rayscale keeps off that cluster until the head is recreated without it.
    kuberay.stop()
    alone = Operator(cluster, namespace, mode="all", extra=AUTOSCALING_EXTRA)
    alone.start()
    with beside(kuberay, alone):

        async def sidecar_refusal() -> bool:
            return any(
                "runs Ray's own autoscaler" in e.message for e in await kube.events("AutoscalingRefused")
            )

        await eventually(
            sidecar_refusal, timeout=60, message="refused while Ray's autoscaler runs in the head"
        )
        assert await _replicas(kube, "inside") == 0
        await kube.core.delete_namespaced_pod(head.metadata.name, namespace)

        async def new_head() -> list[Any]:
            heads = await kube.pods("inside", group="headgroup", live=True)
            return [h for h in heads if h.metadata.name != head.metadata.name]

        (fresh,) = await eventually(new_head, timeout=60, message="a new head from rayscale")
        assert [c.name for c in fresh.spec.containers] == ["ray-head"]
        await eventually(
            lambda: kube.running_workers("inside", 2), timeout=60, message="rayscale scales it now"
        )

    # And back: KubeRay's operator again; the head rayscale made has no sidecar until recreated.
    kuberay.start()
    await kube.core.delete_namespaced_pod(fresh.metadata.name, namespace)

    async def kuberays_head() -> list[Any]:
        heads = await kube.pods("inside", group="headgroup", live=True)
        return [h for h in heads if h.metadata.name != fresh.metadata.name]

    (back,) = await eventually(kuberays_head, timeout=60, message="a new head from KubeRay")
    assert "autoscaler" in [c.name for c in back.spec.containers]
