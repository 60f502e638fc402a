"""rayscale's two RayJob improvements on KubeRay, on a real API server with `rayscale run --mode all`
(the RayJob controller, the RayCluster controller and the autoscaler; kwok's GPU nodes):

- the entrypoint's declared resources are demand from the start: a RayJob with
  ``entrypointNumGpus: 1`` gets a GPU worker pod while its head pod is not even Running (here it
  cannot be scheduled at all), through the RayResourceRequest made with its cluster;
- at the job's end the workers go at once, drained: the cluster (autoscaled, ``shutdownAfterJobFinishes``
  with a 10-minute TTL) is marked finished, the autoscaler asks Ray to drain the worker's node and
  removes it, and ``status.autoscaler`` says why, while the head waits for the TTL.

Ray is a fake GCS served from this process (tests/support/fakes.py's FakeGcsServer): the head
alive, the worker's node once its pod runs, and the job's submission record as the test says.
"""

from __future__ import annotations

import copy
import hashlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from rayscale.api.names import RAYCLUSTER, RAYJOB, RAYRESOURCEREQUEST
from rayscale.cluster.job_end import JOB_FINISHED_ANNOTATION
from rayscale.ray.wire import autoscaler_pb2 as pb
from rayscale.rayjob import consts as C
from tests.support.builders import cpu_and_gpu_cluster
from tests.support.fakes import FakeGcsServer
from tests.support.grpcserve import serving
from tests.support.job_records import submission_reply
from tests.support.kube import Kube, names
from tests.support.operators import Operator
from tests.support.polling import eventually, holds

pytestmark = pytest.mark.integration
PROMPTLY = 90


@pytest.fixture
async def gcs() -> AsyncIterator[FakeGcsServer]:
    fake = FakeGcsServer()
    async with serving(*fake.services()) as fake.address:
        yield fake


def rayjob(name: str, gcs_address: str, **spec: Any) -> dict[str, Any]:
    cluster = cpu_and_gpu_cluster()
    body: dict[str, Any] = {
        "entrypoint": "python run.py",
        "entrypointNumGpus": 1,
        "rayClusterSpec": copy.deepcopy(cluster["spec"]),
        "shutdownAfterJobFinishes": True,
    }
    body.update(spec)
    # The RayCluster takes the RayJob's annotations: its GCS is the one this test names.
    meta = {"name": name, "annotations": {"rayscale.io/gcs-address": gcs_address}}
    return {**RAYJOB.type_meta(), "metadata": meta, "spec": body}


async def job_status(kube: Kube, name: str) -> dict[str, Any]:
    job = await kube.objects.get_namespaced_custom_object(*RAYJOB.at(kube.ns), name)
    status: dict[str, Any] = job.get("status") or {}
    return status


async def requests(kube: Kube) -> list[dict[str, Any]]:
    listed = await kube.objects.list_namespaced_custom_object(*RAYRESOURCEREQUEST.at(kube.ns))
    items: list[dict[str, Any]] = listed["items"]
    return items


async def cluster_name(kube: Kube, job: str) -> str:
    async def named() -> str | None:
        return (await job_status(kube, job)).get("rayClusterName") or None

    return await eventually(named, timeout=PROMPTLY, message="the RayJob names its RayCluster")


async def head_phase(kube: Kube, cluster: str) -> str | None:
    heads = [p for p in await kube.pods(cluster) if p.metadata.labels.get("ray.io/node-type") == "head"]
    return heads[0].status.phase if heads else None


