"""Fixtures of the end-to-end scenarios: the local control plane, `rayscale run`, a Ray bridge, a
GCS client and a Ray driver per test; every test in e2e/ is marked ``e2e``, except the fault
suite's (marked ``chaos``: `make chaos` runs them, `make e2e` does not).

Run them with ``make e2e`` (all) or ``make e2e-smoke`` (the ``e2e_smoke`` subset). Each test
writes its timings to e2e/.results/ (git-ignored); ``python -m e2e.report`` turns them into
a section of docs/benchmarks.md.

The cluster, namespace and operator fixtures are tests/support/fixtures.py's (a plugin every suite
loads). ``@pytest.mark.ray_head(env={...})`` gives a test's Ray head extra environment (Ray's ``RAY_*``
switches, e.g. ``RAY_enable_infeasible_task_early_exit``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.harness import NAME, PodClock, Scenario
from e2e.raybridge.bridge import RayBridge
from e2e.raybridge.driver import RayDriver
from e2e.raybridge.jobbridge import JobBridge
from e2e.raybridge.jobscenario import Jobs
from hack.localk8s import testcluster
from kubernetes_asyncio import client
from tests.support.kube import Kube
from tests.support.operators import Operator

from rayscale.ray.client import GcsClient

HERE = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ray_head(env): extra environment for the test's Ray head")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    no_ray = importlib.util.find_spec("ray") is None
    for item in items:
        if HERE in Path(item.path).parents:
            if item.get_closest_marker("chaos") is None:
                item.add_marker(pytest.mark.e2e)
            if no_ray:
                item.add_marker(
                    pytest.mark.skip(reason="needs Ray: pip install 'ray==2.60.0' (the dev extra)")
                )


@pytest.fixture
def bridge(
    cluster: testcluster.ClusterHandle, namespace: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[RayBridge]:
    """A Ray head (0 CPUs) and a Ray worker for every Running worker pod of RayCluster `NAME`."""
    head: dict[str, Any] = {"num_cpus": 0}
    marker = request.node.get_closest_marker("ray_head")
    if marker is not None:
        head["env"] = dict(marker.kwargs.get("env") or {})
    with RayBridge(cluster.kubeconfig, namespace, NAME, head=head, log_dir=tmp_path / "ray") as running:
        yield running
        problems = running.errors()
    assert not problems, f"the Ray bridge failed: {problems}"


@pytest.fixture
async def scenario(
    api: client.ApiClient,
    namespace: str,
    bridge: RayBridge,
    autoscaling_operator: Operator,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> AsyncIterator[Scenario]:
    kube = Kube(api, namespace)
    async with (
        GcsClient(bridge.gcs_address, timeout=10) as gcs,
        RayDriver.start(bridge.gcs_address, tmp_path / "driver.log") as driver,
        PodClock.watching(kube, NAME) as pods,
    ):
        found = Scenario(request.node.name, kube, bridge, gcs, driver, pods, tmp_path)
        try:
            yield found
        finally:
            report = getattr(request.node, "rep_call", None)
            outcome = "passed" if report is not None and report.passed else "failed"
            found.write_results(outcome)
            if outcome == "failed":
                print(f"--- Ray driver log ---\n{driver.tail()}")
                print("--- Ray bridge ---\n" + "\n".join(map(str, bridge.history())))


@pytest.fixture
def job_bridge(cluster: testcluster.ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[JobBridge]:
    """Real Ray (with its dashboard) for every RayCluster of the namespace, and the RayJobs'
    submitters run on this machine (e2e/raybridge/jobbridge.py)."""
    with JobBridge(cluster.kubeconfig, namespace, log_dir=tmp_path / "ray") as running:
        yield running
        problems = running.errors()
    assert not problems, f"the Ray job bridge failed: {problems}"


@pytest.fixture
async def jobs(
    api: client.ApiClient,
    namespace: str,
    job_bridge: JobBridge,
    autoscaling_operator: Operator,
    request: pytest.FixtureRequest,
) -> AsyncIterator[Jobs]:
    """A RayJob test's handle (e2e/raybridge/jobscenario.py); its timings go to e2e/.results/."""
    found = Jobs(request.node.name, api, namespace, job_bridge)
    yield found
    report = getattr(request.node, "rep_call", None)
    found.write_results("passed" if report is not None and report.passed else "failed")
