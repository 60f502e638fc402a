"""The chart's RBAC is enough for rayscale, and no more.

`helm install` puts the chart into the real API server (no operator replica: there is no image
registry here). rayscale then runs out of cluster with a kubeconfig that holds a token of the
chart's ServiceAccount, with leader election on its Lease in the release namespace, and takes a
RayCluster through create, scale-up, workersToDelete and delete; it watches the Nodes for their
disruption notices (read only). `kubectl auth can-i` with the same token proves what it may not
do: no Lease but its own, no Secret read but the named auth token (which rayscale creates, for a
cluster with token auth), no write to a Node.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hack.localk8s import launcher
from hack.localk8s.testcluster import ClusterHandle
from kubernetes_asyncio import client

from tests.support.builders import example
from tests.support.kube import Kube, names
from tests.support.polling import eventually

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "rayscale"


class Release:
    def __init__(self, cluster: ClusterHandle, helm: str, watched: str) -> None:
        self.cluster = cluster
        self.helm = helm
        self.name = f"rs-{uuid.uuid4().hex[:6]}"
        self.namespace = f"{self.name}-system"
        self.watched = watched
        self.sa = f"{self.name}-rayscale"
        self.lease = self.sa  # the chart's full name

    def install(self) -> None:
        cmd = [self.helm, "install", self.name, str(CHART), "--namespace", self.namespace,
               "--create-namespace", "--skip-crds", "--set", "replicas=0",
               "--set", f"watchNamespace={{{self.watched}}}",
               "--set", f"autoscaler.authTokenSecrets[0].namespace={self.watched}",
               "--set", "autoscaler.authTokenSecrets[0].name=raycluster-basic"]  # fmt: skip
        out = subprocess.run(
            cmd, env=self.cluster.env, capture_output=True, text=True, timeout=180, check=False
        )
        assert out.returncode == 0, out.stderr

    def uninstall(self) -> None:
        cmd = [self.helm, "uninstall", self.name, "--namespace", self.namespace]
        subprocess.run(cmd, env=self.cluster.env, capture_output=True, timeout=180, check=False)
        self.cluster.kubectl_run("delete", "namespace", self.namespace, "--wait=false", check=False)

    def token_kubeconfig(self, path: Path) -> Path:
        token = self.cluster.kubectl_run(
            "create", "token", self.sa, "-n", self.namespace, "--duration=1h"
        ).strip()
        admin = yaml.safe_load(self.cluster.kubeconfig.read_text())
        cluster = admin["clusters"][0]
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [cluster],
            "users": [{"name": "sa", "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": cluster["name"], "user": "sa"}}],
            "current-context": "sa",
        }))  # fmt: skip
        return path


@pytest.fixture
def release(cluster: ClusterHandle, helm: str, namespace: str) -> Iterator[Release]:
    cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    cluster.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", "crd/rayclusters.ray.io",
                        "crd/rayjobs.ray.io", "crd/raycronjobs.ray.io")  # fmt: skip
    rel = Release(cluster, helm, namespace)
    rel.install()
    try:
        yield rel
    finally:
        rel.uninstall()


def can_i(cluster: ClusterHandle, kubeconfig: Path, *args: str) -> bool:
    env = {**cluster.env, "KUBECONFIG": str(kubeconfig)}
    cmd = [cluster.kubectl, "auth", "can-i", *args]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    return out.stdout.strip() == "yes"


async def allowed(
    api: client.ApiClient, release: Release, verb: str, group: str, resource: str, ns: str
) -> bool:
    """Whether the chart's ServiceAccount may `verb` `resource` of `group` in `ns` (a
    SubjectAccessReview: no discovery of the resource needed)."""
    user = f"system:serviceaccount:{release.namespace}:{release.sa}"
    attributes = {"verb": verb, "group": group, "resource": resource, "namespace": ns}
    review: Any = {
        "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{release.namespace}"],
            "resourceAttributes": attributes,
        }
    }
    answer = await client.AuthorizationV1Api(api).create_subject_access_review(review)
    return bool(answer.status.allowed)


async def test_rayscale_runs_on_the_charts_rbac_and_no_more(
    cluster: ClusterHandle, api: client.ApiClient, namespace: str, release: Release, tmp_path: Path
) -> None:
    kubeconfig = release.token_kubeconfig(tmp_path / "sa.kubeconfig")

    # What it needs, in the watched namespace ...
    needed = [
        ("watch", "rayclusters.ray.io"),
        ("create", "rayclusters.ray.io"),
        ("delete", "rayclusters.ray.io"),
        ("create", "pods"),
        ("delete", "pods"),
        ("create", "services"),
        ("create", "secrets"),
        ("create", "ingresses.networking.k8s.io"),
        ("create", "jobs.batch"),
        ("get", "jobs.batch"),
        ("list", "jobs.batch"),  # RayJob submitters
        ("watch", "jobs.batch"),
        ("delete", "jobs.batch"),
        ("create", "events"),
        ("list", "events"),  # node provisioners' Events on unschedulable pods
        ("watch", "rayvirtualclusters.rayscale.io"),
        ("patch", "rayvirtualclusters.rayscale.io"),
        ("create", "rayresourcerequests.rayscale.io"),  # a RayJob's entrypoint resources
        ("delete", "rayresourcerequests.rayscale.io"),
        ("get", "secrets/raycluster-basic"),
        ("get", "resourcequotas"),  # the quota that refused a worker pod, until it has room
    ]
    for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):
        needed += [(verb, "rayjobs.ray.io"), (verb, "raycronjobs.ray.io")]
    for verb, resource in needed:
        assert can_i(cluster, kubeconfig, verb, resource, "-n", namespace), f"cannot {verb} {resource}"
    # Kueue's Workloads (a slice not admitted is a quota refusal): Kueue's CRD is not installed here,
    # and `kubectl auth can-i` answers no for a resource discovery does not know: ask the API server.
    assert await allowed(api, release, "list", "kueue.x-k8s.io", "workloads", namespace)
    assert not await allowed(api, release, "get", "kueue.x-k8s.io", "workloads", namespace)
    # ... and subresources (`kubectl auth can-i VERB TYPE/NAME` names an object, not a subresource).
    subresources = [
        ("patch", "rayclusters.ray.io", "status"),
        ("patch", "rayresourcerequests.rayscale.io", "status"),
        ("patch", "rayvirtualclusters.rayscale.io", "status"),
        ("update", "rayvirtualclusters.rayscale.io", "finalizers"),
    ]
    for kind in ("rayjobs.ray.io", "raycronjobs.ray.io"):
        subresources += [("get", kind, "status"), ("update", kind, "status"), ("patch", kind, "status"),
                         ("update", kind, "finalizers")]  # fmt: skip
    for verb, resource, sub in subresources:
        assert can_i(cluster, kubeconfig, verb, resource, f"--subresource={sub}", "-n", namespace), (
            f"cannot {verb} {resource}/{sub}"
        )
    # ... and the Nodes' disruption notices, read cluster-wide (Nodes are cluster-scoped) ...
    for verb in ("get", "list", "watch"):
        assert can_i(cluster, kubeconfig, verb, "nodes"), f"cannot {verb} nodes"
    # ... and its Lease, in the release namespace.
    for verb, resource in [("create", "leases"), ("get", f"leases/{release.lease}"),
                           ("update", f"leases/{release.lease}")]:  # fmt: skip
        assert can_i(cluster, kubeconfig, verb, resource, "-n", release.namespace), (
            f"cannot {verb} {resource}"
        )
    # ... and nothing more.
    denied = [
        ("get", "secrets", "-n", namespace),
        ("get", "secrets/other", "-n", namespace),
        ("list", "secrets", "-n", namespace),
        ("watch", "secrets", "-n", namespace),
        ("update", "secrets/raycluster-basic", "-n", namespace),
        ("get", "secrets/raycluster-basic", "-n", release.namespace),
        ("list", "resourcequotas", "-n", namespace),
        ("update", "resourcequotas", "-n", namespace),
        ("get", "leases", "-n", release.namespace),
        ("list", "leases", "-n", release.namespace),
        ("get", "leases/other", "-n", release.namespace),
        ("update", "leases/other", "-n", release.namespace),
        ("delete", f"leases/{release.lease}", "-n", release.namespace),
        ("create", "leases", "-n", namespace),
        ("get", f"leases/{release.lease}", "-n", namespace),
        ("create", "leases", "-n", "kube-system"),
        ("create", "rayvirtualclusters.rayscale.io", "-n", namespace),
        ("delete", "rayvirtualclusters.rayscale.io", "-n", namespace),
        ("update", "rayvirtualclusters.rayscale.io", "--subresource=status", "-n", namespace),
        ("watch", "rayvirtualclusters.rayscale.io", "-n", "default"),
        ("watch", "rayjobs.ray.io", "-n", "default"),
        ("create", "raycronjobs.ray.io", "-n", "default"),
        ("list", "jobs.batch", "-n", "default"),
        ("patch", "jobs.batch", "-n", namespace),
        ("update", "jobs.batch", "-n", namespace),
        ("deletecollection", "rayjobs.ray.io", "-n", namespace),
        ("patch", "rayjobs.ray.io", "--subresource=finalizers", "-n", namespace),
        ("create", "deployments.apps", "-n", namespace),
        ("patch", "pods", "-n", namespace),
        ("list", "pods", "-n", "default"),
        ("create", "pods", "-n", release.namespace),
        ("patch", "nodes"),  # a cordon or a taint is read, never written
        ("update", "nodes"),
        ("delete", "nodes"),
        ("patch", "nodes", "--subresource=status"),
        ("create", "customresourcedefinitions.apiextensions.k8s.io"),
        ("create", "namespaces"),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
    ]
    for args in denied:
        assert not can_i(cluster, kubeconfig, *args), f"the chart's ServiceAccount may {' '.join(args)}"

    log = tmp_path / "rayscale.log"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONPATH": str(ROOT / "operator")}
    argv, preexec = launcher.dying_with_parent(
        [sys.executable, "-m", "rayscale", "run", "--namespace", namespace, "--liveness", "",
         "--metrics-port", "0", "--status-port", "0", "--resync-seconds", "5", "--leader-elect",
         "--leader-election-namespace", release.namespace, "--leader-election-id", release.lease]
    )  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(  # noqa: ASYNC220 (starts a long-lived child; never waits here)
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=preexec
        )
    kube = Kube(api, namespace)
    try:
        body = example("raycluster-basic.yaml")
        body["spec"]["enableInTreeAutoscaling"] = True  # workersToDelete is honoured as the autoscaler's
        body["spec"]["workerGroupSpecs"][0]["replicas"] = 1
        body["spec"]["authOptions"] = {"mode": "token"}  # rayscale creates the token Secret, then reads it
        body["spec"]["headGroupSpec"]["enableIngress"] = True  # and the head Ingress
        await kube.create(body)
        await eventually(lambda: kube.running_workers("raycluster-basic", 1), timeout=90, message="1 worker")
        secret = await client.CoreV1Api(api).read_namespaced_secret("raycluster-basic", namespace)
        assert secret.data["auth_token"], "an empty token"
        assert secret.metadata.owner_references[0].name == "raycluster-basic"
        networking = client.NetworkingV1Api(api)  # created in the same round as the Secret, before pods
        ing = await networking.read_namespaced_ingress("raycluster-basic-head-ingress", namespace)
        assert ing.spec.rules[0].http.paths[0].backend.service.name == "raycluster-basic-head-svc"
        await kube.set_group("raycluster-basic", 0, "replicas", 3)
        before = names(await eventually(lambda: kube.running_workers("raycluster-basic", 3), timeout=60))
        victim = sorted(before)[0]
        await kube.patch_json("raycluster-basic", [
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2},
            {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
             "value": {"workersToDelete": [victim]}},
        ])  # fmt: skip

        async def victim_gone() -> set[str]:
            now = names(await kube.running_workers("raycluster-basic", 2))
            return now if now and victim not in now else set()

        after = await eventually(victim_gone, timeout=60, message=f"{victim} deleted")
        assert after == before - {victim}

        async def status_written() -> bool:
            status = (await kube.get("raycluster-basic")).get("status") or {}
            return status.get("desiredWorkerReplicas") == 2

        await eventually(status_written, timeout=60, message="status written through /status")
        await kube.delete_cluster("raycluster-basic")
        await eventually(lambda: _no_pods(kube), timeout=90, message="every pod of the cluster removed")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
    text = log.read_text(errors="replace")
    assert f"became leader: Lease {release.namespace}/{release.lease}" in text, text[-4000:]
    assert f"released Lease {release.namespace}/{release.lease}" in text, text[-4000:]
    assert "Forbidden" not in text, text[-4000:]
    assert " 403" not in text, text[-4000:]
    assert "Nodes are not watched" not in text, text[-4000:]


async def _no_pods(kube: Kube) -> bool:
    return not await kube.pods("raycluster-basic")
