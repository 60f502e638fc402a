"""The KubeRay oracle (tools/kuberay-oracle), built once for the suites that render RayClusters."""

from __future__ import annotations

import pytest

from tests.kuberay import oracle
from tests.kuberay.oracle import Oracle, OracleError


@pytest.fixture(scope="session")
def built() -> Oracle:
    try:
        return oracle.build()
    except OracleError as exc:
        pytest.fail(str(exc), pytrace=False)
