"""The RayCluster controller against a real API server (the local control plane, or the cluster
RAYSCALE_TARGET_KUBECONFIG names)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from rayscale.api.names import RAYCLUSTER
from tests.support.builders import example
from tests.support.kube import Kube, label_values, names
from tests.support.operators import Operator
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
INDEX = "ray.io/worker-group-replica-index"
REPLICA = "ray.io/worker-group-replica-name"
HOST = "ray.io/replica-host-index"


def basic(replicas: int = 2, *, autoscaling: bool = False, **group: Any) -> dict[str, Any]:
    body = example("raycluster-basic.yaml")
    body["spec"]["enableInTreeAutoscaling"] = autoscaling
    body["spec"]["workerGroupSpecs"][0].update({"replicas": replicas, **group})
    return body


async def test_cluster_becomes_head_service_and_running_workers(kube: Kube, operator: Operator) -> None:
    await kube.create(basic(2))
    pods = await eventually(
        lambda: kube.running_workers("raycluster-basic", 2), timeout=60, message="2 workers"
    )
    assert label_values(pods, INDEX) == ["0", "1"]
    head = await eventually(lambda: kube.pods("raycluster-basic", group="headgroup"), message="head pod")
    assert head[0].metadata.labels["ray.io/node-type"] == "head"
    (svc,) = await kube.services("raycluster-basic")
    assert (svc.metadata.name, svc.spec.cluster_ip) == ("raycluster-basic-head-svc", "None")

    async def ready() -> dict[str, Any] | None:
        status = (await kube.get("raycluster-basic")).get("status", {})
        return status if status.get("state") == "ready" else None

    status = await eventually(ready, timeout=60, message="state ready")
    assert status["desiredWorkerReplicas"] == 2
    assert status["availableWorkerReplicas"] == 2
    assert status["desiredCPU"] == "3"
    assert status["head"]["serviceName"] == "raycluster-basic-head-svc"
    assert status["observedGeneration"] == 1
    assert await kube.events("CreatedWorkerPod")


async def test_custom_head_service_name_and_serve_service(kube: Kube, operator: Operator) -> None:
    body = basic(1)
    body["metadata"]["annotations"] = {"ray.io/enable-serve-service": "true"}
    head = body["spec"]["headGroupSpec"]
    head["headService"] = {"metadata": {"name": "my-head"}}
    head["template"]["spec"]["containers"][0]["ports"] = [
        {"containerPort": 6379, "name": "gcs-server"}, {"containerPort": 8000, "name": "serve"}
    ]  # fmt: skip
    await kube.create(body)
    (worker,) = await eventually(lambda: kube.running_workers("raycluster-basic", 1), timeout=60)
    env = {e.name: e.value for e in worker.spec.containers[0].env}
    assert env["FQ_RAY_IP"] == f"my-head.{kube.ns}.svc.cluster.local"

    async def both() -> set[str]:
        svcs = {s.metadata.name for s in await kube.services("raycluster-basic")}
        return svcs if svcs == {"my-head", "raycluster-basic-serve-svc"} else set()

    await eventually(both, timeout=30, message="the custom head Service and the serve Service")
    serve = await kube.core.read_namespaced_service("raycluster-basic-serve-svc", kube.ns)
    assert [(p.name, p.port) for p in serve.spec.ports] == [("serve", 8000)]
    assert serve.spec.selector == {"ray.io/cluster": "raycluster-basic"}


async def test_recreate_upgrade_strategy_replaces_every_pod_on_a_spec_change(
    kube: Kube, operator: Operator
) -> None:
    body = basic(1)
    body["spec"]["upgradeStrategy"] = {"type": "Recreate"}
    await kube.create(body)
    before = names(await eventually(lambda: kube.running_workers("raycluster-basic", 1), timeout=60))
    before |= names(await eventually(lambda: kube.pods("raycluster-basic", group="headgroup")))
    await kube.set_group("raycluster-basic", 0, "replicas", 2)  # not a reason to recreate
    both = names(await eventually(lambda: kube.running_workers("raycluster-basic", 2), timeout=60))
    assert before - both == {p for p in before if "head" in p}, "a worker was replaced by a scale-up"
    await kube.patch_json("raycluster-basic", [
        {"op": "add", "path": "/spec/workerGroupSpecs/0/template/spec/containers/0/env",
         "value": [{"name": "NEW_SETTING", "value": "1"}]},
    ])  # fmt: skip

    async def all_new() -> list[Any]:
        pods = await kube.running_workers("raycluster-basic", 2)
        heads = await kube.pods("raycluster-basic", group="headgroup")
        fresh = pods and heads and not (names(pods) | names(heads)) & (before | both)
        return pods if fresh else []

    pods = await eventually(all_new, timeout=90, message="every pod recreated")
    for p in pods:
        assert ("NEW_SETTING", "1") in [(e.name, e.value) for e in p.spec.containers[0].env]
    events = [e.message for e in await kube.events("DeletedPod")]
    assert any("due to spec change with Recreate upgradeStrategy" in m for m in events), events


async def test_controller_mode_runs_rays_autoscaler_in_the_head(kube: Kube, operator: Operator) -> None:
    """`--mode controller` (this fixture's) is KubeRay's drop-in: an autoscaling cluster's head gets
    Ray's autoscaler sidecar, with its ServiceAccount, Role and RoleBinding."""
    await kube.create(basic(1, autoscaling=True))
    (head,) = await eventually(lambda: kube.pods("raycluster-basic", group="headgroup"), message="head pod")
    assert [c.name for c in head.spec.containers] == ["ray-head", "autoscaler"]
    assert head.spec.service_account_name == "raycluster-basic"
    rbac = client.RbacAuthorizationV1Api(kube.core.api_client)
    await kube.core.read_namespaced_service_account("raycluster-basic", kube.ns)
    role = await rbac.read_namespaced_role("raycluster-basic", kube.ns)
    assert {"pods", "pods/resize"} <= {r for rule in role.rules for r in rule.resources}
    binding = await rbac.read_namespaced_role_binding("raycluster-basic", kube.ns)
    assert binding.subjects[0].name == "raycluster-basic"


async def test_fault_tolerant_cluster_cleans_redis_before_it_goes(kube: Kube, operator: Operator) -> None:
    """As KubeRay: the finalizer first; on deletion every pod goes, then the Redis cleanup Job runs
    (kwok completes its pod), then the finalizer is removed and the RayCluster is gone."""
    body = basic(1)
    body["spec"]["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    await kube.create(body)
    await eventually(lambda: kube.running_workers("raycluster-basic", 1), timeout=60, message="1 worker")
    finalizers = (await kube.get("raycluster-basic"))["metadata"].get("finalizers") or []
    assert "ray.io/gcs-ft-redis-cleanup-finalizer" in finalizers
    await kube.delete_cluster("raycluster-basic")
    batch = client.BatchV1Api(kube.core.api_client)

    async def job() -> Any:
        jobs = (await batch.list_namespaced_job(kube.ns)).items
        return next((j for j in jobs if j.metadata.name == "raycluster-basic-redis-cleanup"), None)

    created = await eventually(job, timeout=60, message="the Redis cleanup Job")
    assert created.metadata.labels["ray.io/node-type"] == "redis-cleanup"
    assert "cleanup_redis_storage" in created.spec.template.spec.containers[0].args[0]
    ray_pods = [
        p
        for p in await kube.pods("raycluster-basic", live=True)
        if p.metadata.labels["ray.io/node-type"] in ("head", "worker")
    ]
    assert not ray_pods, "Ray pods still running when the Job was created"
    # The Job's own pod (labelled with the cluster too) is left to run: nothing deletes it.
    assert not [e for e in await kube.events("DeletedPod") if "redis-cleanup" in e.message]

    async def gone() -> bool:
        clusters = await kube.objects.list_namespaced_custom_object(*RAYCLUSTER.at(kube.ns))
        return not clusters["items"]

    await eventually(gone, timeout=90, message="the RayCluster deleted after the cleanup")
    assert [e.message for e in await kube.events("CreatedRedisCleanupJob")]


async def test_scale_up_and_down(kube: Kube, operator: Operator) -> None:
    await kube.create(basic(1))
    await eventually(lambda: kube.running_workers("raycluster-basic", 1), timeout=60)
    await kube.set_group("raycluster-basic", 0, "replicas", 5)
    pods = await eventually(
        lambda: kube.running_workers("raycluster-basic", 5), timeout=60, message="5 workers"
    )
    assert label_values(pods, INDEX) == ["0", "1", "2", "3", "4"]
    await kube.set_group("raycluster-basic", 0, "replicas", 2)
    await eventually(lambda: kube.running_workers("raycluster-basic", 2), timeout=60, message="2 workers")


async def test_workers_to_delete_deletes_exactly_named_pods(kube: Kube, operator: Operator) -> None:
    await kube.create(basic(3, autoscaling=True))
    before = names(await eventually(lambda: kube.running_workers("raycluster-basic", 3), timeout=60))
    victim = sorted(before)[1]
    await kube.set_group("raycluster-basic", 0, "scaleStrategy", {"workersToDelete": [victim]})

    async def replaced() -> set[str]:
        now = names(await kube.running_workers("raycluster-basic", 3))
        return now if now and victim not in now else set()

    after = await eventually(replaced, timeout=60, message=f"{victim} deleted and replaced")
    assert before - {victim} <= after  # the other two untouched
    # the list is the autoscaler's to clear: the controller never writes the spec
    spec = (await kube.get("raycluster-basic"))["spec"]
    assert spec["workerGroupSpecs"][0]["scaleStrategy"] == {"workersToDelete": [victim]}


async def test_scaling_down_with_finalizers_deletes_exactly_one(kube: Kube, operator: Operator) -> None:
    body = basic(2, minReplicas=1, maxReplicas=5)
    body["spec"]["workerGroupSpecs"][0]["template"]["metadata"] = {"finalizers": ["rayscale.io/test-hold"]}
    await kube.create(body)
    try:
        await eventually(lambda: kube.running_workers("raycluster-basic", 2), timeout=60)
        await kube.set_group("raycluster-basic", 0, "replicas", 1)

        async def one_terminating() -> bool:
            pods = await kube.workers("raycluster-basic")
            going = [p for p in pods if p.metadata.deletion_timestamp]
            return len(pods) == 2 and len(going) == 1

        await eventually(one_terminating, timeout=60, message="exactly one worker terminating")
        # make the controller reconcile again (generation bump) and wait until it has
        await kube.set_group("raycluster-basic", 0, "maxReplicas", 6)

        async def reconciled() -> bool:
            return bool((await kube.get("raycluster-basic")).get("status", {}).get("maxWorkerReplicas") == 6)

        await eventually(reconciled, timeout=30, message="status after maxReplicas 6")
        pods = await kube.workers("raycluster-basic")
        seen = [(p.metadata.name, p.metadata.deletion_timestamp, p.status.phase) for p in pods]
        assert await one_terminating(), f"a second worker was deleted or a replacement created: {seen}"
        heads = await kube.pods("raycluster-basic", group="headgroup")
        assert [p.metadata.deletion_timestamp for p in heads] == [None]
    finally:
        await kube.remove_finalizers("raycluster-basic")


async def test_deleted_worker_is_replaced_reusing_its_index(kube: Kube, operator: Operator) -> None:
    await kube.create(basic(3))
    pods = await eventually(lambda: kube.running_workers("raycluster-basic", 3), timeout=60)
    victim = next(p for p in pods if p.metadata.labels[INDEX] == "1")
    await kube.delete_pod(victim.metadata.name)

    async def replaced() -> list[Any]:
        now = await kube.running_workers("raycluster-basic", 3)
        return now if now and victim.metadata.name not in names(now) else []

    now = await eventually(replaced, timeout=60, message="replacement worker")
    assert label_values(now, INDEX) == ["0", "1", "2"]


def tpu(replicas: int, *, autoscaling: bool = False) -> dict[str, Any]:
    body = example("raycluster-multihost-tpu.yaml")
    body["spec"]["enableInTreeAutoscaling"] = autoscaling
    body["spec"]["workerGroupSpecs"][0]["replicas"] = replicas
    return body


async def test_multi_host_replicas_are_whole(kube: Kube, operator: Operator) -> None:
    await kube.create(tpu(2))
    pods = await eventually(lambda: kube.running_workers("raycluster-tpu", 4), timeout=60, message="2 slices")
    replicas = {p.metadata.labels[REPLICA] for p in pods}
    assert len(replicas) == 2
    assert label_values(pods, INDEX) == ["0", "0", "1", "1"]
    assert label_values(pods, HOST) == ["0", "0", "1", "1"]
    svcs = {s.metadata.name for s in await kube.services("raycluster-tpu")}
    assert svcs == {"raycluster-tpu-head-svc", "raycluster-tpu-headless"}

    victim = pods[0]
    await kube.delete_pod(victim.metadata.name)
    old = victim.metadata.labels[REPLICA]

    async def slice_recreated() -> list[Any]:
        now = await kube.running_workers("raycluster-tpu", 4)
        return now if now and old not in {p.metadata.labels[REPLICA] for p in now} else []

    now = await eventually(slice_recreated, timeout=60, message="whole replica recreated")
    assert label_values(now, INDEX) == ["0", "0", "1", "1"]


async def test_multi_host_workers_to_delete_removes_whole_replica(kube: Kube, operator: Operator) -> None:
    await kube.create(tpu(2, autoscaling=True))
    pods = await eventually(lambda: kube.running_workers("raycluster-tpu", 4), timeout=60)
    victim = pods[0]
    doomed = {p.metadata.name for p in pods if p.metadata.labels[REPLICA] == victim.metadata.labels[REPLICA]}
    await kube.patch_json("raycluster-tpu", [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
        {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
         "value": {"workersToDelete": [victim.metadata.name]}},
    ])  # fmt: skip

    async def one_slice_left() -> list[Any]:
        return await kube.running_workers("raycluster-tpu", 2)

    left = await eventually(one_slice_left, timeout=60, message="one slice left")
    assert names(left).isdisjoint(doomed)
    assert names(left) == set(names(pods)) - doomed


async def test_suspend_and_resume(kube: Kube, operator: Operator) -> None:
    await kube.create(basic(2))
    await eventually(lambda: kube.running_workers("raycluster-basic", 2), timeout=60)
    # As KubeRay: both suspend conditions are there from the first status write, False (kubectl
    # wait works); the pods may be Running before that write lands.
    for kind in ("RayClusterSuspended", "RayClusterSuspending"):

        async def false(kind: str = kind) -> bool:
            return (await kube.condition("raycluster-basic", kind) or {}).get("status") == "False"

        await eventually(false, timeout=60, message=f"{kind} False")
    await kube.patch_json("raycluster-basic", [{"op": "add", "path": "/spec/suspend", "value": True}])

    async def suspended() -> bool:
        state = (await kube.get("raycluster-basic")).get("status", {}).get("state")
        return state == "suspended" and not await kube.pods("raycluster-basic")

    await eventually(suspended, timeout=60, message="suspended with no pods")
    cond = await kube.condition("raycluster-basic", "RayClusterSuspended")
    assert cond is not None
    assert cond["status"] == "True"
    await kube.patch_json("raycluster-basic", [{"op": "replace", "path": "/spec/suspend", "value": False}])
    await eventually(lambda: kube.running_workers("raycluster-basic", 2), timeout=60, message="resumed")
    await eventually(lambda: kube.pods("raycluster-basic", group="headgroup"), message="head back")


async def test_invalid_spec_gets_condition_and_event_and_no_pods(kube: Kube, operator: Operator) -> None:
    await kube.create(basic(1, minReplicas=3, maxReplicas=1))
    cond = await eventually(lambda: kube.condition("raycluster-basic", "SpecValid"), timeout=30)
    assert cond["status"] == "False"
    assert cond["reason"] == "InvalidRayClusterSpec"
    assert cond["message"] == "spec.workerGroupSpecs[0].minReplicas: must be <= maxReplicas (3 > 1)"
    (event, *_) = await eventually(lambda: kube.events("InvalidRayClusterSpec"), timeout=30)
    assert event.type == "Warning"
    assert await kube.pods("raycluster-basic") == []
    assert await kube.services("raycluster-basic") == []
    # fixing the spec brings the cluster up
    await kube.set_group("raycluster-basic", 0, "minReplicas", 0)
    await eventually(lambda: kube.running_workers("raycluster-basic", 1), timeout=60, message="fixed")
    assert await kube.condition("raycluster-basic", "SpecValid") is None


async def test_deleting_the_cluster_removes_everything(kube: Kube, operator: Operator) -> None:
    await kube.create(basic(2))
    await eventually(lambda: kube.running_workers("raycluster-basic", 2), timeout=60)
    await kube.delete_cluster("raycluster-basic")

    async def gone() -> bool:
        return not await kube.pods("raycluster-basic") and not await kube.services("raycluster-basic")

    await eventually(gone, timeout=90, message="pods and services garbage-collected")


async def test_restart_during_scale_up_creates_no_extra_pods(kube: Kube, operator: Operator) -> None:
    # autoscaling on: surplus pods would never be deleted, so any extra create shows
    await kube.create(basic(0, autoscaling=True))
    await eventually(lambda: kube.pods("raycluster-basic", group="headgroup"), timeout=60)
    await kube.set_group("raycluster-basic", 0, "replicas", 40)
    await eventually(lambda: _at_least(kube, 5), timeout=60, message="scale-up under way")
    operator.kill()
    operator.start()
    await eventually(lambda: kube.running_workers("raycluster-basic", 40), timeout=90, message="40 workers")
    await kube.set_group("raycluster-basic", 0, "maxReplicas", 99)

    async def reconciled() -> bool:
        return bool((await kube.get("raycluster-basic")).get("status", {}).get("maxWorkerReplicas") == 99)

    await eventually(reconciled, timeout=30)
    assert len(await kube.workers("raycluster-basic")) == 40
    assert label_values(await kube.workers("raycluster-basic"), INDEX) == sorted(str(i) for i in range(40))


async def _at_least(kube: Kube, count: int) -> bool:
    return len(await kube.workers("raycluster-basic")) >= count
