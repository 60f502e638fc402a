"""A fleet sharded over two `rayscale run` processes on the local control plane (docs/scaling.md).

Two shards at a time, each with leader election on a Lease of its own in one namespace: by namespace
pattern (one takes ``<prefix>-a-*``, the other ``<prefix>-*`` but those), then by cluster label
selector in one namespace (``shard=a`` and ``shard in (b,c)``). Every RayCluster is reconciled and
autoscaled by exactly one of them: its pods are created once, its Events come from that operator
only (``reportingInstance``: each process runs with its own POD_NAME), only that operator's
/metrics and status API show it, its RayResourceRequest is never told by the other that the
cluster "does not exist", and a RayCluster neither selects is left alone. Relabelling a cluster
from shard a to shard b hands it over: its pods are kept, the new owner acts on it, the old one
posts nothing more about it and forgets it, and no finalizer stays behind. The chart's manifests for
shards are accepted by the API server.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from hack.localk8s import launcher
from hack.localk8s.testcluster import ClusterHandle
from kubernetes_asyncio import client

from rayscale.api.names import RAYJOB, RAYRESOURCEREQUEST
from rayscale.common.types import ClusterKey
from tests.support.builders import ROOT, cpu_and_gpu_cluster, example, resource_request
from tests.support.kube import Kube, fresh_namespace
from tests.support.operators import Observed, free_port
from tests.support.polling import eventually
from tests.support.watching import watched

pytestmark = pytest.mark.integration
CHART = ROOT / "charts" / "rayscale"


class Shard(Observed):
    """`rayscale run` as one shard: `scope` (its -n and --cluster-selector), mode all, autoscaling
    every second, leader election in `lease_namespace`, /metrics and the status API on free ports,
    and its Events' reportingInstance set to `instance` (POD_NAME)."""

    def __init__(
        self, cluster: ClusterHandle, instance: str, scope: Sequence[str], lease_namespace: str
    ) -> None:
        super().__init__(cluster, instance)
        self.instance = instance
        self.scope = list(scope)
        self.lease_namespace = lease_namespace
        self.status_port = free_port()

    def start(self) -> None:
        env = {**self.cluster.env, "PYTHONPATH": str(ROOT / "operator"), "POD_NAME": self.instance}
        cmd = [sys.executable, "-m", "rayscale", "run", *self.scope, "--liveness", "",
               "--status-address", "127.0.0.1", "--status-port", str(self.status_port),
               "--resync-seconds", "5", "--leader-elect",
               "--leader-election-namespace", self.lease_namespace, *self.extra]  # fmt: skip
        argv, preexec = launcher.dying_with_parent(cmd)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=preexec,
            )  # fmt: skip

    async def watched_clusters(self) -> set[ClusterKey]:
        """The RayClusters its /metrics show (KubeRay's kuberay_cluster_info: the controller's)."""
        samples = await self.scrape()
        return {
            (labels["namespace"], labels["name"]) for n, labels, _ in samples if n == "kuberay_cluster_info"
        }

    async def autoscaled(self) -> set[ClusterKey] | None:
        """The RayClusters its status API serves (the autoscaler's); None until it answers as leader."""
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{self.status_port}/api/v1/clusters") as resp,
            ):
                if resp.status != 200:
                    return None
                body = await resp.json()
        except aiohttp.ClientError:
            return None
        return {(c["namespace"], c["name"]) for c in body["clusters"]}

    def lease(self) -> str:
        """The Lease it says it leads on ("" until it leads), from its whole log (output() is its
        end only, which other work of an operator of every namespace can fill)."""
        for line in self.log.read_text(errors="replace").splitlines():
            if "became leader: Lease " in line:
                return line.split("became leader: Lease ")[1].split()[0]
        return ""


@pytest.fixture
def shards(
    cluster: ClusterHandle, raycluster_crd: None, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Shard]]:
    """Start shards; all are stopped after, and their logs printed when the test failed."""
    started: list[Shard] = []

    def start(instance: str, scope: Sequence[str], lease_namespace: str) -> Shard:
        shard = Shard(cluster, instance, scope, lease_namespace)
        shard.start()
        started.append(shard)
        return shard

    yield start
    report = getattr(request.node, "rep_call", None)
    for shard in started:
        shard.stop()
        if report is not None and report.failed:
            print(f"--- {shard.instance} ({shard.log}) ---\n{shard.output()}")
        shard.log.unlink(missing_ok=True)


