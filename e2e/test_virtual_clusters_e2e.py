"""Virtual clusters with a real Ray: two VCs in one RayCluster, work kept to each, one grown by
demand, a job cluster for a job, a deleted pod replaced, and removal that waits for idleness."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from e2e.harness import Scenario, group
from e2e.raybridge.driver import RayDriver
from tests.support.polling import eventually

from rayscale.api.virtualcluster_names import JOB_LABEL, VC_LABEL, job_resource, vc_resource

pytestmark = pytest.mark.timeout(900)

IDLE = 5
EXAMPLE = [
    doc
    for doc in yaml.safe_load_all(
        (Path(__file__).parents[1] / "examples/virtual-clusters/virtual-clusters.yaml").read_text()
    )
    if doc["kind"] == "RayVirtualCluster"
]
A, B = vc_resource("team-a"), vc_resource("team-b")


def inside(vc: str, cpus: float = 1) -> dict[str, object]:
    return {"num_cpus": cpus, "resources": {vc: 0.001}}


async def labels_of(scenario: Scenario, pod: str) -> dict[str, str]:
    got = await scenario.kube.core.read_namespaced_pod(pod, scenario.kube.ns)
    return dict(got.metadata.labels or {})


async def ray_resources(scenario: Scenario, pod: str) -> dict[str, float]:
    state = await scenario.state()
    node = state.node_by_instance(pod)
    assert node is not None, f"no Ray node for {pod}"
    return {k: v for k, v in node.total_resources.items() if k.startswith("rayscale.io/")}


@pytest.mark.e2e_smoke
async def test_virtual_clusters(scenario: Scenario, tmp_path: Path) -> None:
    await scenario.create([group("cpu", max_replicas=6)], idle_timeout=IDLE)
    for doc in EXAMPLE:  # the two RayVirtualClusters of the example, as written there
        spec = doc["spec"]
        await scenario.virtual_cluster(
            doc["metadata"]["name"], spec["groups"], divisible=spec.get("divisible", False)
        )

    # Each VC gets one node: a pod labelled with it, whose Ray node carries the VC's resource.
    [a1] = await eventually(
        lambda: scenario.vc_nodes("team-a"), timeout=180, message="team-a has a ready node"
    )
    [b1] = await eventually(
        lambda: scenario.vc_nodes("team-b"), timeout=180, message="team-b has a ready node"
    )
    assert (await labels_of(scenario, a1))[VC_LABEL] == "team-a"
    assert (await labels_of(scenario, b1))[VC_LABEL] == "team-b"
    assert await eventually(lambda: _has(scenario, a1, {A: 1000.0}), timeout=60, message=f"{a1} carries {A}")
    assert await eventually(lambda: _has(scenario, b1, {B: 1000.0}), timeout=60, message=f"{b1} carries {B}")
    status = await scenario.vc_status("team-a")
    assert (status["phase"], status["revision"], status["rayResource"]) == ("Ready", 1, A)

    # Work asking for a VC runs on that VC's nodes only.
    for vc, pod in ((A, a1), (B, b1)):
        marker = tmp_path / f"where-{pod}"
        await scenario.ray_call("task", name=f"where-{pod}", marker=str(marker), **inside(vc, 0))
        assert await scenario.pod_of(await scenario.started_on(marker)) == pod
        marker.touch()

    # Demand inside team-a grows it to its maxNodes (2); team-b stays; a third task waits with
    # the VC's own reason.
    markers = [tmp_path / f"grow-{i}" for i in range(3)]
    for i, marker in enumerate(markers):
        await scenario.ray_call("task", name=f"grow-{i}", marker=str(marker), **inside(A))
    ran = {await scenario.pod_of(await scenario.started_on(m)) for m in markers[:2]}
    assert a1 in ran
    assert len(ran) == 2
    assert sorted(ran) == await scenario.vc_nodes("team-a")

    async def waits_at_max() -> bool:
        s = await scenario.vc_status("team-a")
        return any(u["reason"] == "VIRTUAL_CLUSTER_MAX" for u in s.get("unmet") or [])

    await eventually(waits_at_max, timeout=60, message="team-a reports VIRTUAL_CLUSTER_MAX")
    assert await scenario.vc_nodes("team-b") == [b1]
    assert not (markers[2].with_name(markers[2].name + ".started")).exists()
    for marker in markers:
        marker.touch()

    # A job in the divisible team-a gets a job cluster carved from team-a's nodes; it is
    # destroyed when the job ends.
    job = "job-1"
    jmarker = tmp_path / "job-task"
    async with RayDriver.start(scenario.bridge.gcs_address, tmp_path / "job.log", submission_id=job) as jd:
        await jd.call(
            "task",
            name="in-job",
            marker=str(jmarker),
            num_cpus=1,
            resources={job_resource("team-a", job): 0.001},
        )
        pod = await scenario.pod_of(await scenario.started_on(jmarker))
        assert (await labels_of(scenario, pod)).get(JOB_LABEL) == job
        assert pod in await scenario.vc_nodes("team-a")
        clusters = (await scenario.vc_status("team-a")).get("jobClusters") or []
        assert [c["name"] for c in clusters] == [job]
        jmarker.touch()
    await eventually(
        lambda: _no_job_clusters(scenario),
        timeout=120,
        message="the job cluster is destroyed after the job ended",
    )
    assert JOB_LABEL not in await labels_of(scenario, pod)

    # A pod of team-b deleted by hand is replaced in team-b.
    await scenario.kube.core.delete_namespaced_pod(b1, scenario.kube.ns)
    [b2] = await eventually(
        lambda: _other(scenario, "team-b", b1), timeout=180, message="team-b has a new ready node"
    )
    assert (await labels_of(scenario, b2))[VC_LABEL] == "team-b"

    # Removing a busy VC waits (status says why); once idle, it goes and its node stays a worker.
    await scenario.ray_call("actor", name="keeper", num_cpus=0, resources={B: 0.001})
    assert await scenario.actor_on("keeper") == b2
    await scenario.delete_vc("team-b")

    async def blocked() -> bool:
        s = await scenario.vc_status("team-b")
        assert s.get("phase") == "Removing", s
        assert (s.get("busy") or {}).get("actors") == 1, s
        return True

    await eventually(blocked, timeout=60, message="team-b's removal waits for its actor")
    await scenario.holds(lambda: _exists(scenario, "team-b"), 2 * IDLE, "team-b went while its actor ran")
    await scenario.ray_call("kill", name="keeper")
    await eventually(lambda: _gone(scenario, "team-b"), timeout=120, message="team-b removed once idle")
    assert VC_LABEL not in await labels_of(scenario, b2) or not await _pod_exists(scenario, b2)
    assert (await scenario.vc_status("team-a")).get("phase") in ("Ready", "Scaling")


async def _has(scenario: Scenario, pod: str, want: dict[str, float]) -> bool:
    return await ray_resources(scenario, pod) == want


async def _no_job_clusters(scenario: Scenario) -> bool:
    return not (await scenario.vc_status("team-a")).get("jobClusters")


async def _other(scenario: Scenario, vc: str, old: str) -> list[str] | None:
    nodes = await scenario.vc_nodes(vc)
    return nodes if nodes and old not in nodes else None


async def _exists(scenario: Scenario, name: str) -> bool:
    return await scenario.vc(name) is not None


async def _gone(scenario: Scenario, name: str) -> bool:
    return await scenario.vc(name) is None


async def _pod_exists(scenario: Scenario, pod: str) -> bool:
    return pod in scenario.pods.live()
