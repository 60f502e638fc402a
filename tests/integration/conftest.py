"""Every test under tests/integration is marked ``integration``. Its fixtures (a real Kubernetes API
server for the session, namespaces, the CRDs, `rayscale run`) are tests/support/fixtures.py's,
registered for every suite in pyproject.toml."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration" in str(item.path):
            item.add_marker(pytest.mark.integration)
