"""The one reader of a RayResourceRequest (request_reader.py), through its typed model."""

from __future__ import annotations

from typing import Any

from rayscale.autoscaler.request_reader import read_request
from rayscale.autoscaler.scheduling.model import Constraint

BODY: dict[str, Any] = {
    "metadata": {"name": "reserve", "namespace": "ns", "generation": 3, "resourceVersion": "17"},
    "spec": {
        "clusterName": "rc",
        "bundles": [{"resources": {"CPU": 2, "memory": "1Gi", "GPU": 0}, "count": 2}],
    },
    "status": {"phase": "Pending", "reason": None, "message": "waiting", "observedGeneration": 2},
}


def test_a_request_is_read_once_into_typed_parts() -> None:
    read = read_request(BODY)
    assert (read.unit, read.generation, read.resource_version, read.deleting) == (
        "ns/reserve",
        3,
        "17",
        False,
    )
    assert read.cluster_name == "rc"
    assert read.bundles == (Constraint({"CPU": 2.0, "memory": 2.0**30}, 2, unit="ns/reserve"),)
    assert read.problem is None
    assert read.status is not None
    assert (read.status.phase, read.status.message, read.status.observed_generation) == (
        "Pending",
        "waiting",
        2,
    )


def test_absent_parts_read_as_nothing() -> None:
    read = read_request(
        {"metadata": {"name": "r", "namespace": "ns", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    )
    assert (read.bundles, read.problem, read.status, read.cluster_name, read.deleting) == (
        (),
        None,
        None,
        None,
        True,
    )
    nulls = read_request({"spec": {"bundles": [None, {"resources": None, "count": None}]}})
    assert (nulls.bundles, nulls.problem) == ((), None)


def test_what_the_typed_model_refuses_names_the_field() -> None:
    """Amounts are integers or quantity strings (the CRD's int-or-string): a float or a bool is none."""
    for amount in (1.5, True, [1]):
        body = {"spec": {"bundles": [{"resources": {"CPU": 1}}, {"resources": {"GPU": amount}}]}}
        assert read_request(body).problem == f"spec.bundles[1].resources.GPU: not a quantity: {amount!r}"
    # a bundle is read in order: its count first, then its resources
    both = {"spec": {"bundles": [{"resources": {"CPU": "lots"}, "count": True}]}}
    assert read_request(both).problem == "spec.bundles[0].count: must be an integer >= 1"
    assert read_request({"spec": "x"}).problem == "spec: must be a mapping"
    assert read_request({"spec": {"bundles": ["x"]}}).problem == "spec.bundles[0]: must be a mapping"


def test_a_status_written_by_hand_is_none() -> None:
    read = read_request({**BODY, "status": {"phase": "Whatever"}})
    assert read.status is None
