"""Kueue's RayCluster cases with Kueue's real manager (v0.17.0) and rayscale's controller on the local
control plane: Kueue's webhook suspends a RayCluster that names a queue, Kueue admits its Workload
and un-suspends it with the ResourceFlavor's node labels and tolerations in the pod templates, and
rayscale makes the pods from those templates; the fake nodes run them.

Kueue's test (v0.17.0) -> pytest:

- test/e2e/singlecluster/kuberay_test.go, "Kuberay" / "Should run a RayCluster on worker if
  admitted" -> test_should_run_a_raycluster_on_worker_if_admitted
- test/integration/singlecluster/controller/jobs/raycluster/raycluster_controller_test.go,
  "RayCluster Job controller interacting with scheduler" / "Should schedule jobs as they fit in
  their ClusterQueue" -> test_should_schedule_jobs_as_they_fit_in_their_clusterqueue (the head is
  a PodSet of its own; a cluster that does not fit waits)
- the same file, "Job controller with preemption enabled" / "Should preempt lower priority
  RayClusters when resource insufficient" ->
  test_should_preempt_lower_priority_rayclusters_when_resource_insufficient (the suspend round
  trip)
- the same file, "RayCluster with elastic jobs via workload-slices support" / "Should support
  raycluster scale-down and scale-up" -> test_should_support_raycluster_scale_down_and_scale_up

What differs from Kueue's: the flavors' node labels are the fake node pools' (Kueue's kind nodes
carry ``instance-type``); the RayCluster is created without ``suspend`` (Kueue's wrapper sets it,
here Kueue's webhook must); the garbage collector deletes a deleted RayCluster's Workload (Kueue's
integration tests, without one, delete it by hand); and each case also checks what rayscale made:
the pods of an admitted cluster on nodes of its flavors with the flavor's labels and tolerations,
none while it waits or is preempted.
"""

from __future__ import annotations

from typing import Any

from tests.support.kube import Kube
from tests.support.kueue import (
    GROUP,
    LONG,
    POOL,
    QUEUE_LABELS,
    VERSION,
    WAIT,
    Queues,
    condition,
    make_cluster,
    with_priority,
)
from tests.support.operators import Operator
from tests.support.polling import eventually, holds

ELASTIC = "kueue.x-k8s.io/elastic-job"  # the annotation and the pods' scheduling gate
TOLERATION = {"key": "rayscale.io/kueue-test", "operator": "Exists", "effect": "NoSchedule"}
KUEUE_LABELS = ("kueue.x-k8s.io/podset", *QUEUE_LABELS)


async def suspended(kube: Kube, name: str) -> bool:
    return (await kube.get(name))["spec"].get("suspend") is True


async def running(kube: Kube, name: str) -> dict[str, Any]:
    """The RayCluster once not suspended and its head and worker Running, else {}."""
    body = await kube.get(name)
    pods = await kube.pods(name, live=True)
    up = len(pods) == 2 and all(p.status.phase == "Running" for p in pods)
    return body if body["spec"].get("suspend") is False and up else {}


async def pods_on(kube: Kube, name: str, pools: dict[str, str]) -> None:
    """The cluster's pods carry what admission put in their templates, and the nodes they run on are
    of the flavor's pool: `pools` {pod type ("head", "worker"): pool}."""
    for pod in await kube.pods(name, live=True):
        kind = pod.metadata.labels["ray.io/node-type"]
        assert pod.spec.node_selector == {POOL: pools[kind]}, (pod.metadata.name, pod.spec.node_selector)
        node = await kube.core.read_node(pod.spec.node_name)
        assert node.metadata.labels[POOL] == pools[kind], (pod.metadata.name, pod.spec.node_name)
        assert all(key in pod.metadata.labels for key in KUEUE_LABELS), pod.metadata.labels


async def no_pods(kube: Kube, name: str) -> bool:
    """No pod of the cluster (its head Service is made while it is suspended, as KubeRay makes it:
    a Service takes no quota)."""
    return not await kube.pods(name)


