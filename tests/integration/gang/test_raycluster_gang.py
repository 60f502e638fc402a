"""A RayCluster that rayscale renders for ``--batch-scheduler scheduler-plugins`` is one gang of the
real gang scheduler (hack/gang): labelled ``ray.io/gang-scheduling-enabled``, it gets its PodGroup
(minMember: the head and every worker) and its pods go to ``scheduler-plugins-scheduler`` in that
PodGroup; with every pod needing a whole GPU Node and one Node too few, none of them is bound (not
the head and one worker), and all once a Node comes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hack.gang import local
from hack.localk8s import testcluster
from kubernetes_asyncio.client.exceptions import ApiException

from tests.support.builders import example
from tests.support.disruption_nodes import pin
from tests.support.gang_scheduler import GPU, WAIT, gpu_nodes, held_until_all_fit
from tests.support.kube import Kube, names
from tests.support.operators import Operator, running
from tests.support.polling import eventually

NAME = "raycluster-basic"
WORKERS = 2


@pytest.fixture
def scheduler_plugins(
    gang_scheduler: local.LocalGangScheduler,
    cluster: testcluster.ClusterHandle,
    namespace: str,
    raycluster_crd: None,
    request: pytest.FixtureRequest,
) -> Iterator[Operator]:
    """`rayscale run --mode controller --batch-scheduler scheduler-plugins` for the test's namespace,
    the gang scheduler running."""
    extra = ["--batch-scheduler", "scheduler-plugins"]
    yield from running(Operator(cluster, namespace, extra=extra), request)


def _gang_of_gpu_pods(namespace: str) -> dict[str, Any]:
    """examples/raycluster-basic.yaml as a gang: the head and `WORKERS` workers, each asking for one
    GPU on the test's Nodes."""
    body = example("raycluster-basic.yaml")
    body["metadata"]["labels"] = {"ray.io/gang-scheduling-enabled": "true"}
    (group,) = body["spec"]["workerGroupSpecs"]
    group["replicas"] = WORKERS
    for spec in (body["spec"]["headGroupSpec"], group):
        pin(spec, namespace)
        (container,) = spec["template"]["spec"]["containers"]
        for kind in ("requests", "limits"):
            container["resources"][kind][GPU] = "1"
    return body


@pytest.mark.usefixtures("scheduler_plugins")
async def test_a_raycluster_is_one_gang(
    kube: Kube, cluster: testcluster.ClusterHandle, namespace: str
) -> None:
    size = 1 + WORKERS
    with gpu_nodes(cluster, namespace, range(size - 1)) as nodes:
        await kube.create(_gang_of_gpu_pods(namespace))

        async def pod_group() -> dict[str, Any] | None:
            try:
                found: dict[str, Any] = await kube.objects.get_namespaced_custom_object(
                    local.API_GROUP, local.VERSION, namespace, local.PLURAL, NAME
                )
            except ApiException as exc:
                if exc.status == 404:
                    return None
                raise
            return found

        made = await eventually(pod_group, timeout=WAIT, message="the PodGroup")
        assert made["spec"]["minMember"] == size

        async def all_pods() -> list[Any] | None:
            pods = await kube.pods(NAME, live=True)
            return pods if len(pods) == size else None

        pods = await eventually(all_pods, timeout=WAIT, message=f"{size} pods")
        for pod in pods:
            assert pod.spec.scheduler_name == local.SCHEDULER_NAME
            assert pod.metadata.labels[local.POD_GROUP_LABEL] == NAME
        await held_until_all_fit(cluster, kube.core, namespace, sorted(names(pods)), nodes)
