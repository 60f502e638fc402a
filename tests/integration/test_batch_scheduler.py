"""``rayscale run --batch-scheduler`` against a real API server with the PodGroup CRDs: Volcano's
(scheduling.volcano.sh/v1beta1) and scheduler-plugins' (scheduling.x-k8s.io/v1alpha1, the CRD of
the Go module sigs.k8s.io/scheduler-plugins the KubeRay oracle builds against). No batch scheduler
runs: the test checks what rayscale makes for one, as KubeRay makes it (the KubeRay differential,
tests/kuberay/test_batch_scheduler_against_kuberay.py, checks the fields against KubeRay's code).

Volcano: the PodGroup ``ray-<cluster>-pg`` owned by the RayCluster, resized when the replicas change
and made again when deleted; every pod goes to ``volcano``, names the PodGroup and its group, and
carries the queue label. scheduler-plugins: a gang (``ray.io/gang-scheduling-enabled``) gets the
PodGroup named after the cluster, its pods the ``scheduling.x-k8s.io/pod-group`` label. A label
asking for another scheduler gets a Warning Event."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hack.localk8s import testcluster
from kubernetes_asyncio.client.exceptions import ApiException

from tests.support.builders import example
from tests.support.kube import Kube, established
from tests.support.operators import Operator, running
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
ORACLE = ROOT / "tools" / "kuberay-oracle"
NAME = "raycluster-basic"
WAIT = 60.0
# Volcano's API module (volcano.sh/apis) ships no CRD: its PodGroup CRD as Volcano installs it, with
# the fields rayscale writes in a structural schema (the rest kept as written).
_QUANTITY = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
_SPEC = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        "minMember": {"type": "integer", "format": "int32"},
        "minResources": {"type": "object", "additionalProperties": _QUANTITY},
        "queue": {"type": "string"},
        "priorityClassName": {"type": "string"},
    },
}
_NAMES = {"kind": "PodGroup", "listKind": "PodGroupList", "plural": "podgroups", "singular": "podgroup"}
_SCHEMA = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"spec": _SPEC}}
VOLCANO_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.volcano.sh"},
    "spec": {
        "group": "scheduling.volcano.sh",
        "scope": "Namespaced",
        "names": _NAMES,
        "versions": [
            {
                "name": "v1beta1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": _SCHEMA},
            }
        ],
    },
}


def _scheduler_plugins_crd() -> Path:
    """The PodGroup CRD of the scheduler-plugins module the oracle's go.mod requires (Go's module
    cache; ``go mod download`` fetches the module's zip when it is not there)."""
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    proc = subprocess.run(
        ["go", "mod", "download", "-json", "sigs.k8s.io/scheduler-plugins"],
        cwd=ORACLE, capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return (
        Path(json.loads(proc.stdout)["Dir"])
        / "config"
        / "crd"
        / "bases"
        / "scheduling.x-k8s.io_podgroups.yaml"
    )


CRDS = ("podgroups.scheduling.volcano.sh", "podgroups.scheduling.x-k8s.io")


@pytest.fixture(scope="module")
async def podgroup_crds(cluster: testcluster.ClusterHandle, raycluster_crd: None) -> tuple[str, ...]:
    """Both PodGroup CRDs established (and rayscale's)."""
    volcano_crd = json.dumps(VOLCANO_CRD)
    cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", "-", input=volcano_crd)
    cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", str(_scheduler_plugins_crd()))
    for crd in CRDS:
        await eventually(lambda: established(cluster, crd), message=f"CRD {crd}")  # noqa: B023
    return CRDS


def _operator(
    scheduler: str, crds: tuple[str, ...], namespace: str, request: pytest.FixtureRequest
) -> Iterator[Operator]:
    assert crds == CRDS
    cluster = request.getfixturevalue("cluster")
    yield from running(Operator(cluster, namespace, extra=["--batch-scheduler", scheduler]), request)


@pytest.fixture
def volcano(
    podgroup_crds: tuple[str, ...], namespace: str, request: pytest.FixtureRequest
) -> Iterator[Operator]:
    """`rayscale run --mode controller --batch-scheduler volcano` for the test's namespace."""
    yield from _operator("volcano", podgroup_crds, namespace, request)


@pytest.fixture
def scheduler_plugins(
    podgroup_crds: tuple[str, ...], namespace: str, request: pytest.FixtureRequest
) -> Iterator[Operator]:
    """`rayscale run --mode controller --batch-scheduler scheduler-plugins` for the test's namespace."""
    yield from _operator("scheduler-plugins", podgroup_crds, namespace, request)


async def _pod_group(kube: Kube, group: str, version: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = await kube.objects.get_namespaced_custom_object(
            group, version, kube.ns, "podgroups", name
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


def _labelled(**labels: str) -> dict[str, Any]:
    body = example("raycluster-basic.yaml")
    body["metadata"]["labels"] = labels
    return body


@pytest.mark.usefixtures("volcano")
async def test_volcano_pod_group_and_pods(kube: Kube) -> None:
    await kube.create(_labelled(**{"volcano.sh/queue-name": "team-a", "ray.io/scheduler-name": "yunikorn"}))
    group = ("scheduling.volcano.sh", "v1beta1", f"ray-{NAME}-pg")

    async def sized(members: int) -> dict[str, Any] | None:
        found = await _pod_group(kube, *group)
        return found if found is not None and found["spec"]["minMember"] == members else None

    made = await eventually(lambda: sized(3), timeout=WAIT, message="PodGroup of 3")
    assert made["spec"]["queue"] == "team-a"
    assert made["spec"]["minResources"] == {"cpu": "3", "memory": "4Gi"}  # head 1, 2Gi; 2 x (1, 1Gi)
    cluster = await kube.get(NAME)
    (owner,) = made["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "RayCluster", NAME, cluster["metadata"]["uid"], True
    )  # fmt: skip

    pods = await eventually(lambda: _all_pods(kube, 3), timeout=WAIT, message="3 pods")
    for pod in pods:
        assert pod.spec.scheduler_name == "volcano"
        assert pod.metadata.labels["volcano.sh/queue-name"] == "team-a"
        annotations = pod.metadata.annotations
        assert annotations["scheduling.k8s.io/group-name"] == f"ray-{NAME}-pg"
        assert annotations["volcano.sh/task-spec"] == pod.metadata.labels["ray.io/group"]
    warned = await eventually(lambda: kube.events("BatchScheduler"), timeout=WAIT, message="a Warning Event")
    assert "ray.io/scheduler-name=yunikorn is ignored" in warned[0].message

    await kube.set_group(NAME, 0, "replicas", 4)  # resized as the spec changes
    await eventually(lambda: sized(5), timeout=WAIT, message="PodGroup of 5")
    await kube.objects.delete_namespaced_custom_object(group[0], group[1], kube.ns, "podgroups", group[2])
    await eventually(lambda: sized(5), timeout=WAIT, message="PodGroup made again")  # at the next resync


async def _all_pods(kube: Kube, count: int) -> list[Any] | None:
    pods = await kube.pods(NAME, live=True)
    return pods if len(pods) == count else None


@pytest.mark.usefixtures("scheduler_plugins")
async def test_scheduler_plugins_gang(kube: Kube) -> None:
    await kube.create(_labelled(**{"ray.io/gang-scheduling-enabled": "true"}))
    made = await eventually(
        lambda: _pod_group(kube, "scheduling.x-k8s.io", "v1alpha1", NAME), timeout=WAIT, message="PodGroup"
    )
    assert made["spec"]["minMember"] == 3
    (owner,) = made["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("RayCluster", NAME)
    pods = await eventually(lambda: _all_pods(kube, 3), timeout=WAIT, message="3 pods")
    for pod in pods:
        assert pod.spec.scheduler_name == "scheduler-plugins-scheduler"
        assert pod.metadata.labels["scheduling.x-k8s.io/pod-group"] == NAME