async def reporters(kube: Kube, cluster: str) -> dict[str, int]:
    """Who posted Events about RayCluster `cluster` (reportingInstance -> how many, counting repeats)."""
    events = (
        await kube.core.list_namespaced_event(kube.ns, field_selector=f"involvedObject.name={cluster}")
    ).items
    out: dict[str, int] = {}
    for event in events:
        if event.involved_object.kind == "RayCluster":
            out[event.reporting_instance] = out.get(event.reporting_instance, 0) + (event.count or 1)
    return out


def pod_added(event: dict[str, Any]) -> tuple[str, str, str] | None:
    """(cluster, pod, uid) of every Ray pod the watch shows created."""
    obj = event["raw_object"]
    labels = obj["metadata"].get("labels") or {}
    if event["type"] != "ADDED" or "ray.io/cluster" not in labels:
        return None
    return labels["ray.io/cluster"], obj["metadata"]["name"], obj["metadata"]["uid"]


def created(added: list[tuple[str, str, str]], cluster: str) -> set[str]:
    return {uid for name, _, uid in added if name == cluster}


async def watch_caught_up(added: list[tuple[str, str, str]], cluster: str, pods: set[str]) -> set[str]:
    """The pods of `cluster` the watch saw created, once it has seen `pods` (a list can run ahead of it)."""
    seen = await eventually(
        lambda: created(added, cluster) >= pods or None,
        timeout=30,
        message=f"the watch sees {cluster}'s pods",
    )
    assert seen
    return created(added, cluster)


async def pods_of(kube: Kube, cluster: str, count: int) -> set[str] | None:
    """The uids of `cluster`'s pods when exactly `count` live ones exist."""
    pods = await kube.pods(cluster, live=True)
    return {p.metadata.uid for p in pods} if len(pods) == count else None


async def test_shards_by_namespace_pattern_reconcile_each_cluster_once_on_leases_of_their_own(
    api: client.ApiClient, shards: Callable[..., Shard]
) -> None:
    run = uuid.uuid4().hex[:5]
    async with (
        fresh_namespace(api, f"shard-{run}-a") as ns_a,
        fresh_namespace(api, f"shard-{run}-b") as ns_b,
    ):
        a_pattern, b_pattern = f"t-shard-{run}-a-*", f"t-shard-{run}-*,!t-shard-{run}-a-*"
        kube_a, kube_b = Kube(api, ns_a), Kube(api, ns_b)
        adds = [watched(k.core.list_namespaced_pod, k.ns, keep=pod_added) for k in (kube_a, kube_b)]
        async with adds[0] as added_a, adds[1] as added_b:
            # Default settings but the scope: each derives a Lease of its own from it.
            a = shards("shard-a", ["-n", a_pattern], ns_a)
            b = shards("shard-b", ["-n", b_pattern], ns_a)
            body = example("raycluster-basic.yaml")
            body["spec"]["workerGroupSpecs"][0]["replicas"] = 1
            await kube_a.create(body)
            await kube_b.create(body)
            ready = [
                await eventually(
                    partial(pods_of, kube, "raycluster-basic", 2),
                    timeout=60,
                    message=f"head and worker in {kube.ns}",
                )
                for kube in (kube_a, kube_b)
            ]
            assert await eventually(a.watched_clusters, timeout=30) == {(ns_a, "raycluster-basic")}
            assert await eventually(b.watched_clusters, timeout=30) == {(ns_b, "raycluster-basic")}
            # Created once each, by their own shard only.
            for added, pods in zip((added_a, added_b), ready, strict=True):
                assert await watch_caught_up(added, "raycluster-basic", pods) == pods  # created once each
            assert set(await reporters(kube_a, "raycluster-basic")) == {"shard-a"}
            assert set(await reporters(kube_b, "raycluster-basic")) == {"shard-b"}
        # Two Leases in one namespace, each held: neither shard waits for the other.
        leases = {a.lease(), b.lease()}
        assert len(leases) == 2
        assert all(lease.startswith(f"{ns_a}/rayscale-") for lease in leases)
        coordination: Any = client.CoordinationV1Api(api)
        held = (await coordination.list_namespaced_lease(ns_a)).items
        assert {f"{ns_a}/{lease.metadata.name}" for lease in held if lease.spec.holder_identity} == leases


def labelled(name: str, shard: str | None) -> dict[str, Any]:
    body = cpu_and_gpu_cluster()  # autoscaled, both groups at 0, its GCS unreachable (no Ray here)
    body["metadata"]["name"] = name
    if shard is not None:
        body["metadata"]["labels"] = {"shard": shard}
    return body


