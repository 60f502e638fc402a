"""Fixtures for integration tests: a real Kubernetes API server for the session.

`cluster` is $KUBECONFIG's cluster when it answers, else the local control plane of
`make cluster-up`, else a fresh one started here and stopped at the end (also when
tests fail or the run is interrupted). See hack/localk8s/testcluster.py.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hack.localk8s import testcluster
from kubernetes_asyncio import client, config

from tests.integration.polling import eventually


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration" in str(item.path):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def cluster() -> Iterator[testcluster.ClusterHandle]:
    handle = testcluster.acquire()
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="session")
def helm() -> str:
    """Helm built from the Go module proxy into ~/.cache/rayscale (e2e/tools/helm.sh)."""
    script = Path(__file__).resolve().parents[2] / "e2e" / "tools" / "helm.sh"
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


@contextlib.asynccontextmanager
async def fresh_namespace(api: client.ApiClient, test: str) -> AsyncIterator[str]:
    slug = re.sub(r"[^a-z0-9]+", "-", test.lower()).strip("-")[:40].strip("-")
    name = f"t-{slug}-{uuid.uuid4().hex[:5]}"
    core = client.CoreV1Api(api)
    await core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"rayscale.io/test": "true"}))
    )
    # The serviceaccount controller must have made the default ServiceAccount before
    # pods can be created in the namespace.
    await eventually(
        lambda: _has_default_sa(core, name), timeout=30, message=f"ServiceAccount default in {name}"
    )
    yield name
    await core.delete_namespace(name)


async def _has_default_sa(core: client.CoreV1Api, namespace: str) -> bool:
    sas = await core.list_namespaced_service_account(namespace)
    return any(sa.metadata.name == "default" for sa in sas.items)
