"""Migration from KubeRay's real operator to rayscale and back (docs/migrating-from-kuberay.md).

KubeRay's operator (tools/kuberay-oracle/build-operator.sh, the version of versions.env, built
on first use) creates a RayCluster with a single-host and a multi-host group on the local
control plane (kwok runs the pods). Then KubeRay stops and `rayscale run --mode all` takes the
namespace: it must adopt every pod (none deleted, none added, after several reconciles), write
its own status, scale each group up by exactly one replica and delete exactly what
`workersToDelete` names. Then rayscale stops and KubeRay comes back: nothing is recreated.

Run twice: with KubeRay v1.6's default feature gates (multi-host pods carry the replica labels)
and with RayMultiHostIndexing off, as KubeRay before v1.6 creates them (no replica labels).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from tests.support.builders import ROOT
from tests.support.kube import Kube, established
from tests.support.operators import KubeRayOperator, Operator, beside
from tests.support.polling import eventually

L_REPLICA_NAME = "ray.io/worker-group-replica-name"
NAME = "mig"


def _raycluster() -> dict[str, Any]:
    def container(name: str, cpu: str) -> dict[str, Any]:
        limits = {"cpu": cpu, "memory": "1Gi"}
        return {"name": name, "image": "rayproject/ray:2.46.0", "resources": {"limits": limits}}

    def group(name: str, hosts: int) -> dict[str, Any]:
        return {
            "groupName": name, "replicas": 1, "minReplicas": 0, "maxReplicas": 5, "numOfHosts": hosts,
            "rayStartParams": {}, "template": {"spec": {"containers": [container("ray-worker", "1")]}},
        }  # fmt: skip

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": NAME},
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-head", "1")]}},
            },
            "workerGroupSpecs": [group("single", 1), group("multi", 2)],
        },
    }


Pods = dict[str, str]  # name -> uid


async def _pods(kube: Kube, count: int) -> Pods:
    """The cluster's pods when exactly `count` live ones exist, all Running and none terminating."""
    pods = await kube.pods(NAME)
    ok = len(pods) == count and all(
        p.status.phase == "Running" and not p.metadata.deletion_timestamp for p in pods
    )
    return {p.metadata.name: p.metadata.uid for p in pods} if ok else {}


async def _unchanged(kube: Kube, before: Pods) -> bool:
    now = {p.metadata.name: p.metadata.uid for p in await kube.pods(NAME)}
    assert now == before, f"pods changed: {sorted(set(now.items()) ^ set(before.items()))}"
    return True


async def _observed(kube: Kube, *, rayscale: bool) -> bool:
    """The status was written for the current generation, by rayscale (its HeadPodReady
    condition carries observedGeneration) or by KubeRay (which leaves it unset)."""
    body = await kube.get(NAME)
    status = body.get("status") or {}
    generation = body["metadata"]["generation"]
    head: dict[str, Any] = next(
        (c for c in status.get("conditions") or [] if c["type"] == "HeadPodReady"), {}
    )
    return status.get("observedGeneration") == generation and head.get("observedGeneration") == (
        generation if rayscale else None
    )


async def _touch(kube: Kube, max_replicas: int) -> None:
    """A spec change with no effect on pods, to make the operator reconcile and say so."""
    await kube.set_group(NAME, 0, "maxReplicas", max_replicas)
    await kube.set_group(NAME, 1, "maxReplicas", max_replicas)


async def _scale(kube: Kube, workers_to_delete: dict[int, list[str]], *, replicas: int) -> None:
    ops: list[dict[str, Any]] = []
    for index, names in workers_to_delete.items():
        group = f"/spec/workerGroupSpecs/{index}"
        ops.append({"op": "add", "path": f"{group}/scaleStrategy", "value": {"workersToDelete": names}})
        ops.append({"op": "add", "path": f"{group}/replicas", "value": replicas})
    await kube.patch_json(NAME, ops)


@pytest.mark.parametrize(
    "kuberay", ["", "RayMultiHostIndexing=false"], ids=["v1.6-defaults", "no-replica-labels"], indirect=True
)
async def test_migration_from_kuberay_and_back(
    api: client.ApiClient,
    cluster: testcluster.ClusterHandle,
    namespace: str,
    kuberay: KubeRayOperator,
) -> None:
    rayscale = Operator(cluster, namespace, mode="all")
    with beside(kuberay, rayscale):
        await _migrate(Kube(api, namespace), kuberay, rayscale)


