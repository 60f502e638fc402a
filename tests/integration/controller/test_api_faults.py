"""The controller through the fault proxy (e2e/chaos/faultproxy.py): pod creates that fail, watches
cut every few seconds; once the faults stop, the cluster has exactly its workers."""

from __future__ import annotations

import copy
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from e2e.chaos.faultproxy import FaultProxy, Rule
from hack.localk8s import testcluster

from tests.support.builders import example
from tests.support.kube import Kube, label_values
from tests.support.operators import Operator, running
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
NAME = "raycluster-basic"
INDEX = "ray.io/worker-group-replica-index"
POD_CREATES = r"/api/v1/namespaces/[^/]+/pods$"
WORKERS = 6
CONVERGE = 90.0  # failed writes back a cluster off; convergence can take tens of seconds


@pytest.fixture
def proxy(cluster: testcluster.ClusterHandle) -> Iterator[FaultProxy]:
    with FaultProxy.running(cluster.kubeconfig, seed=7) as p:
        yield p


@pytest.fixture
def operator(
    cluster: testcluster.ClusterHandle,
    namespace: str,
    raycluster_crd: None,
    proxy: FaultProxy,
    request: pytest.FixtureRequest,
) -> Iterator[Operator]:
    """`rayscale run --mode controller` whose every API call goes through the proxy."""
    yield from running(Operator(cluster, namespace, extra=["--kubeconfig", str(proxy.kubeconfig)]), request)


@pytest.mark.parametrize("lost", [False, True], ids=["create-refused", "create-response-lost"])
async def test_controller_converges_to_exactly_its_workers_after_api_faults(
    kube: Kube, proxy: FaultProxy, operator: Operator, lost: bool
) -> None:
    # create-response-lost: the pod is created but the operator is told 500, the classic way to
    # get a duplicate. Autoscaling on: the controller never removes surplus workers, so a
    # duplicate stays and shows.
    proxy.set_rules(
        [
            Rule(status=500, method="POST", path=POD_CREATES, lose_response=lost, times=2, name="first two"),
            Rule(
                status=500, method="POST", path=POD_CREATES, lose_response=lost, probability=0.3, name="30%"
            ),
            Rule(cut_after=3.0, watch=True, name="watches"),
        ]
    )
    body = example("raycluster-basic.yaml")
    body["spec"]["enableInTreeAutoscaling"] = True
    body["spec"]["workerGroupSpecs"][0]["replicas"] = WORKERS
    await kube.create(body)

    def faults_done() -> dict[str, int] | None:
        counts = proxy.counts()
        return counts if counts.get("first two") == 2 and counts.get("watches_cut", 0) >= 3 else None

    injected = await eventually(faults_done, timeout=60, message="two failed creates and three cut watches")
    await eventually(lambda: at_least(kube, 3), timeout=60, message="scale-up under way through the faults")
    proxy.heal()

    pods = await eventually(lambda: exactly_workers(kube), timeout=CONVERGE, message=f"{WORKERS} workers")
    assert label_values(pods, INDEX) == [str(i) for i in range(WORKERS)]
    # One more reconcile after convergence (maxReplicas shows in the status): still exactly WORKERS.
    await kube.set_group(NAME, 0, "maxReplicas", 99)

    async def reconciled() -> bool:
        return bool((await kube.get(NAME)).get("status", {}).get("maxWorkerReplicas") == 99)

    await eventually(reconciled, timeout=CONVERGE, message="maxWorkerReplicas 99 in the status")
    await exactly_workers(kube)
    assert operator.proc is not None
    assert operator.proc.poll() is None, "the operator exited"
    assert len(await kube.pods(NAME, group="headgroup")) == 1
    print(f"injected before healing: {injected}; in all: {proxy.counts()}")


async def at_least(kube: Kube, count: int) -> bool:
    return len(await kube.workers(NAME)) >= count


async def exactly_workers(kube: Kube) -> list[Any]:
    """The workers when there are exactly WORKERS, all Running, with distinct indices; else an
    AssertionError saying what there is (eventually reports the last one)."""
    pods = await kube.workers(NAME)
    seen = sorted((p.metadata.labels.get(INDEX, "?"), p.metadata.name, p.status.phase) for p in pods)
    live = [p for p in pods if not p.metadata.deletion_timestamp]
    assert len(live) == WORKERS, f"workers (index, name, phase): {seen}"
    assert all(p.status.phase == "Running" for p in live), f"workers (index, name, phase): {seen}"
    assert len(set(label_values(live, INDEX))) == WORKERS, f"workers (index, name, phase): {seen}"
    return live


EVENT_POSTS = r"/api/v1/namespaces/[^/]+/events$"
CUT = "event posts cut"


async def create_with_event_posts_cut(
    kube: Kube, proxy: FaultProxy, *, cuts: int, workers: int
) -> dict[str, Any]:
    """The next `cuts` Event posts are disconnected (counted as CUT); the example RayCluster is
    created with `workers` workers."""
    proxy.set_rules([Rule(disconnect=True, method="POST", path=EVENT_POSTS, times=cuts, name=CUT)])
    body = example("raycluster-basic.yaml")
    body["spec"]["workerGroupSpecs"][0]["replicas"] = workers
    await kube.create(body)
    return body


# A broken connection used to kill the Event worker that saw it (aiohttp's ServerDisconnectedError
# is not an OSError): SIGTERM then failed in kopf's cleanup and, once every worker had died, no
# Event reached the API server. Transport errors are now failed calls like any other.


async def test_sigterm_stops_the_operator_after_an_event_post_saw_the_server_disconnect(
    kube: Kube, proxy: FaultProxy, operator: Operator
) -> None:
    await create_with_event_posts_cut(kube, proxy, cuts=1, workers=1)
    await eventually(lambda: proxy.counts().get(CUT) == 1, timeout=60, message="an event post cut")
    proc = operator.proc
    assert proc is not None
    os.killpg(proc.pid, signal.SIGTERM)
    await eventually(lambda: proc.poll() is not None, timeout=20, message="exited after SIGTERM")


async def test_events_are_still_posted_after_event_posts_saw_the_server_disconnect(
    kube: Kube, proxy: FaultProxy, operator: Operator
) -> None:
    # one disconnect per recorder worker (4); each cluster posts 3 Events (Service, head, workers)
    body = await create_with_event_posts_cut(kube, proxy, cuts=4, workers=4)
    second = copy.deepcopy(body)
    second["metadata"]["name"] = f"{NAME}-second"
    await kube.create(second)
    await eventually(lambda: proxy.counts().get(CUT) == 4, timeout=60, message="four event posts cut")
    before = {p.metadata.name for p in await kube.workers(NAME)}
    await kube.set_group(NAME, 0, "replicas", 6)
    pods = await eventually(lambda: kube.running_workers(NAME, 6), timeout=60, message="6 workers")
    new = {p.metadata.name for p in pods} - before

    async def posted() -> set[str]:
        messages = " ".join(e.message for e in await kube.events("CreatedWorkerPod"))
        missing = {name for name in new if name not in messages}
        assert not missing, f"no CreatedWorkerPod Event for {sorted(missing)}"
        return new

    await eventually(posted, timeout=20, message="CreatedWorkerPod Events of the new workers")