def gpus(cluster: str, count: int) -> dict[str, Any]:
    return resource_request(f"gpus-{cluster}", cluster, ({"GPU": 1}, count))


def request_version(event: dict[str, Any]) -> tuple[str, str] | None:
    """(request, status message) of every version of a RayResourceRequest."""
    obj = event["raw_object"]
    return obj["metadata"]["name"], str((obj.get("status") or {}).get("message", ""))


async def test_shards_by_label_selector_and_a_cluster_moved_between_them(
    api: client.ApiClient, namespace: str, shards: Callable[..., Shard]
) -> None:
    kube = Kube(api, namespace)
    objects: Any = kube.objects
    rrr = RAYRESOURCEREQUEST.at(namespace)
    a_key, b_key = (namespace, "one"), (namespace, "two")
    async with (
        watched(kube.core.list_namespaced_pod, namespace, keep=pod_added) as added,
        watched(objects.list_namespaced_custom_object, *rrr, keep=request_version) as requests,
    ):
        a = shards("shard-a", ["--shard", "a", "--cluster-selector", "shard=a"], namespace)
        b = shards("shard-b", ["--shard", "b", "--cluster-selector", "shard in (b,c)"], namespace)
        for name, shard in (("one", "a"), ("two", "b"), ("nobodys", "z")):
            await kube.create(labelled(name, shard))
            await objects.create_namespaced_custom_object(*rrr, gpus(name, 1))

        # Each autoscaler scales its own cluster for its request; each controller creates its pods.
        first = {
            name: await eventually(
                partial(pods_of, kube, name, 2), timeout=60, message=f"{name}: head, 1 GPU worker"
            )
            for name in ("one", "two")
        }
        assert await eventually(a.autoscaled, timeout=30, message="a's status API") == {a_key}
        assert await eventually(b.autoscaled, timeout=30, message="b's status API") == {b_key}
        assert await a.watched_clusters() == {a_key}
        assert await b.watched_clusters() == {b_key}
        assert set(await reporters(kube, "one")) == {"shard-a"}
        assert set(await reporters(kube, "two")) == {"shard-b"}
        for name, pods in first.items():
            assert await watch_caught_up(added, name, pods) == pods  # created once each

        # The cluster no shard selects: nothing of it is touched, its request is told nothing.
        assert await kube.pods("nobodys") == []
        assert not (await kube.get("nobodys")).get("status")
        assert await reporters(kube, "nobodys") == {}

        # Relabel one: shard b takes it over, shard a lets go.
        before = await pods_of(kube, "one", 2)
        assert before is not None
        await kube.patch_json("one", [{"op": "replace", "path": "/metadata/labels/shard", "value": "b"}])
        await eventually(lambda: _has(b, a_key), timeout=30, message="b serves one")
        await eventually(lambda: _lacks(a, a_key), timeout=30, message="a forgets one")
        from_a = (await reporters(kube, "one"))["shard-a"]
        # The new owner acts on it: a second GPU for its request, one more pod, nothing recreated.
        await objects.patch_namespaced_custom_object(
            *rrr, "gpus-one", [{"op": "replace", "path": "/spec/bundles/0/count", "value": 2}],
            _content_type="application/json-patch+json",
        )  # fmt: skip
        after = await eventually(
            lambda: pods_of(kube, "one", 3), timeout=60, message="one: a second GPU worker"
        )
        assert before < after
        assert await watch_caught_up(added, "one", after) == after  # each pod created once, none again
        assert (await reporters(kube, "one"))["shard-b"] > 0
        assert (await reporters(kube, "one"))["shard-a"] == from_a  # nothing more from shard a
        assert await a.watched_clusters() == set()
        assert await b.watched_clusters() == {a_key, b_key}
        assert not (await kube.get("one"))["metadata"].get("finalizers")
        # Still nothing on the cluster nobody selects, after all those rounds.
        assert await kube.pods("nobodys") == []

    # No shard ever told a request that its cluster does not exist (each exists, in some shard).
    assert not [r for r in requests if "does not exist" in r[1]]
    assert {r[0] for r in requests if r[1]} == {"gpus-one", "gpus-two"}
    assert (a.lease(), b.lease()) == (f"{namespace}/rayscale-a", f"{namespace}/rayscale-b")


async def _has(shard: Shard, key: ClusterKey) -> bool:
    return key in (await shard.autoscaled() or set()) and key in await shard.watched_clusters()


