"""Fixtures for autoscaler integration tests: the CRDs and a `rayscale run` with a short interval."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hack.localk8s import testcluster

from rayscale.ray.address import OVERRIDE_FLAG
from tests.integration.controller.conftest import (  # noqa: F401 (fixture and hook re-used here)
    Operator,
    pytest_runtest_makereport,
    raycluster_crd,
    running,
)

# Rounds every second; the GCS where the cluster's annotation says (a local head, a fake or nothing).
AUTOSCALING_EXTRA = ("--autoscaler-interval", "1", OVERRIDE_FLAG)


@pytest.fixture
def autoscaling_operator(
    cluster: testcluster.ClusterHandle,
    namespace: str,
    raycluster_crd: None,  # noqa: F811 (the fixture imported above)
    request: pytest.FixtureRequest,
) -> Iterator[Operator]:
    """`rayscale run --mode all` autoscaling every second, following `rayscale.io/gcs-address`.

    The tests point their clusters at Ray heads (real or fake) on this machine, or at nothing, with
    that annotation; a real operator only does so with ``--allow-gcs-address-override``.
    """
    cluster.kubectl_run(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/rayresourcerequests.rayscale.io"
    )
    yield from running(Operator(cluster, namespace, mode="all", extra=AUTOSCALING_EXTRA), request)
