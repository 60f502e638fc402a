"""The operators tests run as processes: `rayscale run` (`Operator`; `Observed`, which also serves
/metrics) and KubeRay's own operator (`KubeRayOperator`), each always stopped at teardown and its
log printed when the test failed. The fixtures that start them are in tests/support/fixtures.py."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import aiohttp
import pytest
from hack.localk8s import launcher, testcluster
from hack.localk8s.launcher import free_port as free_port  # the tests take it from here
from prometheus_client.parser import text_string_to_metric_families

from rayscale.ray.address import OVERRIDE_FLAG
from tests.support.builders import ROOT

# Rounds every second; the GCS where the cluster's annotation says (a local head, a fake or nothing).
AUTOSCALING_EXTRA = ("--autoscaler-interval", "1", OVERRIDE_FLAG)
Sample = tuple[str, dict[str, str], float]


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
        # Dies with the test process, however that dies (PR_SET_PDEATHSIG).
        self.proc = launcher.spawn_logged(cmd, env, self.log)

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


class Observed(Operator):
    """`rayscale run --mode all`, autoscaling every second, serving /metrics on a free port; it follows
    `rayscale.io/gcs-address` unless `allow_override` is False."""

    def __init__(
        self, cluster: testcluster.ClusterHandle, namespace: str, *, allow_override: bool = True
    ) -> None:
        self.port = free_port()
        extra = [
            "--autoscaler-interval",
            "1",
            "--metrics-address",
            "127.0.0.1",
            "--metrics-port",
            str(self.port),
            *([OVERRIDE_FLAG] if allow_override else []),
        ]
        super().__init__(cluster, namespace, mode="all", extra=extra)

    async def scrape(self) -> list[Sample]:
        """The samples of /metrics; AssertionError (`eventually` tries again) while it does not answer."""
        url = f"http://127.0.0.1:{self.port}/metrics"
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(url, timeout=aiohttp.ClientTimeout(10)) as resp,
            ):
                assert resp.status == 200
                text = await resp.text()
        except aiohttp.ClientConnectionError as exc:
            raise AssertionError(f"{url}: {exc}") from exc
        return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


async def autoscaler_rounds(op: Observed) -> float:
    """How many autoscaling rounds `op` has run, from its /metrics."""
    return sum(
        v
        for n, labels, v in await op.scrape()
        if n == "controller_runtime_reconcile_total" and labels["controller"] == "autoscaler"
    )


class KubeRayOperator(Operator):
    """KubeRay's own operator on one namespace, leader election off, no listening ports.

    Started, stopped and logged as the `rayscale run` fixture is; only the command differs.
    """

    def __init__(self, bindir: Path, cluster: testcluster.ClusterHandle, namespace: str, gates: str) -> None:
        super().__init__(cluster, namespace)
        self.cmd = [
            str(bindir / "kuberay-operator"),
            f"--watch-namespace={namespace}",
            "--metrics-addr=0",
            "--health-probe-bind-address=0",
            "--enable-leader-election=false",
            f"--feature-gates={gates}",
        ]

    def start(self) -> None:
        self.proc = launcher.spawn_logged(self.cmd, self.cluster.env, self.log)  # KUBECONFIG in env


def build_kuberay_operator() -> Path:
    """make kuberay-operator: the binary's cache directory (about 2 minutes the first time)."""
    script = ROOT / "tools" / "kuberay-oracle" / "build-operator.sh"
    out = subprocess.run([str(script)], capture_output=True, text=True, check=True, timeout=900)
    return Path(out.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def beside(kuberay: KubeRayOperator, rayscale: Operator) -> Iterator[None]:
    """Both operators' logs printed when the body fails; rayscale stopped after it."""
    try:
        yield
    except BaseException:
        print(f"--- KubeRay operator log ---\n{kuberay.output()}")
        print(f"--- rayscale log ---\n{rayscale.output()}")
        raise
    finally:
        rayscale.stop()
        rayscale.log.unlink(missing_ok=True)