async def _lacks(shard: Shard, key: ClusterKey) -> bool:
    served = await shard.autoscaled()
    return served is not None and key not in served and key not in await shard.watched_clusters()


def labelled_rayjob(name: str, shard: str) -> dict[str, Any]:
    spec = {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": example("raycluster-basic.yaml")["spec"]}
    return {**RAYJOB.type_meta(), "metadata": {"name": name, "labels": {"shard": shard}}, "spec": spec}


async def job_reporters(kube: Kube, name: str) -> set[str]:
    """Who posted Events about RayJob `name`."""
    events = (
        await kube.core.list_namespaced_event(kube.ns, field_selector=f"involvedObject.name={name}")
    ).items
    return {e.reporting_instance for e in events if e.involved_object.kind == "RayJob"}


async def existing(kube: Kube, name: str) -> dict[str, Any] | None:
    """RayCluster `name`, once it exists."""
    try:
        return await kube.get(name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


async def test_shards_by_label_selector_take_the_rayjobs_they_select(
    api: client.ApiClient, namespace: str, shards: Callable[..., Shard]
) -> None:
    """A RayJob is the shard's whose selector matches its labels; its RayCluster carries them, so
    that shard runs both. A RayJob no shard selects is left alone until it is relabelled."""
    kube = Kube(api, namespace)
    objects: Any = kube.objects
    shards("shard-a", ["--shard", "a", "--cluster-selector", "shard=a"], namespace)
    shards("shard-b", ["--shard", "b", "--cluster-selector", "shard=b"], namespace)
    for name, shard in (("job-z", "z"), ("job-a", "a"), ("job-b", "b")):
        await objects.create_namespaced_custom_object(*RAYJOB.at(namespace), labelled_rayjob(name, shard))

    async def cluster_of(name: str) -> str | None:
        job = await objects.get_namespaced_custom_object(*RAYJOB.at(namespace), name)
        return (job.get("status") or {}).get("rayClusterName") or None

    for name, shard in (("job-a", "a"), ("job-b", "b")):
        made = await eventually(partial(cluster_of, name), timeout=60, message=f"{name}'s RayCluster name")
        # Its name is in the RayJob's status before the RayCluster is created (as in KubeRay).
        body = await eventually(partial(existing, kube, made), timeout=60, message=f"RayCluster {made}")
        assert body["metadata"]["labels"]["shard"] == shard
        said = await eventually(partial(reporters, kube, made), timeout=60, message=f"{made}'s Events")
        assert set(said) == {f"shard-{shard}"}
        posted = await eventually(partial(job_reporters, kube, name), timeout=30, message=f"{name}'s Events")
        assert posted == {f"shard-{shard}"}
    nobodys = await objects.get_namespaced_custom_object(*RAYJOB.at(namespace), "job-z")
    assert not nobodys.get("status")
    assert not nobodys["metadata"].get("finalizers")
    assert await job_reporters(kube, "job-z") == set()

    patch = [{"op": "replace", "path": "/metadata/labels/shard", "value": "a"}]
    await objects.patch_namespaced_custom_object(
        *RAYJOB.at(namespace), "job-z", patch, _content_type="application/json-patch+json"
    )
    await eventually(partial(cluster_of, "job-z"), timeout=60, message="job-z's RayCluster, once relabelled")
    posted = await eventually(partial(job_reporters, kube, "job-z"), timeout=30, message="job-z's Events")
    assert posted == {"shard-a"}


def test_the_charts_shards_pass_server_side_dry_run(
    helm: str, cluster: ClusterHandle, tmp_path: Path
) -> None:
    values = {
        "shards": [
            {"name": "teams", "namespaces": ["team-*"]},
            {"name": "a", "namespaces": ["!team-*"], "clusterSelector": "shard=a"},
            {"name": "rest", "namespaces": ["!team-*"], "clusterSelector": "shard notin (a)", "replicas": 2},
        ]
    }
    (tmp_path / "values.yaml").write_text(json.dumps(values))
    cmd = [
        helm,
        "template",
        "rs",
        str(CHART),
        "--namespace",
        "rayscale-system",
        "-f",
        str(tmp_path / "values.yaml"),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert len([d for d in docs if d["kind"] == "Deployment"]) == 3
    cluster.kubectl_run("create", "namespace", "rayscale-system", check=False)
    applied = subprocess.run(
        [cluster.kubectl, "apply", "--dry-run=server", "-f", "-"], input=yaml.safe_dump_all(docs),
        env=cluster.env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
