"""Ray 2.60's in-place pod resize (the RayCluster annotation ``ray.io/ippr``) is refused: rayscale
resizes no running pod, so a cluster asking for it gets SpecValid=False and a Warning Event naming
the annotation, never new pods where Ray would resize."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from tests.support.builders import cluster, group, pod

from rayscale.autoscaler.eligibility import OPT_IN_ANNOTATION, eligibility
from rayscale.autoscaler.spec_reader import SpecError, read_spec
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.reconcile import plan_cluster
from rayscale.controller.snapshot import ClusterSnapshot

IPPR = json.dumps({"groups": {"small": {"max-cpu": "4", "max-memory": "8Gi", "resize-timeout": 60}}})
PROBLEM = "metadata.annotations.ray.io/ippr: in-place pod resize is not implemented by rayscale"


def with_ippr(body: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["annotations"] = {"ray.io/ippr": IPPR}
    return body


def test_an_autoscaled_cluster_asking_for_in_place_resize_is_refused_with_a_warning() -> None:
    body = with_ippr(cluster(group(replicas=1), autoscaling=True))
    plan, _ = plan_cluster(ClusterSnapshot(body, [pod("h", "headgroup")], []), ScaleExpectations())
    assert plan.steps == []
    assert plan.invalid is not None
    assert plan.invalid.startswith(PROBLEM)
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "InvalidRayClusterSpec")]
    assert "ray.io/ippr" in plan.events[0].message


def test_the_autoscaler_refuses_it_too() -> None:
    body = with_ippr(cluster(group(replicas=1), autoscaling=True))
    with pytest.raises(SpecError, match=re.escape(PROBLEM)):
        read_spec(body)


def test_beside_kuberay_an_opted_in_cluster_asking_for_it_is_refused() -> None:
    body = with_ippr(cluster(group(replicas=1)))
    body["metadata"]["annotations"][OPT_IN_ANNOTATION] = "true"
    verdict = eligibility(body, beside_kuberay=True)
    assert not verdict.take
    assert verdict.refusal is not None
    assert verdict.refusal.startswith(PROBLEM)


def test_without_autoscaling_nobody_resizes_and_the_annotation_is_harmless() -> None:
    body = with_ippr(cluster(group(replicas=1)))
    plan, _ = plan_cluster(ClusterSnapshot(body, [pod("h", "headgroup")], []), ScaleExpectations())
    assert plan.invalid is None
