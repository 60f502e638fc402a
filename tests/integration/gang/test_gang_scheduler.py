"""The gang scheduler of the test bed (hack/gang: scheduler-plugins' Coscheduling, a real
kube-scheduler beside the default one) admits a gang all or nothing, with plain pods and a PodGroup
the test makes: `N` pods each needing a whole GPU Node (one GPU each, kwok Nodes of the test's own).

- With `N` - 1 Nodes, a PodGroup of minMember `N` gets 0 pods bound (not `N` - 1) while the
  scheduler keeps trying, for longer than Coscheduling holds the members that fit and than the
  scheduler waits before it tries them again; one more Node, and all `N` are bound, each on a Node of
  its own (at the scheduler's next try: a new Node does not wake members Coscheduling rejected).
- The contrast, so the first can fail: the same pods without a PodGroup, to the default scheduler or
  to the gang scheduler, get `N` - 1 bound on the same `N` - 1 Nodes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hack.gang import local
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from tests.support.gang_scheduler import WAIT, bound, gpu_nodes, gpu_pod, held_until_all_fit, tried
from tests.support.polling import eventually

N = 3
GANG = "gang"


@pytest.mark.parametrize("scheduler", ["default-scheduler", local.SCHEDULER_NAME])
async def test_without_a_pod_group_each_pod_that_fits_is_bound(
    gang_scheduler: local.LocalGangScheduler,
    cluster: testcluster.ClusterHandle,
    api: client.ApiClient,
    namespace: str,
    scheduler: str,
) -> None:
    core: Any = client.CoreV1Api(api)
    with gpu_nodes(cluster, namespace, range(N - 1)) as nodes:
        for i in range(N):
            await core.create_namespaced_pod(namespace, gpu_pod(f"pod-{i}", namespace, scheduler=scheduler))

        async def all_but_one() -> list[str] | None:
            names = await bound(core, namespace)
            assert len(names) < N, f"{N} pods bound on {N - 1} one-GPU Nodes: {names}"
            return names if len(names) == N - 1 else None

        await eventually(all_but_one, timeout=WAIT, message=f"{N - 1} of {N} pods bound on {nodes}")
        await eventually(
            lambda: tried(core, namespace), timeout=WAIT, message="the pod that fits nowhere tried"
        )


async def test_a_gang_is_bound_all_or_nothing(
    gang_scheduler: local.LocalGangScheduler,
    cluster: testcluster.ClusterHandle,
    api: client.ApiClient,
    namespace: str,
) -> None:
    core: Any = client.CoreV1Api(api)
    objects: Any = client.CustomObjectsApi(api)
    with gpu_nodes(cluster, namespace, range(N - 1)) as nodes:
        group = local.pod_group(GANG, namespace, N)
        await objects.create_namespaced_custom_object(
            local.API_GROUP, local.VERSION, namespace, local.PLURAL, group
        )
        members = [f"member-{i}" for i in range(N)]
        for name in members:
            pod = gpu_pod(name, namespace, scheduler=local.SCHEDULER_NAME, pod_group=GANG)
            await core.create_namespaced_pod(namespace, pod)
        await held_until_all_fit(cluster, core, namespace, members, nodes)
