"""Every test under tests/integration is marked ``integration``. Its fixtures (a real Kubernetes API
server for the session, namespaces, the CRDs, `rayscale run`) are tests/support/fixtures.py's,
registered for every suite in pyproject.toml; `kube` is the integration tests' own."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from tests.support.kube import Kube


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration" in str(item.path):
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def kube(api: client.ApiClient, namespace: str) -> Kube:
    """The test's client of its namespace, straight to the API server (never through a fault proxy)."""
    return Kube(api, namespace)
