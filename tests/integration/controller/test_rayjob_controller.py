"""The RayJob controller on a real API server, with `rayscale run --mode controller` (no Ray: the
RayCluster goes ready on kwok's pods, and the submission is never read). What is checked here is
what the controller writes: the finalizer, the status through Initializing and Running, the
RayCluster, the submitter Job and the head Service it makes, suspend (everything released, then
Suspended), deletion (the finalizer let go), and a bad spec (ValidationFailed and a Warning Event).
The state machine's every path is the unit tests' and the differential's (tests/kuberay)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes_asyncio import client

from rayscale.api.names import RAYCLUSTER, RAYJOB
from rayscale.rayjob import consts as C
from tests.support.builders import example
from tests.support.kube import Kube
from tests.support.operators import Operator
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
PROMPTLY = 90


def rayjob(name: str, **spec: Any) -> dict[str, Any]:
    cluster = example("raycluster-basic.yaml")
    body: dict[str, Any] = {
        "entrypoint": "python -c 'print(1)'",
        "rayClusterSpec": copy.deepcopy(cluster["spec"]),
        "shutdownAfterJobFinishes": True,
    }
    body.update(spec)
    return {**RAYJOB.type_meta(), "metadata": {"name": name}, "spec": body}


async def get(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    objects: Any = client.CustomObjectsApi(api)
    try:
        found: dict[str, Any] = await objects.get_namespaced_custom_object(*RAYJOB.at(namespace), name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


async def test_rayjob_runs_suspends_and_is_deleted(
    api: client.ApiClient, kube: Kube, namespace: str, operator: Operator
) -> None:
    objects: Any = client.CustomObjectsApi(api)
    await objects.create_namespaced_custom_object(*RAYJOB.at(namespace), rayjob("job"))

    async def running() -> dict[str, Any] | None:
        job = await get(api, namespace, "job")
        status = (job or {}).get("status") or {}
        return job if status.get("jobDeploymentStatus") == C.RUNNING else None

    job = await eventually(running, timeout=PROMPTLY, message="RayJob Running")
    status = job["status"]
    assert job["metadata"]["finalizers"] == [C.FINALIZER]
    assert status["jobId"].startswith("job-")
    assert status["rayClusterName"].startswith("job-")
    assert status["dashboardURL"] == f"{status['rayClusterName']}-head-svc.{namespace}.svc.cluster.local:8265"
    cluster = await objects.get_namespaced_custom_object(*RAYCLUSTER.at(namespace), status["rayClusterName"])
    assert cluster["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    assert cluster["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    batch = client.BatchV1Api(api)
    submitter = (await batch.read_namespaced_job("job", namespace)).to_dict()
    container = submitter["spec"]["template"]["spec"]["containers"][0]
    assert container["name"] == C.SUBMITTER_CONTAINER
    assert {"name": C.SUBMISSION_ID_ENV, "value": status["jobId"], "value_from": None} in container["env"]

    async def service() -> bool:
        services = (await client.CoreV1Api(api).list_namespaced_service(namespace)).items
        return any(s.metadata.name == "job-head-svc" for s in services)

    await eventually(service, timeout=PROMPTLY, message="the RayJob's head Service")

    suspend = {"spec": {"suspend": True}}
    merge = "application/merge-patch+json"
    await objects.patch_namespaced_custom_object(*RAYJOB.at(namespace), "job", suspend, _content_type=merge)

    async def suspended() -> bool:
        job = await get(api, namespace, "job")
        return ((job or {}).get("status") or {}).get("jobDeploymentStatus") == C.SUSPENDED

    await eventually(suspended, timeout=PROMPTLY, message="RayJob Suspended")
    clusters = await objects.list_namespaced_custom_object(*RAYCLUSTER.at(namespace))
    assert clusters["items"] == []
    assert (await batch.list_namespaced_job(namespace)).items == []
    await eventually(lambda: kube.events(C.EV_DELETED_CLUSTER), timeout=PROMPTLY, message="the Event")

    await objects.delete_namespaced_custom_object(*RAYJOB.at(namespace), "job")

    async def gone() -> bool:
        return await get(api, namespace, "job") is None

    await eventually(gone, timeout=PROMPTLY, message="RayJob deleted")


async def test_invalid_rayjob_fails_validation_with_an_event(
    api: client.ApiClient, kube: Kube, namespace: str, operator: Operator
) -> None:
    objects: Any = client.CustomObjectsApi(api)
    await objects.create_namespaced_custom_object(
        *RAYJOB.at(namespace), rayjob("bad", runtimeEnvYAML="a: [1")
    )

    async def failed() -> dict[str, Any] | None:
        status = ((await get(api, namespace, "bad")) or {}).get("status") or {}
        return status if status.get("jobDeploymentStatus") == C.VALIDATION_FAILED else None

    status = await eventually(failed, timeout=PROMPTLY, message="ValidationFailed")
    assert status["reason"] == "ValidationFailed"
    assert status["message"].startswith("failed to unmarshal RuntimeEnvYAML")
    events = await eventually(lambda: kube.events(C.EV_INVALID_SPEC), timeout=PROMPTLY, message="the Event")
    assert events[0].type == "Warning"
    clusters = await objects.list_namespaced_custom_object(*RAYCLUSTER.at(namespace))
    assert clusters["items"] == []
