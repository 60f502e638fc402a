"""kwok Nodes of a test's own, for the disruption tests (a real Ray through the e2e Ray bridge): a
Node can be cordoned, tainted or drained without touching anything but the test's pods, and
`kubectl drain` run against one as an operator would.

Each Node is labelled and tainted ``rayscale.test/for=<namespace>`` (NoSchedule), so only pods
that select and tolerate it (`pin`) land there. ``tpu`` gives each Node ``google.com/tpu``
capacity, as a GKE TPU host has: a pod asking for 4 TPUs takes a Node of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
from hack.localk8s import launcher, testcluster
from kubernetes_asyncio.client.exceptions import ApiException

__all__ = ["FOR", "KubectlDrain", "drain", "evict", "kwok_nodes", "node_manifest", "own_nodes", "pin"]

FOR = "rayscale.test/for"  # the Nodes' label and taint key: the namespace they are for


def node_manifest(name: str, namespace: str, *, tpu: int = 0) -> dict[str, Any]:
    """A kwok Node for `namespace`'s pods alone (16 CPUs; `tpu` TPU chips)."""
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    if tpu:
        capacity["google.com/tpu"] = str(tpu)
    labels = {"kubernetes.io/hostname": name, "type": "kwok", FOR: namespace}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": labels},
        "spec": {"taints": [{"key": FOR, "value": namespace, "effect": "NoSchedule"}]},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


@contextlib.contextmanager
def kwok_nodes(
    cluster: testcluster.ClusterHandle, namespace: str, count: int, *, tpu: int = 0
) -> Iterator[list[str]]:
    """`count` Nodes for `namespace`, deleted on the way out (without waiting)."""
    digest = hashlib.sha1(namespace.encode()).hexdigest()[:10]
    made = [f"disrupt-{digest}-{i}" for i in range(count)]
    try:
        for name in made:
            cluster.kubectl_run(
                "create", "-f", "-", input=json.dumps(node_manifest(name, namespace, tpu=tpu))
            )
        yield made
    finally:
        for name in made:
            cluster.kubectl_run("delete", "node", name, "--wait=false", check=False)


def own_nodes(
    cluster: testcluster.ClusterHandle, namespace: str, count: int, *, tpu: int = 0
) -> Iterator[list[str]]:
    """A fixture's body: `kwok_nodes`, or the test skipped on a cluster that is not the local one."""
    if not cluster.local:
        pytest.skip("makes kwok Nodes: the local control plane only")
    with kwok_nodes(cluster, namespace, count, tpu=tpu) as made:
        yield made


def pin(group: MutableMapping[str, Any], namespace: str) -> MutableMapping[str, Any]:
    """`group` (a worker group spec) with its pods on `namespace`'s Nodes only."""
    spec = group["template"]["spec"]
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), FOR: namespace}
    spec["tolerations"] = [*(spec.get("tolerations") or []), {"key": FOR, "operator": "Exists"}]
    return group


class KubectlDrain:
    """A running ``kubectl drain NODE``: it cordons the Node, then evicts its pods through the
    Eviction API, retrying while a PodDisruptionBudget refuses (HTTP 429: kubectl's client first
    waits out the answer's ``Retry-After`` by itself, up to 10 times, then kubectl prints the
    refusal and tries again 5 s later), and waits for them to be gone. Its output goes to `log`."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path, started: float) -> None:
        self.process, self.log, self.started = process, log, started

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def exit_code(self) -> int | None:
        return self.process.returncode


@contextlib.asynccontextmanager
async def drain(
    cluster: testcluster.ClusterHandle, node: str, log: Path, *, give_up: float = 300
) -> AsyncIterator[KubectlDrain]:
    """``kubectl drain`` of `node` running in the background (it gives up after `give_up` s);
    killed on the way out if still running."""
    argv, preexec = launcher.dying_with_parent([
        cluster.kubectl, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
        f"--timeout={give_up:.0f}s",
    ])  # fmt: skip
    with log.open("ab") as out:
        process = await asyncio.create_subprocess_exec(
            *argv,
            env=cluster.env,
            stdout=out,
            stderr=out,
            start_new_session=True,
            preexec_fn=preexec,
        )
    running = KubectlDrain(process, log, time.monotonic())
    ended = asyncio.create_task(process.wait())
    try:
        yield running
    finally:
        if process.returncode is None:
            process.kill()
        await ended


async def evict(core: Any, namespace: str, pod: str) -> tuple[int, str]:
    """An eviction of `pod` through the Eviction API, as kubectl drain asks it: the HTTP status
    (201 when it passed) and the refusal's body."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
    try:
        await core.create_namespaced_pod_eviction(pod, namespace, body)
    except ApiException as exc:
        return int(exc.status), str(exc.body)
    return 201, ""
