"""The fixtures every suite shares, registered once as a pytest plugin (``-p tests.support.fixtures``
in pyproject.toml's addopts): a Kubernetes API server for the session (`cluster`, `api`), a fresh
namespace per test, the CRDs, `rayscale run` (`operator`, `autoscaling_operator`), KubeRay's own
operator (`kuberay_bindir`, `kuberay`) and Helm; for unit tests, the controller's Kubernetes calls
faked (`kube_ops`) and an Event sink that keeps what is posted (`event_log`).

`cluster` is the local control plane of `make cluster-up` when it runs (not in a worker of
``pytest -n``: each worker starts its own), else a fresh one started here and stopped at the end
(also when tests fail or the run is interrupted); another cluster only when
RAYSCALE_TARGET_KUBECONFIG names it, and only if it holds no other owner's Ray objects (see
hack/localk8s/target.py and testcluster.py). `$KUBECONFIG` and ``~/.kube/config`` are never used:
when this plugin loads, KUBECONFIG is pointed at a file that does not exist (`NO_KUBECONFIG`), for
this process and what it starts, and so is kubernetes_asyncio's default, so a client a test makes
by mistake reaches no cluster; every cluster handle passes its own KUBECONFIG to what it starts.
Nothing here starts before a test asks for it: the unit tests never touch these.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path

import kubernetes_asyncio.config
import kubernetes_asyncio.config.kube_config
import pytest
from hack.localk8s import launcher, target, testcluster
from kubernetes_asyncio import client, config

from rayscale.api.registry import CRDS
from tests.support.builders import ROOT
from tests.support.fakes import EventLog, FakeKubeOps
from tests.support.kube import established, fresh_namespace
from tests.support.operators import (
    AUTOSCALING_EXTRA,
    KubeRayOperator,
    Operator,
    build_kuberay_operator,
    running,
)
from tests.support.polling import eventually

# A kubeconfig that does not exist (nor does its directory). kubernetes_asyncio reads KUBECONFIG
# once, when it is first imported, into KUBE_CONFIG_DEFAULT_LOCATION (the default of
# load_kube_config and load_config; load_config's own import too): it may have been imported before
# this plugin, so those are set as well.
NO_KUBECONFIG = str(Path(tempfile.gettempdir()) / f"rayscale-tests-{os.getpid()}-no-kubeconfig" / "config")
os.environ["KUBECONFIG"] = NO_KUBECONFIG
kubernetes_asyncio.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION = NO_KUBECONFIG
kubernetes_asyncio.config.KUBE_CONFIG_DEFAULT_LOCATION = NO_KUBECONFIG  # type: ignore[attr-defined]
for _variable in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):  # nor a pod's own cluster
    os.environ.pop(_variable, None)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep the call phase's report on the item (``rep_call``): teardowns print logs when it failed."""
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report


@pytest.fixture
def kube_ops(monkeypatch: pytest.MonkeyPatch) -> FakeKubeOps:
    """The controller's rayscale.kube.ops calls faked for one test (unit tests: no API server)."""
    return FakeKubeOps(monkeypatch)


@pytest.fixture
def event_log() -> EventLog:
    """An EventSink that keeps what is posted."""
    return EventLog()


def acquire_cluster() -> testcluster.ClusterHandle:
    """`testcluster.acquire`, except in a worker of ``pytest -n`` (pytest-xdist, `make integration`):
    there a control plane of the worker's own, never `make cluster-up`'s, which the other workers'
    tests would share (nodes, cluster-wide objects); the one RAYSCALE_TARGET_KUBECONFIG names, when
    it is set, is still used (`make integration` runs one worker then)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return testcluster.acquire()
    bindir = Path(launcher.build())
    by = f"tests/support/fixtures.py (pytest-xdist {os.environ['PYTEST_XDIST_WORKER']})"
    return testcluster.named_cluster(bindir, by=by) or testcluster.start_private(bindir)


@pytest.fixture(scope="session")
def cluster() -> Iterator[testcluster.ClusterHandle]:
    try:
        handle = acquire_cluster()
    except target.TargetError as exc:  # a named cluster refused: say so once, run nothing on it
        pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="session")
def helm() -> str:
    """Helm built from the Go module proxy into ~/.cache/rayscale (e2e/tools/helm.sh)."""
    script = ROOT / "e2e" / "tools" / "helm.sh"
    out = subprocess.run([str(script)], capture_output=True, text=True, check=True, timeout=900)
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
async def api(cluster: testcluster.ClusterHandle) -> AsyncIterator[client.ApiClient]:
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
    async with client.ApiClient(configuration=cfg) as api_client:
        yield api_client


@pytest.fixture
async def namespace(api: client.ApiClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh namespace for one test, deleted afterwards (without waiting)."""
    async with fresh_namespace(api, request.node.name) as name:
        yield name


@pytest.fixture
async def other_namespace(api: client.ApiClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A second fresh namespace for tests about more than one (e.g. one cluster must not slow
    another), deleted afterwards."""
    async with fresh_namespace(api, f"other-{request.node.name}") as name:
        yield name


@pytest.fixture(scope="session")
def raycluster_crd(cluster: testcluster.ClusterHandle) -> None:
    """rayscale's CRDs from crds/ (RayCluster, RayResourceRequest, RayVirtualCluster), established."""
    cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    crds = (f"crd/{defn.name}" for defn in CRDS)
    cluster.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", *crds)


@pytest.fixture
def operator(
    cluster: testcluster.ClusterHandle, namespace: str, raycluster_crd: None, request: pytest.FixtureRequest
) -> Iterator[Operator]:
    """`rayscale run --mode controller` for the test's namespace."""
    yield from running(Operator(cluster, namespace), request)


@pytest.fixture
def autoscaling_operator(
    cluster: testcluster.ClusterHandle,
    namespace: str,
    raycluster_crd: None,
    request: pytest.FixtureRequest,
) -> Iterator[Operator]:
    """`rayscale run --mode all` autoscaling every second, following `rayscale.io/gcs-address`.

    The tests point their clusters at Ray heads (real or fake) on this machine, or at nothing, with
    that annotation; a real operator only does so with ``--allow-gcs-address-override``.
    """
    yield from running(Operator(cluster, namespace, mode="all", extra=AUTOSCALING_EXTRA), request)


@pytest.fixture(scope="session")
async def kuberay_bindir(cluster: testcluster.ClusterHandle, raycluster_crd: None) -> Path:
    """KubeRay's operator binary (built on first use), and KubeRay's other CRDs installed.

    The RayCluster CRD stays rayscale's (crds/, what the migration guide applies over
    KubeRay's); RayJob and RayService are KubeRay's own, as a KubeRay install has them.
    """
    bindir = build_kuberay_operator()
    for kind in ("rayjobs", "rayservices"):
        crd = bindir / "crds" / f"ray.io_{kind}.yaml"
        cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", str(crd))
        await eventually(lambda: established(cluster, f"{kind}.ray.io"), message=f"CRD {kind}.ray.io")  # noqa: B023
    return bindir


@pytest.fixture
def kuberay(
    kuberay_bindir: Path,
    cluster: testcluster.ClusterHandle,
    namespace: str,
    request: pytest.FixtureRequest,
) -> Iterator[KubeRayOperator]:
    """KubeRay's operator for the namespace, with the feature gates the test parametrizes it with
    (indirectly). Not started: the test starts and stops it. Stopped at teardown."""
    op = KubeRayOperator(kuberay_bindir, cluster, namespace, request.param)
    try:
        yield op
    finally:
        op.stop()
        op.log.unlink(missing_ok=True)