async def test_should_run_a_raycluster_on_worker_if_admitted(
    kube: Kube, operator: Operator, queues: Queues
) -> None:
    ns = kube.ns
    flavor = await queues.flavor(f"kuberay-rf-{ns}", {POOL: "cpu"}, [TOLERATION])
    cq = await queues.cluster_queue(f"kuberay-cq-{ns}", {flavor: {"cpu": "3"}})
    lq = await queues.local_queue(f"kuberay-lq-{ns}", cq)

    # Creating the RayCluster
    created = await kube.create(make_cluster("raycluster1", lq, head_cpu="300m", worker_cpu="300m"))
    assert created["spec"]["suspend"] is True, "Kueue's webhook did not suspend the RayCluster"
    # Checking workload is created; Checking workload is admitted
    workload = await queues.created_workload(created)
    assert [ps["name"] for ps in workload["spec"]["podSets"]] == ["head", "workers-group-0"]
    await queues.admitted(created)

    # Checking the RayCluster is ready
    async def ready() -> dict[str, Any] | None:
        status = (await kube.get("raycluster1")).get("status") or {}
        counts = [
            status.get(f) for f in ("desiredWorkerReplicas", "readyWorkerReplicas", "availableWorkerReplicas")
        ]
        return status if counts == [1, 1, 1] else None

    await eventually(ready, timeout=LONG, message="the RayCluster's workers desired, ready and available: 1")
    body = await eventually(
        lambda: running(kube, "raycluster1"), timeout=WAIT, message="head and worker Running"
    )
    for template in (body["spec"]["headGroupSpec"], body["spec"]["workerGroupSpecs"][0]):
        assert template["template"]["spec"]["tolerations"] == [TOLERATION], template
    await pods_on(kube, "raycluster1", {"head": "cpu", "worker": "cpu"})
    for pod in await kube.pods("raycluster1", live=True):
        assert [t.key for t in pod.spec.tolerations or []].count(TOLERATION["key"]) == 1, pod.spec.tolerations


async def test_should_schedule_jobs_as_they_fit_in_their_clusterqueue(
    kube: Kube, operator: Operator, queues: Queues
) -> None:
    """The head is a PodSet of its own: flavors are assigned per PodSet, in the ClusterQueue's order,
    and a cluster whose head and workers do not fit together waits, suspended, with no pods."""
    ns = kube.ns
    on_demand = await queues.flavor(f"on-demand-{ns}", {POOL: "cpu"})
    spot = await queues.flavor(f"spot-untainted-{ns}", {POOL: "gpu"})
    cq = await queues.cluster_queue(f"dev-cq-{ns}", {spot: {"cpu": "4"}, on_demand: {"cpu": "4"}})
    lq = await queues.local_queue("local-queue", cq)

    # checking a dev job starts: its head (3 CPUs) takes spot, its worker (4) no longer fits there
    job = await kube.create(make_cluster("dev-job", lq, head_cpu="3", worker_cpu="4"))
    body = await eventually(lambda: running(kube, "dev-job"), timeout=LONG, message="dev-job running")
    assert body["spec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {POOL: "gpu"}
    assert body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] == {POOL: "cpu"}
    await pods_on(kube, "dev-job", {"head": "gpu", "worker": "cpu"})

    # checking a second no-fit RayCluster does not start: 1 CPU of spot left, none of on-demand
    job2 = await kube.create(make_cluster("dev-job2", lq, head_cpu="2", worker_cpu="2"))
    assert job2["spec"]["suspend"] is True
    await queues.created_workload(job2)

    async def waiting() -> bool:
        workload = await queues.workload_of(job2)
        return (
            workload is not None
            and (await suspended(kube, "dev-job2"))
            and (await no_pods(kube, "dev-job2"))
            and condition(workload, "Admitted") != "True"
        )

    await holds(waiting, seconds=10, message="dev-job2 suspended, not admitted, no pods")

    # deleting the job (the garbage collector deletes its Workload)
    await kube.delete_cluster("dev-job")

    # checking the second RayCluster starts when the first one was deleted: both PodSets on spot
    body = await eventually(lambda: running(kube, "dev-job2"), timeout=LONG, message="dev-job2 running")
    assert body["spec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {POOL: "gpu"}
    assert body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] == {POOL: "gpu"}
    await pods_on(kube, "dev-job2", {"head": "gpu", "worker": "gpu"})
    assert await queues.workload_of(job) is None