async def _migrate(kube: Kube, kuberay: KubeRayOperator, rayscale: Operator) -> None:
    indexing = "RayMultiHostIndexing=false" not in kuberay.cmd[-1]

    # 1. KubeRay's operator makes the cluster: head, 1 single-host worker, 1 replica of 2 hosts.
    kuberay.start()
    await kube.create(_raycluster())
    kuberay_pods = await eventually(lambda: _pods(kube, 4), timeout=60, message="KubeRay's 4 pods Running")
    multi = await kube.workers(NAME, group="multi")
    assert all((L_REPLICA_NAME in p.metadata.labels) == indexing for p in multi), [
        p.metadata.labels for p in multi
    ]
    await eventually(lambda: _observed(kube, rayscale=False), message="KubeRay's status")
    kuberay.stop()

    # 2. rayscale adopts it: its status, several reconciles, not one pod deleted or created.
    rayscale.start()
    try:
        await eventually(lambda: _observed(kube, rayscale=True), message="rayscale's status")
        for max_replicas in (6, 7):
            await _touch(kube, max_replicas)
            await eventually(lambda: _observed(kube, rayscale=True), message="rayscale reconciled the change")
            await _unchanged(kube, kuberay_pods)
        status = (await kube.get(NAME))["status"]
        assert status["state"] == "ready"
        assert status["availableWorkerReplicas"] == status["desiredWorkerReplicas"] == 3

        # 3. Scale-up of each group by one replica: exactly 1 + 2 new pods, one new replica.
        await kube.set_group(NAME, 0, "replicas", 2)
        await kube.set_group(NAME, 1, "replicas", 2)
        scaled = await eventually(lambda: _pods(kube, 7), timeout=60, message="7 pods Running")
        assert kuberay_pods.items() <= scaled.items()
        new = {p.metadata.name: p for p in await kube.pods(NAME) if p.metadata.name not in kuberay_pods}
        assert sorted(p.metadata.labels["ray.io/group"] for p in new.values()) == ["multi", "multi", "single"]
        replicas = {
            p.metadata.labels.get(L_REPLICA_NAME)
            for p in new.values()
            if p.metadata.labels["ray.io/group"] == "multi"
        }
        assert len(replicas) == 1
        assert None not in replicas

        # 4. workersToDelete (replicas lowered, as an autoscaler does): the adopted single-host
        # worker, and KubeRay's multi-host replica: with replica labels one host named deletes
        # both; without them nothing says which pods form a replica, so both are named.
        single = next(n for n in kuberay_pods if "-single-" in n)
        kuberay_multi = sorted(p.metadata.name for p in multi)
        named = kuberay_multi[:1] if indexing else kuberay_multi
        await _scale(kube, {0: [single], 1: named}, replicas=1)  # one patch, as an autoscaler writes it
        gone = {single, *kuberay_multi}
        expected = {n: u for n, u in scaled.items() if n not in gone}
        await eventually(lambda: _pods(kube, 4), timeout=60, message="4 pods left")
        await _unchanged(kube, expected)
        await _scale(kube, {0: [], 1: []}, replicas=1)
        await eventually(lambda: _observed(kube, rayscale=True), message="rayscale reconciled")
        await _unchanged(kube, expected)
    finally:
        rayscale.stop()

    # 5. The way back: KubeRay's operator again, nothing recreated after it reconciled twice.
    kuberay.start()
    for max_replicas in (8, 9):
        await _touch(kube, max_replicas)
        await eventually(lambda: _observed(kube, rayscale=False), timeout=60, message="KubeRay reconciled")
        await _unchanged(kube, expected)
    assert (await kube.get(NAME))["status"]["state"] == "ready"


def _crd(cluster: testcluster.ClusterHandle) -> dict[str, Any]:
    crd: dict[str, Any] = json.loads(cluster.kubectl_run("get", "crd/rayclusters.ray.io", "-o", "json"))
    return crd