async def test_a_gpu_worker_starts_before_the_head_runs(
    api: client.ApiClient, namespace: str, autoscaling_operator: Operator
) -> None:
    kube = Kube(api, namespace)
    body = rayjob("early", "127.0.0.1:1")  # no Ray at all: the request alone asks for the GPU
    head = body["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    head["nodeSelector"] = {"rayscale.io/no-such-node": "true"}  # the head never runs
    await kube.objects.create_namespaced_custom_object(*RAYJOB.at(namespace), body)
    cluster = await cluster_name(kube, "early")

    gpu = await eventually(
        lambda: kube.workers(cluster, group="gpu", live=True), timeout=PROMPTLY, message="a GPU worker pod"
    )
    assert len(gpu) == 1
    assert await head_phase(kube, cluster) == "Pending"
    assert (await job_status(kube, "early"))["jobDeploymentStatus"] == C.INITIALIZING
    assert await kube.workers(cluster, group="cpu", live=True) == []
    (request,) = await requests(kube)
    assert request["metadata"]["name"] == f"{cluster}-demand"
    assert request["metadata"]["ownerReferences"][0]["name"] == "early"
    assert request["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    assert request["spec"] == {"clusterName": cluster, "bundles": [{"resources": {"GPU": 1}, "count": 1}]}


async def test_a_bad_request_annotation_fails_validation(
    api: client.ApiClient, namespace: str, autoscaling_operator: Operator
) -> None:
    kube = Kube(api, namespace)
    body = rayjob("bad", "127.0.0.1:1")
    body["metadata"]["annotations"]["rayscale.io/resource-request"] = '{"GPU": 1}'
    await kube.objects.create_namespaced_custom_object(*RAYJOB.at(namespace), body)

    async def refused() -> dict[str, Any] | None:
        status = await job_status(kube, "bad")
        return status if status.get("jobDeploymentStatus") == C.VALIDATION_FAILED else None

    status = await eventually(refused, timeout=PROMPTLY, message="ValidationFailed")
    assert status["message"] == (
        "metadata.annotations.rayscale.io/resource-request: must be a JSON list of bundles ('{\"GPU\": 1}')"
    )
    warnings = await kube.events(C.EV_INVALID_METADATA)
    assert [e.type for e in warnings] == ["Warning"]
    assert await requests(kube) == []


def _node_id(pod: str) -> bytes:
    return hashlib.sha224(pod.encode()).digest()


def _ray_state(gcs: FakeGcsServer, workers: set[str]) -> pb.GetClusterResourceStateReply:
    """The fake's own state (the head alive) with each worker an idle Ray node."""
    reply = gcs._cluster_state()
    for pod in sorted(workers):
        reply.cluster_resource_state.node_states.append(
            pb.NodeState(
                node_id=_node_id(pod),
                instance_id=pod,
                total_resources={"CPU": 1.0, "GPU": 1.0},
                available_resources={"CPU": 1.0, "GPU": 1.0},
                status=pb.NodeStatus.IDLE,
                idle_duration_ms=1000,
            )
        )
    return reply


async def test_at_the_jobs_end_the_workers_are_drained_and_removed_at_once(
    api: client.ApiClient, namespace: str, gcs: FakeGcsServer, autoscaling_operator: Operator
) -> None:
    kube = Kube(api, namespace)
    # PENDING until the workers run: a driver RUNNING at once would end the request (and the
    # GPU worker it asks for) before the autoscaler's first round after the head's raylet joined
    gcs.replies["InternalKVGet"] = submission_reply("PENDING")
    body = rayjob("ends", gcs.address, submissionMode=C.HTTP_MODE, ttlSecondsAfterFinished=600)
    body["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["minReplicas"] = 1  # a CPU worker kept
    await kube.objects.create_namespaced_custom_object(*RAYJOB.at(namespace), body)
    cluster = gcs.cluster = await cluster_name(kube, "ends")

    workers = names(
        await eventually(
            lambda: kube.running_workers(cluster, 2), timeout=PROMPTLY, message="the two workers"
        )
    )
    gcs.replies["GetClusterResourceState"] = _ray_state(gcs, workers)
    gcs.replies["InternalKVGet"] = submission_reply("RUNNING")

    async def driver_runs() -> bool:
        status = await job_status(kube, "ends")
        return status.get("jobStatus") == "RUNNING" and not await requests(kube)

    await eventually(driver_runs, timeout=PROMPTLY, message="the driver RUNNING, the request deleted")

    async def kept() -> bool:
        return names(await kube.workers(cluster, live=True)) == workers

    await holds(kept, seconds=3, message="an idle worker stays while the job runs (idle timeout 60 s)")
    assert gcs.count("DrainNode") == 0

    ended = time.monotonic()
    gcs.replies["InternalKVGet"] = submission_reply("SUCCEEDED")

    async def gone() -> bool:
        return await kube.workers(cluster, live=True) == []

    await eventually(gone, timeout=PROMPTLY, message="the worker removed at the job's end")
    assert (await job_status(kube, "ends"))["jobDeploymentStatus"] == C.COMPLETE
    drains = [request for method, request, _ in gcs.calls if method == "DrainNode"]
    # each asked once, before its pod went (the minReplicas one too: the job is over)
    assert sorted(d.node_id for d in drains) == sorted(_node_id(w) for w in workers)
    assert time.monotonic() - ended < 600  # long before the TTL (its value, not a speed)

    rc = await kube.objects.get_namespaced_custom_object(*RAYCLUSTER.at(namespace), cluster)
    why = "RayJob " + namespace + "/ends finished (SUCCEEDED)"
    assert all(d.reason_message.startswith(f"rayscale: {why}, removing pod ") for d in drains)  # why, to Ray
    assert rc["metadata"]["annotations"][JOB_FINISHED_ANNOTATION] == why
    assert {g["groupName"]: g.get("replicas") for g in rc["spec"]["workerGroupSpecs"]} == {"cpu": 0, "gpu": 0}
    assert not any(g.get("suspend") for g in rc["spec"]["workerGroupSpecs"])  # KubeRay's view unchanged

    async def condition() -> dict[str, Any] | None:
        body = await kube.objects.get_namespaced_custom_object(*RAYCLUSTER.at(namespace), cluster)
        conditions = ((body.get("status") or {}).get("autoscaler") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "JobFinished"), None)

    found = await eventually(condition, timeout=PROMPTLY, message="status.autoscaler's JobFinished condition")
    assert found["status"] == "True"
    assert found["reason"] == "RayJobFinished"
    assert found["message"] == f"{why}: workers drained and removed"
    assert await head_phase(kube, cluster) == "Running"  # the head waits for the TTL


async def test_delete_workers_drains_each_worker_before_the_groups_are_suspended(
    api: client.ApiClient, namespace: str, gcs: FakeGcsServer, autoscaling_operator: Operator
) -> None:
    """DeleteWorkers (a cluster without autoscaling: KubeRay refuses it with autoscaling): the
    suspend flags and the pods' deletion are KubeRay's; before them, Ray is asked to drain."""
    kube = Kube(api, namespace)
    gcs.replies["InternalKVGet"] = submission_reply("RUNNING")
    rules = [{"policy": "DeleteWorkers", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}}]
    body = rayjob("fixed", gcs.address, submissionMode=C.HTTP_MODE, deletionStrategy={"deletionRules": rules})
    del body["spec"]["shutdownAfterJobFinishes"]
    cluster_spec = body["spec"]["rayClusterSpec"]
    cluster_spec["enableInTreeAutoscaling"] = False
    cluster_spec["workerGroupSpecs"][1]["replicas"] = 1  # one GPU worker, fixed
    await kube.objects.create_namespaced_custom_object(*RAYJOB.at(namespace), body)
    cluster = gcs.cluster = await cluster_name(kube, "fixed")
    (worker,) = names(
        await eventually(
            lambda: kube.running_workers(cluster, 1, group="gpu"), timeout=PROMPTLY, message="the GPU worker"
        )
    )
    gcs.replies["GetClusterResourceState"] = _ray_state(gcs, {worker})

    async def running() -> bool:
        return (await job_status(kube, "fixed")).get("jobStatus") == "RUNNING"

    await eventually(running, timeout=PROMPTLY, message="the driver RUNNING")
    assert await requests(kube) == []  # no autoscaling: nothing requested
    gcs.replies["InternalKVGet"] = submission_reply("SUCCEEDED")

    async def gone() -> bool:
        return await kube.workers(cluster, live=True) == []

    await eventually(gone, timeout=PROMPTLY, message="the worker deleted by DeleteWorkers")
    drains = [request for method, request, _ in gcs.calls if method == "DrainNode"]
    assert [d.node_id for d in drains] == [_node_id(worker)]
    assert "RayJob finished (DeleteWorkers)" in drains[0].reason_message
    rc = await kube.objects.get_namespaced_custom_object(*RAYCLUSTER.at(namespace), cluster)
    assert [g.get("suspend") for g in rc["spec"]["workerGroupSpecs"]] == [True, True]
    assert JOB_FINISHED_ANNOTATION not in (rc["metadata"].get("annotations") or {})

    async def said() -> list[Any]:  # no status.autoscaler here: the RayCluster's Event says why
        return [e for e in await kube.events(C.EV_WORKERS_DRAINED) if e.involved_object.name == cluster]

    (event,) = await eventually(said, timeout=PROMPTLY, message="the RayCluster's DrainedWorkers Event")
    assert (event.type, event.involved_object.kind) == ("Normal", "RayCluster")
    assert event.message == (
        f"RayJob {namespace}/fixed finished (DeleteWorkers): its 1 worker pod(s) go; Ray drained 1 first"
    )


async def test_delete_workers_on_an_autoscaled_cluster_drains_and_removes_without_suspend(
    api: client.ApiClient, namespace: str, gcs: FakeGcsServer, autoscaling_operator: Operator
) -> None:
    """KubeRay refuses DeleteWorkers with autoscaling; rayscale runs it as the job-finished mark."""
    kube = Kube(api, namespace)
    # PENDING until the worker runs: a driver that runs at once would take the request (and with it
    # the reason for the GPU worker) away before the autoscaler's round, as it should.
    gcs.replies["InternalKVGet"] = submission_reply("PENDING")
    rules = [{"policy": "DeleteWorkers", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}}]
    body = rayjob("rules", gcs.address, submissionMode=C.HTTP_MODE, deletionStrategy={"deletionRules": rules})
    del body["spec"]["shutdownAfterJobFinishes"]
    await kube.objects.create_namespaced_custom_object(*RAYJOB.at(namespace), body)
    cluster = gcs.cluster = await cluster_name(kube, "rules")
    (worker,) = names(
        await eventually(
            lambda: kube.running_workers(cluster, 1, group="gpu"), timeout=PROMPTLY, message="the GPU worker"
        )
    )
    gcs.replies["GetClusterResourceState"] = _ray_state(gcs, {worker})
    gcs.replies["InternalKVGet"] = submission_reply("RUNNING")

    async def running() -> bool:
        return (await job_status(kube, "rules")).get("jobStatus") == "RUNNING"

    await eventually(running, timeout=PROMPTLY, message="the driver RUNNING")
    gcs.replies["InternalKVGet"] = submission_reply("SUCCEEDED")

    async def gone() -> bool:
        return await kube.workers(cluster, live=True) == []

    await eventually(gone, timeout=PROMPTLY, message="the worker removed by DeleteWorkers")
    drains = [request for method, request, _ in gcs.calls if method == "DrainNode"]
    assert [d.node_id for d in drains] == [_node_id(worker)]
    rc = await kube.objects.get_namespaced_custom_object(*RAYCLUSTER.at(namespace), cluster)
    assert JOB_FINISHED_ANNOTATION in rc["metadata"]["annotations"]
    assert not any(g.get("suspend") for g in rc["spec"]["workerGroupSpecs"])
    conditions = {c["type"]: c["status"] for c in rc["status"].get("conditions") or []}
    assert conditions.get("SpecValid") != "False"  # no suspended group, which an autoscaled one refuses
