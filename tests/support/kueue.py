"""Kueue beside rayscale on the local control plane (tests/integration/kueue): Kueue's own manager
(hack/kueue, v0.17.0, built from the Go module proxy), not a fake.

- `kueue` (session): Kueue built on first use (build.sh; skipped only when Go is missing), its CRDs
  installed, started against the session's cluster, ready once the API server reaches its
  webhooks; its webhook configurations removed and the process stopped at the end.
- `queues` (one test): the test's namespace labelled for Kueue to manage (`local.MANAGED_LABEL`)
  and `Queues`, the test's ResourceFlavors, ClusterQueues, LocalQueues and PriorityClasses, and
  its Workloads read back. At the end: the namespace's RayJobs and RayClusters deleted and their
  Workloads gone (Kueue's finalizers would otherwise hold the namespace), then the cluster-scoped
  objects; Kueue's log printed when the test failed. A test asks for it after rayscale's operator
  fixture, so that rayscale still runs then (it removes its finalizer from a deleted RayJob).
- `make_cluster`: Kueue's RayCluster test wrapper (pkg/util/testingjobs/raycluster, MakeCluster).

Nothing here sleeps to synchronise: every wait polls with a deadline.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hack.kueue import local
from hack.localk8s import testcluster
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from rayscale.api.names import RAYCLUSTER, RAYJOB
from tests.support.polling import eventually

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
POOL = "rayscale.io/node-pool"  # the fake nodes' pool label (hack/localk8s/nodes.yaml)
IMAGE = "rayproject/ray:2.60.0"  # Kueue's tests use its KubeRay test image; nothing runs it here
WAIT = 90.0  # Kueue's util.Timeout is 10 s on kind; admission and the API server share 2 cores here
LONG = 300.0  # Kueue's util.VeryLongTimeout (5 minutes)
# The labels Kueue gives an admitted job's pods (feature gate AssignQueueLabelsForPods, on by
# default): its ClusterQueue's and its LocalQueue's names, when they are valid label values
# (63 characters at most: the tests' queue names stay under it).
QUEUE_LABELS = ("kueue.x-k8s.io/cluster-queue-name", "kueue.x-k8s.io/local-queue-name")
__all__ = [
    "GROUP",
    "IMAGE",
    "LONG",
    "POOL",
    "QUEUE_LABELS",
    "VERSION",
    "WAIT",
    "Queues",
    "condition",
    "kueue",
    "make_cluster",
    "queues",
    "with_priority",
]


@pytest.fixture(scope="session")
def kueue(
    cluster: testcluster.ClusterHandle, raycluster_crd: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[local.LocalKueue]:
    """Kueue's manager for the session, its webhooks answering; stopped at the end."""
    if shutil.which("go") is None:
        pytest.skip("needs Go 1.26+ to build Kueue from the Go module proxy (hack/kueue/build.sh)")
    running = local.LocalKueue(cluster, local.build(), Path(tmp_path_factory.mktemp("kueue")))
    running.install()
    running.start()
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