async def test_rayscale_crd_replaces_kuberays_with_v1alpha1_stored(
    api: client.ApiClient, cluster: testcluster.ClusterHandle, namespace: str, kuberay_bindir: Path
) -> None:
    """The migration guide's CRD steps: rayscale's CRD applied over KubeRay's own, whose
    storedVersions still lists v1alpha1; the RayCluster stays readable under both versions; then
    the guide's clean-up leaves storedVersions at v1. (The CRD is cluster-wide: rayscale's is put
    back whatever happens.)"""
    kube = Kube(api, namespace)
    apply = ("apply", "--server-side", "--force-conflicts", "-f")
    try:
        cluster.kubectl_run(*apply, str(kuberay_bindir / "crds" / "ray.io_rayclusters.yaml"))
        await eventually(lambda: established(cluster, "rayclusters.ray.io"), message="KubeRay's CRD")
        both = '{"status":{"storedVersions":["v1alpha1","v1"]}}'
        cluster.kubectl_run(
            "patch", "crd", "rayclusters.ray.io", "--subresource=status", "--type=merge", "-p", both
        )
        await kube.create(_raycluster())

        cluster.kubectl_run(*apply, str(ROOT / "crds"))  # the guide's step 1
        await eventually(lambda: established(cluster, "rayclusters.ray.io"), message="rayscale's CRD")
        crd = _crd(cluster)
        served = {v["name"]: (v["served"], v["storage"]) for v in crd["spec"]["versions"]}
        assert served == {"v1": (True, True), "v1alpha1": (True, False)}
        assert crd["status"]["storedVersions"] == ["v1alpha1", "v1"]
        assert (await kube.get(NAME))["metadata"]["name"] == NAME
        old = await kube.objects.get_namespaced_custom_object(
            "ray.io", "v1alpha1", namespace, "rayclusters", NAME
        )
        assert old["apiVersion"] == "ray.io/v1alpha1"

        # The guide's storedVersions clean-up (one namespace here, -A there).
        stored = cluster.kubectl_run("get", "rayclusters.v1.ray.io", "-n", namespace, "-o", "json")
        cluster.kubectl_run("replace", "-f", "-", input=stored)
        only_v1 = '{"status":{"storedVersions":["v1"]}}'
        cluster.kubectl_run(
            "patch", "crd", "rayclusters.ray.io", "--subresource=status", "--type=merge", "-p", only_v1
        )
        assert _crd(cluster)["status"]["storedVersions"] == ["v1"]
    finally:
        cluster.kubectl_run(*apply, str(ROOT / "crds"))
        await eventually(lambda: established(cluster, "rayclusters.ray.io"), message="rayscale's CRD back")
        with contextlib.suppress(client.ApiException):
            await kube.delete_cluster(NAME)


async def test_helm_uninstall_of_kuberays_release_keeps_crds_and_rayclusters(
    api: client.ApiClient,
    cluster: testcluster.ClusterHandle,
    namespace: str,
    kuberay_bindir: Path,
    helm: str,
    tmp_path: Path,
) -> None:
    """The guide's step 2. KubeRay's chart ships its CRDs in crds/, which Helm installs once and
    never tracks; a release built the same way here (KubeRay's own CRD files from the module,
    one templated object) is installed and uninstalled: the CRD and the RayCluster stay."""
    chart = tmp_path / "kuberay-operator"
    (chart / "crds").mkdir(parents=True)
    (chart / "templates").mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: kuberay-operator\nversion: 1.6.2\n")
    for crd in (kuberay_bindir / "crds").glob("ray.io_*.yaml"):
        shutil.copy(crd, chart / "crds" / crd.name)
    marker = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kuberay-operator-marker"}}
    (chart / "templates" / "marker.yaml").write_text(yaml.safe_dump(marker))

    def run(*args: str) -> None:
        out = subprocess.run([helm, *args, "--namespace", namespace], env=cluster.env, capture_output=True,
                             text=True, timeout=180, check=False)  # fmt: skip
        assert out.returncode == 0, out.stderr

    kube = Kube(api, namespace)
    run("install", "kuberay-operator", str(chart))
    await kube.create(_raycluster())
    run("uninstall", "kuberay-operator")
    config_maps = {c.metadata.name for c in (await kube.core.list_namespaced_config_map(namespace)).items}
    assert "kuberay-operator-marker" not in config_maps, "the release was not uninstalled"
    assert established(cluster, "rayclusters.ray.io")
    assert (await kube.get(NAME))["metadata"]["name"] == NAME
    await kube.delete_cluster(NAME)
