"""Fixtures for autoscaler integration tests: the CRDs and a `rayscale run` with a short interval."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import testcluster

from tests.integration.controller.conftest import (  # noqa: F401 (fixture and hook re-used here)
    Operator,
    pytest_runtest_makereport,
    raycluster_crd,
    running,
)


@pytest.fixture
def autoscaling_operator(
    cluster: testcluster.ClusterHandle,
    namespace: str,
    raycluster_crd: None,  # noqa: F811 (the fixture imported above)
    request: pytest.FixtureRequest,
) -> Iterator[Operator]:
    """`rayscale run --mode all` autoscaling every second."""
    cluster.kubectl_run(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/rayresourcerequests.rayscale.io"
    )
    yield from running(
        Operator(cluster, namespace, mode="all", extra=["--autoscaler-interval", "1"]), request
    )
