"""Leader election (`rayscale run --leader-elect`) with real processes on the local control plane.

Two or three `rayscale run` processes share one Lease in the test namespace: only the holder runs kopf
and reconciles; the others say whom they wait for. SIGKILL of the leader: a standby takes over once
the Lease expires. SIGTERM: the leader releases the Lease and a standby takes it at its next poll. A
leader that finds someone else holding the Lease stops at once and exits 1; a standby stopped while
it waits exits 0.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import aiohttp
import pytest
from hack.localk8s.testcluster import ClusterHandle
from kubernetes_asyncio import client

from tests.support.builders import example
from tests.support.kube import Kube
from tests.support.operators import Operator, free_port
from tests.support.polling import eventually
from tests.support.watching import watched

LEASE = "rayscale"
FENCED = "not sent, this replica may no longer hold the leader Lease"
BECAME = re.compile(r"became leader: Lease \S+ held by (\S+)")


@pytest.fixture
def start(
    cluster: ClusterHandle,
    namespace: str,
    raycluster_crd: None,
) -> Iterator[Callable[..., Operator]]:
    """Start `rayscale run --leader-elect` processes; all are stopped after. Their logs are printed
    (pytest shows captured output only for a failed test)."""
    started: list[Operator] = []

    def one(liveness: str = "", metrics_port: int = 0, more: Sequence[str] = ()) -> Operator:
        extra = [
            "--leader-elect",
            "--leader-election-namespace",
            namespace,
            "--metrics-port",
            str(metrics_port),
            *more,
        ]
        op = Operator(cluster, namespace, liveness, extra=extra)
        op.start()
        started.append(op)
        return op

    yield one
    for i, op in enumerate(started):
        op.stop()
        print(f"--- rayscale #{i} ({op.log}) ---\n{op.log.read_text(errors='replace')[-5000:]}")
        op.log.unlink(missing_ok=True)


def leader_identity(op: Operator) -> str:
    found = BECAME.search(op.log.read_text(errors="replace"))
    return found.group(1) if found else ""


def waits_for(op: Operator, identity: str) -> bool:
    return f"waiting for leadership of Lease {op.namespace}/{LEASE} held by {identity}" in op.output()


async def lease(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    leases: Any = client.CoordinationV1Api(api)  # untyped: the response is read raw (_preload_content=False)
    raw = await leases.read_namespaced_lease(LEASE, namespace, _preload_content=False)
    body: dict[str, Any] = await raw.json()
    return body


async def holder(api: client.ApiClient, namespace: str) -> str:
    try:
        return str((await lease(api, namespace))["spec"].get("holderIdentity") or "")
    except client.ApiException as exc:
        if exc.status == 404:
            return ""
        raise


async def probe(url: str) -> dict[str, Any] | None:
    """The liveness endpoint's JSON when it answers 200."""
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            return dict(await resp.json()) if resp.status == 200 else None
    except aiohttp.ClientError:
        return None


async def leading(port: int) -> str | None:
    """This replica's leader_election_master_status as /metrics prints it (None: no answer yet)."""
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as resp,
        ):
            text = await resp.text()
    except aiohttp.ClientError:
        return None
    found = re.search(rf'^leader_election_master_status{{name="{LEASE}"}} (\S+)$', text, re.M)
    return found.group(1) if found else None


def exited(op: Operator) -> int | None:
    assert op.proc is not None
    return op.proc.poll()


