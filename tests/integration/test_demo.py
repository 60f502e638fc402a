"""`make demo` works: its main flow (e2e/demo.py `run`) on the local control plane.

Everything `make demo` does after bringing up the cluster, in a fresh namespace with a release of
its own: the CRDs and the chart's RBAC, `rayscale run` with the chart's ServiceAccount token, the
Ray bridge (a real Ray head and a real Ray worker per worker pod), the demo RayCluster, and a Ray
driver whose tasks, placement group and GPU actors make the groups grow. The test checks that
workers came for that work and ran it, that rayscale explained the actor it could not place, and
that every worker was drained and removed once idle. `run` polls with deadlines (about 5 minutes
in all); the whole flow takes about 1.5 minutes on 2 cores.
"""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest
from e2e import demo
from hack.localk8s.testcluster import ClusterHandle

pytestmark = [
    pytest.mark.ray,  # the demo starts its own Ray head and workers
    pytest.mark.timeout(480),
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None, reason="needs Ray: pip install 'ray==2.60.0' (the dev extra)"
    ),
]


async def test_demo_scales_up_for_the_drivers_work_and_removes_idle_workers(
    cluster: ClusterHandle, helm: str, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    release = f"rsdemo-{uuid.uuid4().hex[:6]}"
    setup = demo.Demo(
        demo.Kubectl(cluster.kubectl, str(cluster.kubeconfig)),
        helm,
        tmp_path,
        namespace=namespace,
        system_namespace=f"{release}-system",
        release=release,
    )
    try:
        outcome = await demo.run(setup)
    finally:
        if setup.rendered:
            cluster.kubectl_run(
                "delete", "--ignore-not-found", "--wait=false", "-f", "-", input=setup.rendered
            )
        cluster.kubectl_run("delete", "namespace", setup.system_namespace, "--wait=false", check=False)

    # Workers came for the work: the GPU actor's worker, and CPU workers for the tasks and the
    # placement group (its two bundles on two different nodes).
    scaled_up = [m for _, reason, m in outcome.events if reason == "ScaledUp"]
    assert any(m.startswith("group gpu: 0 -> 1") for m in scaled_up), scaled_up
    assert any(m.startswith("group cpu: 0 -> ") for m in scaled_up), scaled_up
    assert outcome.peak["gpu"] == 1, outcome.peak  # its maxReplicas
    assert 2 <= outcome.peak["cpu"] <= 3, outcome.peak
    # ... and Ray ran the work on them (Ray's node ids, mapped to pod names through the GCS).
    assert [outcome.groups.get(p) for p in outcome.placed["actor"]] == ["gpu"], outcome.placed
    pg_pods = outcome.placed["placement group"]
    assert len(pg_pods) == 2, outcome.placed
    assert all(outcome.groups.get(p) in ("cpu", "gpu") for p in pg_pods + outcome.placed["tasks"]), outcome

    # The second GPU actor was never placed, and rayscale said why: the gpu group is at its max.
    unmet = [(e.get("kind"), e.get("resources"), e.get("reason")) for e in outcome.unmet]
    assert ("demand", {"GPU": 1}, "MAX_REPLICAS") in unmet, outcome.unmet
    assert any(kind == "Warning" and reason == "UnmetDemand" for kind, reason, _ in outcome.events)

    # Idle workers were drained and removed: nothing left, in Kubernetes or in Ray.
    scaled_down = [m for _, reason, m in outcome.events if reason == "ScaledDown"]
    assert scaled_down, outcome.events
    assert any("(IDLE)" in m for m in scaled_down), scaled_down
    assert all("(IDLE)" in m or "(DRAINED)" in m for m in scaled_down), scaled_down
    assert outcome.left == {"cpu": 0, "gpu": 0}
    assert outcome.replicas == {"cpu": 0, "gpu": 0}
    assert outcome.ray_workers_left == 0

    # `rayscale status` at the end tells the same story: the replicas removed after their idle
    # timeout, and the decisions that launched and removed them.
    status = outcome.status
    assert f"RayCluster {namespace}/demo" in status, status
    replicas = status[status.index("\nReplicas") : status.index("\nDecisions")]
    removed = {line.split()[0] for line in replicas.splitlines()[2:] if "removed" in line}
    assert {"cpu", "gpu"} <= removed, status
    decisions = status[status.index("\nDecisions") : status.index("\nEvents")]
    assert "(IDLE)" in decisions, status
    assert "+1 gpu for" in decisions, status  # the launch for the GPU actors, with its reason

    # What it prints at the end: how to run it again by hand, and rayscale's own views.
    capsys.readouterr()
    demo.next_steps(setup, local_dir=None)
    printed = capsys.readouterr().out
    assert f"rayscale run --namespace {namespace} --allow-gcs-address-override --status-page" in printed
    assert f"e2e.raybridge.bridge --namespace {namespace} --cluster demo --annotate" in printed
    assert f"rayscale status {namespace}/demo" in printed
    assert "http://127.0.0.1:8083/" in printed