async def test_should_preempt_lower_priority_rayclusters_when_resource_insufficient(
    kube: Kube, operator: Operator, queues: Queues
) -> None:
    """Kueue preempts by suspending the RayCluster and restoring its pod templates; rayscale deletes
    its pods, and the cluster no longer Ready releases the quota. Resumed, it gets new pods."""
    ns = kube.ns
    on_demand = await queues.flavor(f"on-demand-{ns}", {POOL: "cpu"})
    cq = await queues.cluster_queue(
        f"clusterqueue-{ns}", {on_demand: {"cpu": "4"}}, preemption={"withinClusterQueue": "LowerPriority"}
    )
    lq = await queues.local_queue("local-queue", cq)
    priority = await queues.priority_class(f"priority-class-{ns}", 10)

    # Create a low priority RayCluster; await for the low priority workload to be admitted
    low = await kube.create(make_cluster("raycluster-with-low-priority", lq, head_cpu="1", worker_cpu="2"))
    await eventually(
        lambda: running(kube, low["metadata"]["name"]), timeout=LONG, message="the low one running"
    )
    first_pods = {p.metadata.uid for p in await kube.pods(low["metadata"]["name"])}

    # Create a high priority RayCluster which will preempt the lower one
    high_body = with_priority(
        make_cluster("raycluster-with-high-priority", lq, head_cpu="2", worker_cpu="2"), priority
    )
    high = await kube.create(high_body)
    # High priority workload should be admitted
    await queues.admitted(high, timeout=LONG)
    # Low priority RayCluster should be suspended (and rayscale deletes its pods)
    low_name = low["metadata"]["name"]

    async def preempted() -> bool:
        workload = await queues.workload_of(low)
        admitted = workload is not None and condition(workload, "Admitted") == "True"
        return not admitted and (await suspended(kube, low_name)) and (await no_pods(kube, low_name))

    await eventually(preempted, timeout=WAIT, message="the low one suspended, not admitted, its pods gone")
    template = (await kube.get(low_name))["spec"]["headGroupSpec"]["template"]
    assert "kueue.x-k8s.io/podset" not in (template.get("metadata") or {}).get("labels", {}), template
    await eventually(
        lambda: running(kube, high["metadata"]["name"]), timeout=LONG, message="the high one running"
    )

    # Delete high priority raycluster: the low priority workload is admitted again and un-suspended
    await kube.delete_cluster(high["metadata"]["name"])
    await queues.admitted(low, timeout=LONG)
    await eventually(lambda: running(kube, low_name), timeout=LONG, message="the low one running again")
    again = {p.metadata.uid for p in await kube.pods(low_name, live=True)}
    assert not again & first_pods, "the resumed cluster kept pods of before its preemption"
    await pods_on(kube, low_name, {"head": "cpu", "worker": "cpu"})