async def test_one_leader_reconciles_and_a_standby_takes_over(
    api: client.ApiClient, namespace: str, start: Callable[..., Operator]
) -> None:
    kube = Kube(api, namespace)
    first = start()
    first_id = await eventually(lambda: leader_identity(first), timeout=60, message="the first one leads")
    assert await holder(api, namespace) == first_id
    url, metrics_port = f"http://127.0.0.1:{free_port()}/healthz", free_port()
    second = start(url, metrics_port)
    await eventually(lambda: waits_for(second, first_id), timeout=60, message="the second one waits")
    # A standby is alive (its liveness probe passes) before it leads.
    assert await eventually(lambda: probe(url), timeout=30, message="standby probe") == {
        "standby": "waiting for leadership"
    }
    # ...and serves /metrics, saying it does not lead.
    assert await eventually(lambda: leading(metrics_port), timeout=30, message="standby metrics") == "0.0"

    body = example("raycluster-basic.yaml")
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 1
    await kube.create(body)
    await eventually(lambda: kube.running_workers("raycluster-basic", 1), timeout=90, message="1 worker")
    assert len(await kube.pods("raycluster-basic")) == 2  # head and worker, created once
    assert not leader_identity(second)
    assert "kopf" not in second.output()  # the standby has not even started kopf

    # SIGKILL: no release. The second takes over once the Lease expired, and reconciles.
    first.kill()
    second_id = await eventually(lambda: leader_identity(second), timeout=90, message="the second leads")

    async def kopf_probe() -> bool:
        return "watch" in (await probe(url) or {})

    await eventually(kopf_probe, timeout=60, message="kopf's probe on the same port once it leads")
    assert await leading(metrics_port) == "1.0"
    spec = (await lease(api, namespace))["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == (second_id, 1)
    await kube.set_group("raycluster-basic", 0, "replicas", 2)
    await eventually(lambda: kube.running_workers("raycluster-basic", 2), timeout=90, message="2 workers")

    # SIGTERM: the leader releases the Lease on its way out; a new standby takes it.
    third = start()
    await eventually(lambda: waits_for(third, second_id), timeout=60, message="the third one waits")
    assert second.proc is not None
    os.killpg(second.proc.pid, signal.SIGTERM)
    assert await eventually(lambda: exited(second) is not None, timeout=60, message="the second exits")
    assert exited(second) == 0
    assert f"released Lease {namespace}/{LEASE}" in second.output()
    third_id = await eventually(lambda: leader_identity(third), timeout=90, message="the third leads")
    assert await holder(api, namespace) == third_id
    await kube.set_group("raycluster-basic", 0, "replicas", 3)
    await eventually(lambda: kube.running_workers("raycluster-basic", 3), timeout=90, message="3 workers")
    assert len(await kube.pods("raycluster-basic", live=True)) == 4


async def test_a_leader_that_loses_the_lease_exits_at_once_and_a_standby_stops_cleanly(
    api: client.ApiClient, namespace: str, start: Callable[..., Operator]
) -> None:
    op = start()
    identity = await eventually(lambda: leader_identity(op), timeout=60, message="it leads")
    # A standby stopped while it waits exits cleanly and leaves the Lease alone.
    waiter = start()
    await eventually(lambda: waits_for(waiter, identity), timeout=60, message="a standby waits")
    assert waiter.proc is not None
    os.killpg(waiter.proc.pid, signal.SIGTERM)
    await eventually(lambda: exited(waiter) is not None, timeout=60, message="the standby exits")
    assert exited(waiter) == 0
    assert "stopped while waiting for leadership" in waiter.output()
    body = await lease(api, namespace)
    assert body["spec"]["holderIdentity"] == identity
    body["spec"]["holderIdentity"] = "someone-else"  # as if another replica had taken it over
    leases: Any = client.CoordinationV1Api(api)  # untyped: the body is a plain dict
    await leases.replace_namespaced_lease(LEASE, namespace, body)
    await eventually(lambda: exited(op) is not None, timeout=60, message="the old leader exits")
    assert exited(op) == 1
    assert f"Lease {namespace}/{LEASE} is held by someone-else" in op.output()
    assert await holder(api, namespace) == "someone-else"  # it did not write the Lease back


async def status(port: int) -> tuple[int, dict[str, Any]] | None:
    """The status API's answer to GET /api/v1/clusters: (status, JSON); None while nothing answers."""
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/api/v1/clusters") as resp,
        ):
            return resp.status, dict(await resp.json())
    except aiohttp.ClientError:
        return None


