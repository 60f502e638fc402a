"""Kueue's RayJob case with Kueue's real manager (v0.17.0), rayscale's RayJob controller and a real Ray
(the Ray job bridge, e2e/raybridge/jobbridge.py: a Ray head with its dashboard for the RayJob's
RayCluster, a Ray worker for its worker pod, the submitter run on this machine).

| Kueue (v0.17.0, test/e2e/singlecluster/kuberay_test.go) | pytest                               |
|---------------------------------------------------------|--------------------------------------|
| Kuberay / Should run a rayjob if admitted                | test_should_run_a_rayjob_if_admitted |

What differs from Kueue's: the flavor's node labels are the fake node pools'; the entrypoint runs
this interpreter (``python -c``, as e2e/raybridge's jobs do); the submitter pod template carries
``rayscale.io/bridged`` for the bridge to run it. Beyond Kueue's steps: the RayJob's one Workload
(its RayCluster, owned by a RayJob Kueue manages, gets none) has three PodSets, head, workers and
submitter; every pod runs on the flavor's nodes; the Workload is Finished when the job is.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.raybridge.jobbridge import BRIDGED_LABEL, JobBridge
from e2e.raybridge.jobscenario import MEDIUM, Jobs, python
from hack.kueue import local
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from rayscale.api.names import RAYJOB
from tests.support.kueue import IMAGE, POOL, QUEUE_LABELS, WAIT, Queues, condition
from tests.support.operators import Operator
from tests.support.polling import eventually

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None or importlib.util.find_spec("aiohttp_cors") is None,
        reason="needs Ray with its dashboard: pip install 'ray[default]==2.60.0' (the dev extra)",
    ),
    pytest.mark.ray,
    pytest.mark.timeout(900),
]


@pytest.fixture
def job_bridge(cluster: testcluster.ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[JobBridge]:
    with JobBridge(cluster.kubeconfig, namespace, log_dir=tmp_path / "ray") as running:
        yield running
        problems = running.errors()
    assert not problems, f"the Ray job bridge failed: {problems}"


def make_job(name: str, queue: str, *, entrypoint: str, cpu: str) -> dict[str, Any]:
    """Kueue's MakeJob(name, ns).Queue(queue).WithSubmissionMode(K8sJobMode).Entrypoint(...)
    .RequestAndLimit(head and worker, cpu).WithSubmitterPodTemplate(...): suspended, a head and
    ``workers-group-0`` (1 replica, 1 to 5), the cluster deleted when the job ends."""

    def template(container: str) -> dict[str, Any]:
        resources = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}
        spec = {
            "restartPolicy": "Never",
            "nodeSelector": {},
            "containers": [{"name": container, "image": IMAGE, "resources": resources}],
        }
        return {"spec": spec}

    submitter = {
        "name": "rayjob-submitter",
        "image": IMAGE,
        "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
    }
    return {
        **RAYJOB.type_meta(),
        "metadata": {"name": name, "labels": {local.QUEUE_LABEL: queue}},
        "spec": {
            "suspend": True,
            "shutdownAfterJobFinishes": True,
            "submissionMode": "K8sJobMode",
            "entrypoint": entrypoint,
            "submitterPodTemplate": {
                "metadata": {"labels": {BRIDGED_LABEL: "true"}},
                "spec": {"restartPolicy": "OnFailure", "containers": [submitter]},
            },
            "rayClusterSpec": {
                "rayVersion": "2.60.0",
                "headGroupSpec": {"rayStartParams": {}, "template": template("head-container")},
                "workerGroupSpecs": [
                    {
                        "groupName": "workers-group-0",
                        "replicas": 1,
                        "minReplicas": 1,
                        "maxReplicas": 5,
                        "rayStartParams": {},
                        "template": template("worker-container"),
                    }
                ],
            },
        },
    }  # fmt: skip


async def test_should_run_a_rayjob_if_admitted(
    api: client.ApiClient,
    namespace: str,
    job_bridge: JobBridge,
    autoscaling_operator: Operator,
    queues: Queues,
    request: pytest.FixtureRequest,
) -> None:
    jobs = Jobs(request.node.name, api, namespace, job_bridge)
    flavor = await queues.flavor(f"kuberay-rf-{namespace}", {POOL: "cpu"})
    cq = await queues.cluster_queue(f"kuberay-cq-{namespace}", {flavor: {"cpu": "3"}})
    lq = await queues.local_queue(f"kuberay-lq-{namespace}", cq)

    # Creating the rayJob
    entrypoint = python("import ray; ray.init(); print(ray.cluster_resources())")
    created = await jobs.create(make_job("rayjob", lq, entrypoint=entrypoint, cpu="300m"))
    # Checking workload is created; Checking workload is admitted
    workload = await queues.created_workload(created)
    assert [ps["name"] for ps in workload["spec"]["podSets"]] == ["head", "workers-group-0", "submitter"]
    await queues.admitted(created)

    # Waiting for the RayJob cluster become ready
    status = await jobs.wait(
        "rayjob",
        lambda s: s.get("jobDeploymentStatus") == "Running",
        timeout=MEDIUM,
        what="deployment Running",
    )
    body = await jobs.get("rayjob")
    assert body is not None
    assert not body["spec"].get("suspend"), body  # Kueue writes false by leaving it out
    cluster = await jobs.cluster(status["rayClusterName"])
    assert cluster is not None
    assert cluster["spec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {POOL: "cpu"}
    assert await queues.workload_of(cluster) is None, "the RayJob's RayCluster got a Workload of its own"

    # Verify ray job worker pods have queue labels assigned (head, worker and submitter)
    core = client.CoreV1Api(api)

    async def labelled() -> bool:
        pods = (await core.list_namespaced_pod(namespace)).items
        kinds = {p.metadata.labels.get("ray.io/node-type") or "submitter" for p in pods}
        assert kinds >= {"head", "worker", "submitter"}, kinds
        for pod in pods:
            for key, value in zip(QUEUE_LABELS, (cq, lq), strict=True):
                assert pod.metadata.labels.get(key) == value, (pod.metadata.name, pod.metadata.labels)
            assert pod.spec.node_selector == {POOL: "cpu"}, (pod.metadata.name, pod.spec.node_selector)
        return True

    await eventually(labelled, timeout=WAIT, message="every pod of the RayJob with Kueue's queue labels")

    # Waiting for the RayJob to finish
    done = await jobs.deployment("rayjob", "Complete")
    assert done["jobStatus"] == "SUCCEEDED", done

    async def finished() -> bool:
        found = await queues.workload_of(created)
        return found is not None and condition(found, "Finished") == "True"

    await eventually(finished, timeout=WAIT, message="the RayJob's Workload Finished")