class Queues:
    """A test's Kueue objects over the API server; the cluster-scoped ones it made are deleted by
    `cleanup`."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.ns = namespace
        self.objects: Any = client.CustomObjectsApi(api)
        self.scheduling: Any = client.SchedulingV1Api(api)
        self.made: list[tuple[str, str]] = []  # (plural, name) of the cluster-scoped objects

    async def _create_cluster_scoped(self, plural: str, body: dict[str, Any]) -> str:
        await self.objects.create_cluster_custom_object(GROUP, VERSION, plural, body)
        self.made.append((plural, body["metadata"]["name"]))
        return str(body["metadata"]["name"])

    async def flavor(
        self, name: str, node_labels: dict[str, str], tolerations: list[dict[str, str]] | None = None
    ) -> str:
        """A ResourceFlavor (Kueue's MakeResourceFlavor(name).NodeLabel(...)...)."""
        spec: dict[str, Any] = {"nodeLabels": node_labels}
        if tolerations:
            spec["tolerations"] = tolerations
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor", "metadata": {"name": name}}
        return await self._create_cluster_scoped("resourceflavors", {**body, "spec": spec})

    async def cluster_queue(
        self, name: str, quotas: dict[str, dict[str, str]], *, preemption: dict[str, str] | None = None
    ) -> str:
        """A ClusterQueue of one resource group, `quotas` {flavor: {resource: nominal quota}} in
        order (Kueue's MakeClusterQueue(name).ResourceGroup(...)), every namespace selected; it is
        returned once Active (CreateClusterQueuesAndWaitForActive)."""
        covered = sorted({resource for quota in quotas.values() for resource in quota})
        flavors = [
            {"name": flavor, "resources": [{"name": r, "nominalQuota": q} for r, q in quota.items()]}
            for flavor, quota in quotas.items()
        ]
        spec: dict[str, Any] = {
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
        }
        if preemption:
            spec["preemption"] = preemption
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": name}}
        await self._create_cluster_scoped("clusterqueues", {**body, "spec": spec})
        await self._active(
            lambda: self.objects.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)
        )
        return name

    async def local_queue(self, name: str, cluster_queue: str) -> str:
        """A LocalQueue of the test's namespace, returned once Active (CreateLocalQueuesAndWaitForActive)."""
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "LocalQueue",
            "metadata": {"name": name},
            "spec": {"clusterQueue": cluster_queue},
        }
        await self.objects.create_namespaced_custom_object(GROUP, VERSION, self.ns, "localqueues", body)
        await self._active(
            lambda: self.objects.get_namespaced_custom_object(GROUP, VERSION, self.ns, "localqueues", name)
        )
        return name

    async def priority_class(self, name: str, value: int) -> str:
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}}
        await self.scheduling.create_priority_class({**body, "value": value})
        self.made.append(("priorityclasses", name))
        return name

    async def _active(self, read: Any) -> None:
        async def active() -> bool:
            return condition(await read(), "Active") == "True"

        await eventually(active, timeout=WAIT, message="the queue Active")

    async def workloads(self) -> list[dict[str, Any]]:
        found = await self.objects.list_namespaced_custom_object(GROUP, VERSION, self.ns, "workloads")
        return list(found.get("items") or [])

    async def workload_of(self, owner: dict[str, Any]) -> dict[str, Any] | None:
        """The Workload `owner` (a RayCluster or RayJob) owns, None while there is none."""
        uid = owner["metadata"]["uid"]
        for workload in await self.workloads():
            if any(ref["uid"] == uid for ref in workload["metadata"].get("ownerReferences") or []):
                return workload
        return None

    async def created_workload(self, owner: dict[str, Any]) -> dict[str, Any]:
        """Kueue's "Checking workload is created"."""
        found: dict[str, Any] = await eventually(
            lambda: self.workload_of(owner),
            timeout=WAIT,
            message=f"a Workload of {owner['metadata']['name']}",
        )
        return found

    async def admitted(self, owner: dict[str, Any], *, timeout: float = WAIT) -> dict[str, Any]:  # noqa: ASYNC109
        """The Workload of `owner` once Admitted (Kueue's ExpectWorkloadsToBeAdmitted)."""

        async def admitted() -> dict[str, Any] | None:
            workload = await self.workload_of(owner)
            return workload if workload and condition(workload, "Admitted") == "True" else None

        found: dict[str, Any] = await eventually(
            admitted, timeout=timeout, message=f"the Workload of {owner['metadata']['name']} Admitted"
        )
        return found

    async def cleanup(self) -> None:
        """The namespace's RayJobs and RayClusters deleted and their Workloads gone, then the
        cluster-scoped objects this test made (Kueue holds a ClusterQueue or ResourceFlavor in use)."""
        for kind in (RAYJOB, RAYCLUSTER):
            await self.objects.delete_collection_namespaced_custom_object(*kind.at(self.ns))

        async def no_workloads() -> bool:
            return not await self.workloads()

        await eventually(no_workloads, timeout=WAIT, message=f"the Workloads of {self.ns} gone")
        for name in [w["metadata"]["name"] for w in await self.local_queues()]:
            await self.objects.delete_namespaced_custom_object(GROUP, VERSION, self.ns, "localqueues", name)
        for plural, name in reversed(self.made):
            await self._delete_cluster_scoped(plural, name)

    async def local_queues(self) -> list[dict[str, Any]]:
        found = await self.objects.list_namespaced_custom_object(GROUP, VERSION, self.ns, "localqueues")
        return list(found.get("items") or [])

    async def _delete_cluster_scoped(self, plural: str, name: str) -> None:
        if plural == "priorityclasses":
            await self.scheduling.delete_priority_class(name)
            return
        await self.objects.delete_cluster_custom_object(GROUP, VERSION, plural, name)

        async def gone() -> bool:
            try:
                await self.objects.get_cluster_custom_object(GROUP, VERSION, plural, name)
            except ApiException as exc:
                return exc.status == 404
            return False

        await eventually(gone, timeout=WAIT, message=f"{plural}/{name} deleted")


def condition(obj: dict[str, Any], kind: str) -> str | None:
    """The status of condition `kind` of `obj`, None when it has none."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return str(cond["status"])
    return None


@pytest.fixture
async def queues(
    kueue: local.LocalKueue, api: client.ApiClient, namespace: str, request: pytest.FixtureRequest
) -> AsyncIterator[Queues]:
    """The test's namespace managed by Kueue, and its Kueue objects (removed at the end)."""
    labels = {"metadata": {"labels": {local.MANAGED_LABEL: local.MANAGED_VALUE}}}
    await client.CoreV1Api(api).patch_namespace(namespace, labels)
    found = Queues(api, namespace)
    try:
        yield found
    finally:
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print(f"--- Kueue log ---{kueue.output()}")
        await found.cleanup()


def make_cluster(name: str, queue: str, *, head_cpu: str, worker_cpu: str) -> dict[str, Any]:
    """Kueue's MakeCluster(name, ns).Queue(queue).RequestAndLimit(head, cpu, head_cpu).
    RequestAndLimit(worker, cpu, worker_cpu): a head and the group ``workers-group-0`` of 1 replica
    (0 to 10). Not suspended: Kueue's webhook suspends it (Kueue's wrapper sets it already)."""

    def pod(container: str, cpu: str) -> dict[str, Any]:
        resources = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}
        spec = {
            "nodeSelector": {},
            "containers": [{"name": container, "image": IMAGE, "resources": resources}],
        }
        return {"spec": spec}

    return {
        **RAYCLUSTER.type_meta(),
        "metadata": {"name": name, "labels": {local.QUEUE_LABEL: queue}},
        "spec": {
            "rayVersion": "2.60.0",
            "headGroupSpec": {"rayStartParams": {}, "template": pod("head-container", head_cpu)},
            "workerGroupSpecs": [
                {
                    "groupName": "workers-group-0",
                    "replicas": 1,
                    "minReplicas": 0,
                    "maxReplicas": 10,
                    "rayStartParams": {},
                    "template": pod("worker-container", worker_cpu),
                }
            ],
        },
    }


def with_priority(body: dict[str, Any], priority_class: str) -> dict[str, Any]:
    """Kueue's WithPriorityClassName: the head's pod template names the PriorityClass."""
    out = copy.deepcopy(body)
    out["spec"]["headGroupSpec"]["template"]["spec"]["priorityClassName"] = priority_class
    return out