async def test_the_status_api_answers_on_the_leader_and_names_it_on_a_standby(
    api: client.ApiClient, namespace: str, start: Callable[..., Operator]
) -> None:
    ports = free_port(), free_port()

    def status_on(port: int) -> list[str]:
        return ["--mode", "all", "--status-address", "127.0.0.1", "--status-port", str(port)]

    first = start(more=status_on(ports[0]))
    first_id = await eventually(lambda: leader_identity(first), timeout=60, message="the first one leads")
    second = start(more=status_on(ports[1]))
    await eventually(lambda: waits_for(second, first_id), timeout=60, message="the second one waits")

    async def answer(port: int, code: int) -> dict[str, Any] | None:
        found = await status(port)
        return found[1] if found is not None and found[0] == code else None

    body = await eventually(lambda: answer(ports[0], 200), timeout=60, message="the leader's status API")
    assert (body["clusters"], body["leader"]) == ([], True)
    body = await eventually(lambda: answer(ports[1], 503), timeout=30, message="the standby's status API")
    assert body == {"error": "not the leader", "leader": first_id}

    assert first.proc is not None
    os.killpg(first.proc.pid, signal.SIGTERM)  # releases the Lease: the standby leads and answers
    await eventually(lambda: leader_identity(second), timeout=90, message="the second leads")
    body = await eventually(lambda: answer(ports[1], 200), timeout=60, message="the new leader's status API")
    assert body["leader"] is True


def worker_pods_created(kube: Kube, cluster: str) -> AbstractAsyncContextManager[list[str]]:
    """The names of the worker pods of `cluster` the API server reports as ADDED from now on."""

    def added(event: dict[str, Any]) -> str | None:
        return str(event["raw_object"]["metadata"]["name"]) if event["type"] == "ADDED" else None

    selector = f"ray.io/cluster={cluster},ray.io/node-type=worker"
    return watched(kube.core.list_namespaced_pod, kube.ns, label_selector=selector, keep=added)


async def test_a_frozen_leader_that_resumes_after_a_takeover_writes_nothing(
    api: client.ApiClient, namespace: str, start: Callable[..., Operator]
) -> None:
    """The leader is frozen (SIGSTOP) in the middle of creating 30 workers: its API rate limit (2
    requests a second) keeps most creates queued. A standby takes over once the Lease expires
    and creates the rest. Resumed (SIGCONT), the old leader's queued creates wake up with their
    tokens; the write fence refuses every one of them, and it exits. Every worker pod was
    created exactly once."""
    kube = Kube(api, namespace)
    first = start(more=["--kube-api-qps", "2", "--kube-api-burst", "1"])
    first_id = await eventually(lambda: leader_identity(first), timeout=60, message="the first one leads")
    second = start()
    await eventually(lambda: waits_for(second, first_id), timeout=60, message="the second one waits")

    replicas = 30
    body = example("raycluster-basic.yaml")
    body["spec"]["workerGroupSpecs"][0]["replicas"] = replicas
    body["spec"]["workerGroupSpecs"][0]["maxReplicas"] = replicas + 1
    async with worker_pods_created(kube, "raycluster-basic") as created:
        await kube.create(body)
        await eventually(lambda: len(created) >= 2, timeout=60, message="the first creates go out")
        assert first.proc is not None
        os.killpg(first.proc.pid, signal.SIGSTOP)
        try:
            frozen_with = len(created)
            assert frozen_with < replicas  # frozen mid-scale
            await eventually(lambda: leader_identity(second), timeout=90, message="the standby takes over")

            async def the_rest() -> list[Any]:
                return await kube.workers("raycluster-basic", live=True) if len(created) >= replicas else []

            live = await eventually(
                the_rest, timeout=90, message=f"the new leader creates the rest of the {replicas}"
            )
            assert len(live) == replicas
        finally:
            os.killpg(first.proc.pid, signal.SIGCONT)
        await eventually(lambda: exited(first) is not None, timeout=60, message="the old leader exits")
        assert exited(first) == 1
        # Anything it sent after resuming would have been ADDED by now: the new leader answers
        # another change only after the old one is gone, and the watch is ordered.
        await kube.set_group("raycluster-basic", 0, "replicas", replicas + 1)
        await eventually(lambda: len(created) > replicas, timeout=60, message="the new leader scales on")
    assert len(created) == len(set(created)) == replicas + 1, f"{len(created) - replicas - 1} pods too many"
    assert len(await kube.workers("raycluster-basic", live=True)) == replicas + 1
    assert FENCED in first.output() or "lost leadership" in first.output()