async def test_should_support_raycluster_scale_down_and_scale_up(
    kube: Kube, operator: Operator, queues: Queues
) -> None:
    """An elastic RayCluster (feature gate ElasticJobsViaWorkloadSlices, annotation
    ``kueue.x-k8s.io/elastic-job``, enableInTreeAutoscaling): Kueue gates its pods until their
    slice is admitted. A scale-down updates the admitted Workload in place; a scale-up makes a new
    Workload slice that replaces the old one once admitted, and Kueue ungates the new pods. Here the
    replicas are patched as an autoscaler patches them (with ``workersToDelete`` on the way down,
    which rayscale's autoscaler and Ray's write; Kueue's test changes only ``replicas``)."""
    ns = kube.ns
    flavor = await queues.flavor(f"default-{ns}", {})
    cq = await queues.cluster_queue(
        f"default-{ns}", {flavor: {"cpu": "5"}}, preemption={"withinClusterQueue": "LowerPriority"}
    )
    lq = await queues.local_queue("default", cq)
    body = make_cluster("foo", lq, head_cpu="1", worker_cpu="1")
    body["metadata"]["annotations"] = {ELASTIC: "true"}
    body["spec"]["enableInTreeAutoscaling"] = True
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 2
    created = await kube.create(body)
    for template in (created["spec"]["headGroupSpec"], created["spec"]["workerGroupSpecs"][0]):
        assert template["template"]["spec"]["schedulingGates"] == [{"name": ELASTIC}], template

    async def slices() -> list[tuple[str, list[int], bool, bool]]:
        """(name, PodSet counts, Admitted, Finished) of each Workload."""
        return [
            (w["metadata"]["name"], [p["count"] for p in w["spec"]["podSets"]],
             condition(w, "Admitted") == "True", condition(w, "Finished") == "True")
            for w in await queues.workloads()
        ]  # fmt: skip

    async def usage(total: str) -> bool:
        found = await queues.objects.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", cq)
        flavors = (found.get("status") or {}).get("flavorsUsage") or []
        return [r["total"] for f in flavors for r in f["resources"]] == [total]

    async def workers(count: int) -> bool:
        pods = await kube.pods("foo", live=True)
        ungated = all(not p.spec.scheduling_gates and p.status.phase == "Running" for p in pods)
        return (
            ungated and len([p for p in pods if p.metadata.labels["ray.io/node-type"] == "worker"]) == count
        )

    # admitting the raycluster's workload; the raycluster is unsuspended; utilization recorded
    (first,) = await eventually(
        lambda: _matching(slices, lambda s: len(s) == 1 and s[0][1:3] == ([1, 2], True)),
        timeout=WAIT,
        message="one Workload, PodSets of 1 and 2, Admitted",
    )
    await eventually(lambda: usage("3"), timeout=WAIT, message="the ClusterQueue's CPU usage 3")
    await eventually(lambda: workers(2), timeout=LONG, message="2 workers Running, ungated")

    # reducing the worker replicas to 1 to emulate scale-down operation
    doomed = [p.metadata.name for p in await kube.workers("foo", live=True)][:1]
    await kube.set_group("foo", 0, "replicas", 1)
    await kube.set_group("foo", 0, "scaleStrategy", {"workersToDelete": doomed})
    await eventually(lambda: usage("2"), timeout=WAIT, message="the ClusterQueue's CPU usage 2")
    # the raycluster's workload is updated and still admitted
    await eventually(
        lambda: _matching(slices, lambda s: s == [(first[0], [1, 1], True, False)]),
        timeout=WAIT,
        message="the same Workload, PodSets of 1 and 1, Admitted",
    )
    await eventually(lambda: workers(1), timeout=WAIT, message="1 worker left")

    # increasing the RayCluster's worker replicas to 2 to emulate scale-up operation
    await kube.set_group("foo", 0, "scaleStrategy", {"workersToDelete": []})
    await kube.set_group("foo", 0, "replicas", 2)
    await eventually(lambda: usage("3"), timeout=WAIT, message="the ClusterQueue's CPU usage 3 again")

    # old workload is finished and new workload is admitted, with the new counts
    def replaced(found: list[tuple[str, list[int], bool, bool]]) -> bool:
        old = [s for s in found if s[0] == first[0]]
        new = [s for s in found if s[0] != first[0]]
        return (
            old == [(first[0], [1, 1], True, True)] and len(new) == 1 and new[0][1:] == ([1, 2], True, False)
        )

    await eventually(
        lambda: _matching(slices, replaced),
        timeout=WAIT,
        message="the old slice Finished, a new one of 1 and 2 Admitted",
    )
    await eventually(lambda: workers(2), timeout=LONG, message="2 workers Running, the new one ungated")


async def _matching(read: Any, check: Any) -> Any:
    """What `read()` returns when `check` holds on it, else None (for `eventually`)."""
    found = await read()
    return found if check(found) else None
