"""A running RayJob taken over from KubeRay's real operator (docs/migrating-from-kuberay.md).

KubeRay's operator (v1.6.2, tools/kuberay-oracle/build-operator.sh) runs a K8sJobMode RayJob on the
local control plane: it makes the RayCluster (kwok runs its pods), adds its finalizer, and once the
cluster is ready makes the submitter Job and goes Running. Its pod carries ``rayscale.io/bridged``,
so kwok leaves it Running (as a real submitter waits for its job); KubeRay cannot reach a dashboard
here, so it stays Running. Then KubeRay stops and ``rayscale run --mode all`` takes the namespace.

Ray is a fake GCS served from this process, named by the RayJob's ``rayscale.io/gcs-address``
(KubeRay copies the RayJob's annotations to its RayCluster): the job's submission record says
RUNNING, then SUCCEEDED as the test writes the submitter pod's exit (as a kubelet would). rayscale
must continue the same RayJob: the same cluster and job id (no second RayCluster, no second
submitter, nothing submitted again), the job's status from the GCS, Complete, the cluster deleted
after ``ttlSecondsAfterFinished`` while the submitter Job stays (as KubeRay does), and KubeRay's
finalizer let go when the RayJob is deleted.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hack.localk8s import testcluster
from hack.localk8s.launcher import BRIDGED_LABEL
from kubernetes_asyncio import client

from rayscale.api.names import RAYCLUSTER, RAYJOB
from rayscale.ray.address import OVERRIDE_FLAG
from rayscale.rayjob import consts as C
from tests.support.builders import example
from tests.support.fakes import FakeGcsServer
from tests.support.grpcserve import serving
from tests.support.job_records import submission_reply
from tests.support.kube import Kube
from tests.support.operators import KubeRayOperator, Operator, beside
from tests.support.polling import eventually, holds

NAME = "migjob"
PROMPTLY = 45


@pytest.fixture
async def gcs() -> AsyncIterator[FakeGcsServer]:
    fake = FakeGcsServer()
    async with serving(*fake.services()) as fake.address:
        yield fake


def _rayjob(gcs_address: str) -> dict[str, Any]:
    cluster = copy.deepcopy(example("raycluster-basic.yaml")["spec"])
    cluster["enableInTreeAutoscaling"] = False
    cluster["workerGroupSpecs"][0]["replicas"] = 1
    submitter = {
        "name": C.SUBMITTER_CONTAINER,
        "image": "rayproject/ray:2.55.0",
        "resources": {"limits": {"cpu": "500m", "memory": "500Mi"}},
    }
    spec = {
        "entrypoint": "python -c 'print(1)'",
        "submissionMode": C.K8S_JOB_MODE,
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": 0,
        "rayClusterSpec": cluster,
        # kwok completes a Job's pods at once unless they carry the label: this one waits for the job
        "submitterPodTemplate": {
            "metadata": {"labels": {BRIDGED_LABEL: "true"}},
            "spec": {"restartPolicy": "Never", "containers": [submitter]},
        },
    }
    meta = {"name": NAME, "annotations": {"rayscale.io/gcs-address": gcs_address}}
    return {**RAYJOB.type_meta(), "metadata": meta, "spec": spec}


class World:
    """The RayJob, and every RayCluster and submitter Job of the namespace (name -> uid)."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.ns = namespace
        self.objects: Any = client.CustomObjectsApi(api)
        self.batch: Any = client.BatchV1Api(api)
        self.core: Any = client.CoreV1Api(api)

    async def job(self) -> dict[str, Any] | None:
        try:
            got: dict[str, Any] = await self.objects.get_namespaced_custom_object(*RAYJOB.at(self.ns), NAME)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return got

    async def status(self) -> dict[str, Any]:
        status: dict[str, Any] = ((await self.job()) or {}).get("status") or {}
        return status

    async def clusters(self) -> dict[str, str]:
        listed = await self.objects.list_namespaced_custom_object(*RAYCLUSTER.at(self.ns))
        return {c["metadata"]["name"]: c["metadata"]["uid"] for c in listed["items"]}

    async def submitters(self) -> dict[str, str]:
        jobs = (await self.batch.list_namespaced_job(self.ns)).items
        return {j.metadata.name: j.metadata.uid for j in jobs}

    async def submitter_pod(self) -> Any:
        pods = await self.core.list_namespaced_pod(self.ns, label_selector=f"job-name={NAME}")
        running = [p for p in pods.items if p.status.phase == "Running"]
        return running[0] if len(pods.items) == 1 and running else None

    async def submitter_exits(self, pod: Any) -> None:
        """The submitter's exit 0 into its pod's status, as a kubelet reports it (kwok leaves
        bridged pods to the test); the Job controller then completes the Job."""
        body: dict[str, Any] = self.core.api_client.sanitize_for_serialization(
            await self.core.read_namespaced_pod_status(pod.metadata.name, self.ns)
        )
        status = body["status"]
        started = status.get("startTime")
        container = body["spec"]["containers"][0]
        terminated = {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": started}
        status["containerStatuses"] = [{
            "name": container["name"], "image": container["image"], "imageID": "", "ready": False,
            "restartCount": 0, "started": False, "state": {"terminated": terminated},
        }]  # fmt: skip
        status["phase"] = "Succeeded"
        status["conditions"] = [
            {**c, "status": "False"} if c.get("type") in ("Ready", "ContainersReady") else c
            for c in status.get("conditions") or []
        ]
        await self.core.replace_namespaced_pod_status(pod.metadata.name, self.ns, body)


@pytest.mark.parametrize("kuberay", [""], ids=["v1.6-defaults"], indirect=True)
async def test_a_running_rayjob_is_taken_over_from_kuberay(
    api: client.ApiClient,
    cluster: testcluster.ClusterHandle,
    namespace: str,
    kuberay: KubeRayOperator,
    gcs: FakeGcsServer,
) -> None:
    rayscale = Operator(cluster, namespace, mode="all", extra=[OVERRIDE_FLAG])
    with beside(kuberay, rayscale):
        await _take_over(World(api, namespace), Kube(api, namespace), kuberay, rayscale, gcs)


async def _take_over(
    world: World, kube: Kube, kuberay: KubeRayOperator, rayscale: Operator, gcs: FakeGcsServer
) -> None:
    gcs.replies["InternalKVGet"] = submission_reply("RUNNING")

    # 1. KubeRay's operator: the cluster, the finalizer, the submitter Job, Running.
    kuberay.start()
    await world.objects.create_namespaced_custom_object(*RAYJOB.at(world.ns), _rayjob(gcs.address))

    async def kuberay_running() -> dict[str, Any] | None:
        status = await world.status()
        ok = status.get("jobDeploymentStatus") == C.RUNNING and await world.submitter_pod() is not None
        return status if ok else None

    before = await eventually(kuberay_running, timeout=PROMPTLY, message="KubeRay's RayJob Running")
    kuberay.stop()
    job = await world.job()
    assert job is not None
    assert job["metadata"]["finalizers"] == [C.FINALIZER]
    assert not before.get("jobStatus"), before  # KubeRay never reached Ray
    cluster_name, job_id = before["rayClusterName"], before["jobId"]
    assert cluster_name.startswith(f"{NAME}-")
    clusters, submitters = await world.clusters(), await world.submitters()
    assert list(clusters) == [cluster_name]
    assert list(submitters) == [NAME]
    rc = await kube.get(cluster_name)
    assert rc["metadata"]["annotations"]["rayscale.io/gcs-address"] == gcs.address
    pods = {p.metadata.name: p.metadata.uid for p in await kube.pods(cluster_name)}
    assert gcs.count("InternalKVGet") == 0

    # 2. rayscale takes over: the job's status from Ray, the same cluster, job id and submitter.
    async def unchanged() -> bool:
        assert await world.clusters() == clusters, "a RayCluster made again"
        assert await world.submitters() == submitters, "a submitter Job made again"
        now = {p.metadata.name: p.metadata.uid for p in await kube.pods(cluster_name)}
        assert now == pods, f"pods changed: {sorted(set(now.items()) ^ set(pods.items()))}"
        return True

    rayscale.start()

    async def ray_running() -> dict[str, Any] | None:
        await unchanged()  # at every look, not only at the end
        status = await world.status()
        return status if status.get("jobStatus") == "RUNNING" else None

    status = await eventually(ray_running, timeout=PROMPTLY, message="rayscale reads RUNNING from the GCS")
    assert status["jobDeploymentStatus"] == C.RUNNING
    assert (status["rayClusterName"], status["jobId"]) == (cluster_name, job_id)
    keys = {bytes(request.key) for method, request, _ in gcs.calls if method == "InternalKVGet"}
    assert keys
    assert all(job_id.encode() in key for key in keys), keys

    await holds(unchanged, seconds=3, message="nothing made again while the job runs")

    # 3. The job ends: Ray says SUCCEEDED, the submitter exits 0; Complete.
    gcs.replies["InternalKVGet"] = submission_reply("SUCCEEDED")
    pod = await world.submitter_pod()
    assert pod is not None
    await world.submitter_exits(pod)

    async def complete() -> dict[str, Any] | None:
        status = await world.status()
        return status if status.get("jobDeploymentStatus") == C.COMPLETE else None

    status = await eventually(complete, timeout=PROMPTLY, message="the RayJob Complete")
    assert status["jobStatus"] == "SUCCEEDED"
    assert (status["rayClusterName"], status["jobId"]) == (cluster_name, job_id)

    # 4. shutdownAfterJobFinishes, TTL 0: the cluster goes, the submitter Job stays (its logs),
    # the finalizer stays until the RayJob is deleted, then rayscale lets it go.
    async def cluster_gone() -> bool:
        return await world.clusters() == {}

    await eventually(cluster_gone, timeout=PROMPTLY, message="the RayCluster deleted")
    assert await world.submitters() == submitters
    job = await world.job()
    assert job is not None
    assert job["metadata"]["finalizers"] == [C.FINALIZER]
    assert (job["status"]["jobDeploymentStatus"], job["status"]["jobId"]) == (C.COMPLETE, job_id)

    await world.objects.delete_namespaced_custom_object(*RAYJOB.at(world.ns), NAME)

    async def gone() -> bool:
        return await world.job() is None

    await eventually(gone, timeout=PROMPTLY, message="the RayJob deleted (finalizer let go)")
