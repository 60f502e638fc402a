"""A TPU slice's host cordoned, with a real Ray: `rayscale run --mode all` on the local control
plane, the e2e Ray bridge (a real ``ray start`` worker for each Running worker pod: both hosts of
a multi-host replica are real Ray nodes) and Ray tasks that block until the test lets them end.

The worker group ``tpu`` is a 2-host slice (``numOfHosts: 2``, each host 1 CPU and 4
``google.com/tpu``, which rayscale's ``ray start`` announces as Ray's ``TPU``; ``minReplicas: 1``,
``maxReplicas: 2``) on four kwok Nodes of the test's own with 4 TPU chips each, so each host has
a Node. A task needing 4 TPUs runs on each host. Then the Node of ONE host is cordoned:

- both hosts' Ray nodes are asked to drain, in one ``DisruptionDrain`` Event naming the replica;
- a replacement slice (2 new pods) is asked for at once, while the old hosts still run: the
  leaving replica no longer counts towards ``minReplicas``;
- the replica stays whole while any host works: the task on the cordoned host ends first, and
  neither host goes while the other's task runs;
- once both tasks ended (on their own hosts: 0 tasks failed, none run again), both old pods are
  deleted in the same round (one ``DisruptionDelete`` naming both), never one host alone;
- the new slice's two hosts run in Ray, on other Nodes.

Nothing sleeps: every wait polls with a deadline, and what must not happen is watched for (`holds`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.harness import NAME, group, raycluster
from e2e.raybridge.bridge import RayBridge
from e2e.raybridge.driver import RayDriver
from hack.localk8s import testcluster

from rayscale.common import labels as L
from rayscale.ray.client import GcsClient
from rayscale.ray.model import NodeStatus
from tests.support.disruption_nodes import own_nodes, pin
from tests.support.kube import Kube, names
from tests.support.polling import eventually, holds
from tests.support.ray_tasks import Tasks, bridge_for, cluster_events, in_ray

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray 2.60 (the dev extra)"),
    pytest.mark.timeout(480),
]

GROUP = "tpu"
TPU = 4  # chips a host asks for, and a Node has
START = 150.0  # two worker pods Running with their Ray nodes, on a busy 2-core machine
SETTLE = 60.0


@pytest.fixture
def nodes(cluster: testcluster.ClusterHandle, namespace: str) -> Iterator[list[str]]:
    yield from own_nodes(cluster, namespace, 4, tpu=TPU)


@pytest.fixture
def bridge(cluster: testcluster.ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[RayBridge]:
    yield from bridge_for(cluster.kubeconfig, namespace, NAME, tmp_path / "ray")


def slice_group(namespace: str) -> dict[str, Any]:
    spec = group(GROUP, replicas=1, min_replicas=1, max_replicas=2, num_cpus=1, hosts=2)
    for kind in ("requests", "limits"):
        spec["template"]["spec"]["containers"][0]["resources"][kind]["google.com/tpu"] = TPU
    return dict(pin(spec, namespace))


@pytest.mark.usefixtures("autoscaling_operator")
async def test_a_cordoned_tpu_host_drains_its_whole_slice_which_is_replaced_at_once_and_goes_whole(
    kube: Kube, nodes: list[str], bridge: RayBridge, tmp_path: Path
) -> None:
    await kube.create(raycluster(bridge.gcs_address, [slice_group(kube.ns)], idle_timeout=600))
    hosts = await eventually(lambda: in_ray(kube, bridge, NAME, 2), timeout=START, message="the slice in Ray")
    hosts.sort(key=lambda p: int(p.metadata.labels[L.HOST_INDEX]))
    old = [p.metadata.name for p in hosts]
    assert len({p.metadata.labels[L.REPLICA_NAME] for p in hosts}) == 1  # one replica, two hosts
    assert len({p.spec.node_name for p in hosts}) == 2
    assert {p.spec.node_name for p in hosts} <= set(nodes)

    async with (
        GcsClient(bridge.gcs_address, timeout=10) as gcs,
        RayDriver.start(bridge.gcs_address, tmp_path / "driver.log") as ray,
    ):

        async def registered() -> dict[str, Any]:
            state = await gcs.get_cluster_resource_state()
            found = {p: state.node_by_instance(p) for p in old}
            return found if all(n is not None and n.alive for n in found.values()) else {}

        node_of: dict[str, str] = {}
        for pod, found in (await eventually(registered, timeout=START, message="both hosts in Ray")).items():
            assert found.total_resources.get("TPU") == TPU, found.total_resources  # the TPU-like resource
            node_of[found.node_id] = pod
        tasks = Tasks(ray, tmp_path)
        ran = [
            await tasks.start(f"t{i}", timeout=START, num_cpus=1, resources={"TPU": TPU}) for i in range(2)
        ]
        on = {f"t{i}": node_of[ran[i]] for i in range(2)}
        assert sorted(on.values()) == sorted(old)  # one task on each host
        first = next(t for t, pod in on.items() if pod == old[0])  # the task on the host cordoned
        second = next(t for t in on if t != first)

        await kube.core.patch_node(hosts[0].spec.node_name, {"spec": {"unschedulable": True}})

        (drained,) = await eventually(
            lambda: cluster_events(kube, NAME, "DisruptionDrain"), timeout=SETTLE, message="the drain"
        )
        assert f"(pods {', '.join(sorted(old))})" in drained.message, drained.message  # both hosts, one Event

        async def both_draining() -> bool:
            state = await gcs.get_cluster_resource_state()
            return all(
                (n := state.node_by_instance(p)) is not None and n.status is NodeStatus.DRAINING for p in old
            )

        await eventually(both_draining, timeout=SETTLE, message="both hosts' Ray nodes DRAINING")

        async def new_slice() -> list[Any]:
            pods = [p for p in await kube.workers(NAME, live=True) if p.metadata.name not in old]
            return pods if len(pods) == 2 else []

        fresh = await eventually(new_slice, timeout=SETTLE, message="a replacement slice asked for")
        assert set(old) <= names(await kube.workers(NAME, live=True))  # asked while the old hosts still run

        async def whole_while_busy() -> bool:
            assert await tasks.running(second)
            assert set(old) <= names(await kube.workers(NAME, live=True)), "a host went while the slice works"
            return True

        await holds(whole_while_busy, seconds=5, message="the slice kept while both tasks run")
        tasks.release(first)  # the cordoned host is idle now, its replica's other host is not
        await eventually(lambda: tasks.done(first), timeout=SETTLE, message=f"{first} done")
        await holds(whole_while_busy, seconds=5, message="neither host goes while the other works")
        assert await cluster_events(kube, NAME, "DisruptionDelete") == []
        # What became of the idle drained host's Ray node meanwhile (Ray stops a drained node once
        # idle; the bridge starts it again, as a kubelet restarts the container): for the report.
        state = await gcs.get_cluster_resource_state()
        again = state.node_by_instance(old[0])
        print(f"{old[0]}: bridge {[(e.kind, e.detail) for e in bridge.history(pod=old[0])]};"
              f" Ray node now {again and (again.node_id, again.status)}")  # fmt: skip

        tasks.release(second)
        outcomes = await eventually(tasks.ended, timeout=SETTLE, message="both tasks done")
        assert tasks.tally(outcomes) == {"tasks": 2, "kept": 2, "run_again": 0, "failed": 0}, outcomes

        async def both_gone() -> bool:
            return not set(old) & names(await kube.workers(NAME, live=True))

        await eventually(both_gone, timeout=SETTLE, message="the old slice deleted")
        (deleted,) = await eventually(
            lambda: cluster_events(kube, NAME, "DisruptionDelete"), timeout=SETTLE, message="the Event"
        )
        assert (
            f"replica {hosts[0].metadata.labels[L.REPLICA_NAME]} of worker group {GROUP}" in deleted.message
        )
        assert f"(pods {', '.join(sorted(old))})" in deleted.message  # both hosts in the same round

    fresh_names = {p.metadata.name for p in fresh}
    now = await eventually(
        lambda: in_ray(kube, bridge, NAME, 2), timeout=START, message="the new slice in Ray"
    )
    assert names(now) == fresh_names
    assert not {p.spec.node_name for p in now} & {hosts[0].spec.node_name}
