"""A gang scheduler beside the default one on the local control plane (tests/integration/gang):
scheduler-plugins' kube-scheduler with its Coscheduling plugin (hack/gang, v0.34.7, built from the
Go module proxy), not a fake.

- `gang_scheduler_session` (session): built on first use (hack/gang/build.sh; skipped only when Go
  is missing), its PodGroup CRD installed, started against the session's cluster and ready; stopped
  at the end.
- `gang_scheduler` (one test): that scheduler, checked to be still running; its log printed when the
  test failed.
- `gpu_nodes`: kwok Nodes of the test's own with one GPU each (`disruption_nodes.node_manifest`'s
  Nodes, labelled and tainted for the test's namespace), deleted on the way out; `gpu_pod`, a pod
  asking for a whole one; `bound`, the pods a scheduler has bound; `tried`, those it found
  unschedulable.
- `held_until_all_fit`: a gang with one Node too few gets none bound, then all once a Node comes.

Nothing here sleeps to synchronise: every wait polls with a deadline.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hack.gang import local
from hack.localk8s import testcluster

from tests.support.disruption_nodes import node_manifest, pin
from tests.support.polling import eventually, holds

__all__ = [
    "GPU",
    "IMAGE",
    "WAIT",
    "bound",
    "gang_scheduler",
    "gang_scheduler_session",
    "gpu_nodes",
    "gpu_pod",
    "held_until_all_fit",
    "ready",
    "tried",
]

GPU = "nvidia.com/gpu"
IMAGE = "rayproject/ray:2.60.0"  # nothing runs it: kwok plays the kubelet
WAIT = 90.0  # the local control plane and the gang scheduler share 2 cores here


@pytest.fixture(scope="session")
def gang_scheduler_session(
    cluster: testcluster.ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[local.LocalGangScheduler]:
    """scheduler-plugins' scheduler for the session, ready; stopped at the end."""
    if shutil.which("go") is None:
        pytest.skip("needs Go 1.26+ to build scheduler-plugins from the Go module proxy (hack/gang/build.sh)")
    with local.serving(cluster, Path(tmp_path_factory.mktemp("gang"))) as running:
        yield running


@pytest.fixture
def gang_scheduler(
    gang_scheduler_session: local.LocalGangScheduler, request: pytest.FixtureRequest
) -> Iterator[local.LocalGangScheduler]:
    """The session's gang scheduler, running; its log printed when the test failed."""
    assert gang_scheduler_session.running(), f"the gang scheduler exited:{gang_scheduler_session.output()}"
    yield gang_scheduler_session
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(f"--- the gang scheduler's log ---{gang_scheduler_session.output()}")


@contextlib.contextmanager
def gpu_nodes(
    cluster: testcluster.ClusterHandle, namespace: str, indexes: Sequence[int]
) -> Iterator[list[str]]:
    """kwok Nodes ``gang-<namespace digest>-<index>`` for `namespace`'s pods alone, one GPU each,
    deleted on the way out (without waiting); the test skipped on a cluster that is not the local
    one."""
    if not cluster.local:
        pytest.skip("makes kwok Nodes: the local control plane only")
    digest = hashlib.sha1(namespace.encode()).hexdigest()[:10]
    made: list[str] = []
    try:
        for index in indexes:
            name = f"gang-{digest}-{index}"
            node = node_manifest(name, namespace)
            node["status"]["capacity"] = node["status"]["allocatable"] = {
                **node["status"]["capacity"],
                GPU: "1",
            }
            cluster.kubectl_run("create", "-f", "-", input=json.dumps(node))
            made.append(name)
        yield made
    finally:
        for name in made:
            cluster.kubectl_run("delete", "node", name, "--wait=false", check=False)


def gpu_pod(name: str, namespace: str, *, scheduler: str, pod_group: str | None = None) -> dict[str, Any]:
    """A pod asking for one GPU (a whole `gpu_nodes` Node) on `namespace`'s Nodes, for `scheduler`;
    with `pod_group`, a member of that PodGroup's gang."""
    labels = {local.POD_GROUP_LABEL: pod_group} if pod_group else {}
    container = {"name": "worker", "image": IMAGE, "resources": {"limits": {GPU: "1"}}}
    spec = {"schedulerName": scheduler, "containers": [container]}
    pin({"template": {"spec": spec}}, namespace)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


async def bound(core: Any, namespace: str) -> list[str]:
    """The names of `namespace`'s pods bound to a Node."""
    pods = (await core.list_namespaced_pod(namespace)).items
    return sorted(p.metadata.name for p in pods if p.spec.node_name)


async def ready(core: Any, names: list[str]) -> bool:
    """Every Node of `names` says Ready=True (kwok keeps them so once it took them)."""
    for name in names:
        node = await core.read_node(name)
        if not any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or []):
            return False
    return True


async def tried(core: Any, namespace: str) -> list[str]:
    """The names of `namespace`'s pods a scheduler marked PodScheduled=False (it tried them)."""
    pods = (await core.list_namespaced_pod(namespace)).items
    return sorted(
        p.metadata.name
        for p in pods
        if any(c.type == "PodScheduled" and c.status == "False" for c in p.status.conditions or [])
    )


async def held_until_all_fit(
    cluster: testcluster.ClusterHandle, core: Any, namespace: str, members: list[str], nodes: list[str]
) -> None:
    """`members`, one gang of the gang scheduler, each needing a whole `gpu_nodes` Node, with
    len(`members`) - 1 such `nodes`: the scheduler tries them all and binds none, and keeps binding
    none for longer than Coscheduling holds those that fit and than the scheduler waits before it
    tries them again; once one more Node comes, all are bound, each on a Node of its own."""
    size = len(members)
    assert len(nodes) == size - 1
    await eventually(lambda: ready(core, nodes), timeout=WAIT, message=f"{nodes} Ready")

    async def none_bound() -> bool:
        names = await bound(core, namespace)
        assert not names, f"{len(names)} of the gang's {size} pods bound with room for {size - 1}: {names}"
        return True

    async def all_tried() -> bool:
        await none_bound()
        return await tried(core, namespace) == sorted(members)

    await eventually(all_tried, timeout=WAIT, message=f"the gang scheduler tried all {size} members")
    hold = local.PERMIT_WAITING_SECONDS + 2 * local.UNSCHEDULABLE_RETRY_SECONDS + 5
    await holds(none_bound, seconds=hold, message="no member bound")

    with gpu_nodes(cluster, namespace, [size - 1]) as added:

        async def all_bound() -> bool:
            return await bound(core, namespace) == sorted(members)

        await eventually(all_bound, timeout=WAIT, message=f"all {size} members bound once {added} came")
        pods = (await core.list_namespaced_pod(namespace)).items
        assert sorted(p.spec.node_name for p in pods) == sorted([*nodes, *added])
