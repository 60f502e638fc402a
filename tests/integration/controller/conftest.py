"""Fixtures for controller integration tests: the RayCluster CRD and a `rayscale run` process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path

import pytest
from hack.localk8s import launcher, testcluster

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def raycluster_crd(cluster: testcluster.ClusterHandle) -> None:
    """The RayCluster CRD from crds/, established."""
    cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    cluster.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", "crd/rayclusters.ray.io")


class Operator:
    """`rayscale run --namespace NS --mode MODE` as a subprocess; always stopped at teardown.

    The controller tests run the controller alone: with the autoscaler on, clusters with
    ``enableInTreeAutoscaling`` would be scaled (and their ``workersToDelete`` cleared) under them.
    """

    def __init__(
        self,
        cluster: testcluster.ClusterHandle,
        namespace: str,
        liveness: str = "",
        *,
        mode: str = "controller",
        extra: Sequence[str] = (),
    ) -> None:
        self.cluster = cluster
        self.extra = ["--mode", mode, *extra]
        self.liveness = liveness
        self.namespace = namespace
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.mkstemp(prefix=f"rayscale-{namespace}-", suffix=".log")[1])

    def start(self) -> None:
        env = {**self.cluster.env, "PYTHONPATH": str(ROOT / "operator")}
        cmd = [sys.executable, "-m", "rayscale", "run", "--namespace", self.namespace,
               "--liveness", self.liveness, "--metrics-port", "0", "--status-port", "0",
               "--resync-seconds", "5", *self.extra]  # fmt: skip
        with self.log.open("ab") as out:
            # Dies with the test process, however that dies (PR_SET_PDEATHSIG).
            self.proc = subprocess.Popen(
                cmd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=launcher.set_parent_death_signal,
            )

    def kill(self) -> None:
        """SIGKILL: no cleanup, as when the operator pod dies."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()
        self.proc = None

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]


@pytest.fixture
def operator(
    cluster: testcluster.ClusterHandle, namespace: str, raycluster_crd: None, request: pytest.FixtureRequest
) -> Iterator[Operator]:
    yield from running(Operator(cluster, namespace), request)


def running(op: Operator, request: pytest.FixtureRequest) -> Iterator[Operator]:
    """Start `op` for one test; stop it after, printing its log when the test failed."""
    op.start()
    try:
        yield op
    finally:
        op.stop()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print(f"--- rayscale log ({op.log}) ---\n{op.output()}")
        op.log.unlink(missing_ok=True)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report
