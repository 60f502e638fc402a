"""Kueue's RayJob cases with Kueue's real manager (v0.17.0), rayscale's RayJob controller and a real Ray
(the Ray job bridge, e2e/raybridge/jobbridge.py: a Ray head with its dashboard for the RayJob's
RayCluster, a Ray worker for its worker pod, the submitter run on this machine).

| Kueue (v0.17.0, test/e2e/singlecluster/kuberay_test.go) | pytest                               |
|---------------------------------------------------------|--------------------------------------|
| Kuberay / Should run a rayjob if admitted                | test_should_run_a_rayjob_if_admitted |

and from test/integration/singlecluster/controller/jobs/rayjob/rayjob_controller_test.go, "Job
controller with preemption enabled" / "Should preempt lower priority rayJobs when resource
insufficient" -> test_should_preempt_lower_priority_rayjobs_when_resource_insufficient (there the
RayJobs' status is set by hand, no KubeRay runs; here rayscale runs them on a real Ray).

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
from e2e.raybridge.jobscenario import LONG_RUNNING, MEDIUM, Jobs, python
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


def make_job(
    name: str, queue: str, *, entrypoint: str, head_cpu: str, worker_cpu: str, priority_class: str = ""
) -> dict[str, Any]:
    """Kueue's MakeJob(name, ns).Queue(queue).WithSubmissionMode(K8sJobMode).Entrypoint(...)
    .RequestAndLimit(head and worker, cpu).WithSubmitterPodTemplate(300m)
    [.WithPriorityClassName(...)]: suspended, a head and ``workers-group-0`` (1 replica, 1 to 5),
    the cluster deleted when the job ends."""

    def container(name: str, cpu: str) -> dict[str, Any]:
        resources = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}
        return {"name": name, "image": IMAGE, "resources": resources}

    def template(name: str, cpu: str) -> dict[str, Any]:
        spec = {"restartPolicy": "Never", "nodeSelector": {}, "containers": [container(name, cpu)]}
        return {"spec": spec}

    head = template("head-container", head_cpu)
    if priority_class:
        head["spec"]["priorityClassName"] = priority_class
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
                "spec": {"restartPolicy": "OnFailure", "containers": [container("rayjob-submitter", "300m")]},
            },
            "rayClusterSpec": {
                "rayVersion": "2.60.0",
                "headGroupSpec": {"rayStartParams": {}, "template": head},
                "workerGroupSpecs": [
                    {
                        "groupName": "workers-group-0",
                        "replicas": 1,
                        "minReplicas": 1,
                        "maxReplicas": 5,
                        "rayStartParams": {},
                        "template": template("worker-container", worker_cpu),
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
    created = await jobs.create(
        make_job("rayjob", lq, entrypoint=entrypoint, head_cpu="300m", worker_cpu="300m")
    )
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


async def test_should_preempt_lower_priority_rayjobs_when_resource_insufficient(
    api: client.ApiClient,
    namespace: str,
    job_bridge: JobBridge,
    autoscaling_operator: Operator,
    queues: Queues,
    request: pytest.FixtureRequest,
) -> None:
    """Kueue preempts a running RayJob by suspending it: rayscale's RayJob controller deletes its
    RayCluster and submitter and says Suspended, which releases the quota; resumed, the job runs
    again on a new RayCluster."""
    jobs = Jobs(request.node.name, api, namespace, job_bridge)
    flavor = await queues.flavor(f"on-demand-{namespace}", {POOL: "cpu"})
    preemption = {"withinClusterQueue": "LowerPriority"}
    cq = await queues.cluster_queue(
        f"clusterqueue-{namespace}", {flavor: {"cpu": "5"}}, preemption=preemption
    )
    lq = await queues.local_queue("local-queue", cq)
    priority = await queues.priority_class(f"priority-class-{namespace}", 10)

    # Create a low priority rayJob (1 + 2 CPUs, the submitter 0.3); await its admission and run
    low = await jobs.create(
        make_job("rayjob-with-low-priority", lq, entrypoint=LONG_RUNNING, head_cpu="1", worker_cpu="2")
    )
    await queues.admitted(low)
    first = (await jobs.deployment("rayjob-with-low-priority", "Running"))["rayClusterName"]

    # Create a high priority rayJob which will preempt the lower one (2 + 2 + 0.3 CPUs: 5 do not hold both)
    high_job = make_job(
        "rayjob-with-high-priority",
        lq,
        entrypoint=LONG_RUNNING,
        head_cpu="2",
        worker_cpu="2",
        priority_class=priority,
    )
    high = await jobs.create(high_job)
    # High priority workload should be admitted
    await queues.admitted(high, timeout=MEDIUM)
    # Low priority workload should not be admitted; low priority rayJob should be suspended
    workload = await queues.workload_of(low)
    assert workload is not None
    assert condition(workload, "Admitted") == "False", workload["status"]
    assert (await jobs.get("rayjob-with-low-priority") or {})["spec"].get("suspend") is True
    await jobs.deployment("rayjob-with-low-priority", "Suspended")
    await jobs.cluster_gone(first)
    await jobs.deployment("rayjob-with-high-priority", "Running")

    # Delete high priority rayjob: the low priority workload is admitted again, the job un-suspended
    await jobs.delete("rayjob-with-high-priority")
    await queues.admitted(low, timeout=MEDIUM)
    resumed = await jobs.deployment("rayjob-with-low-priority", "Running")
    assert resumed["rayClusterName"] != first, resumed
    body = await jobs.get("rayjob-with-low-priority")
    assert body is not None
    assert not body["spec"].get("suspend"), body
