"""The autoscaler's reader of a RayCluster: one verdict with the controller, the same groups for the
live loop and ``rayscale simulate``, and what it reads beside KubeRay's operator."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import cluster, container, group
from tests.support.invalid_specs import CASES, BadSpec

from rayscale.autoscaler.scenario import ScenarioError, parse_scenario
from rayscale.autoscaler.scheduling.model import UNLIMITED, UpscalingMode
from rayscale.autoscaler.spec_reader import DEFAULT_IDLE_TIMEOUT_SECONDS, SpecError, read_spec
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.validation import Invalid, parse_and_validate


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_spec_the_controller_refuses_is_refused_in_its_words(case: BadSpec) -> None:
    body = case.apply(cluster(group()))
    parsed = parse_and_validate(ClusterMeta.from_body(body), body["spec"])
    assert isinstance(parsed, Invalid)
    with pytest.raises(SpecError) as refused:
        read_spec(body)
    assert str(refused.value) == parsed.message
    if parsed.reason == "InvalidRayClusterSpec":  # simulate says the same, under `cluster.`
        with pytest.raises(ScenarioError, match="^cluster." + parsed.message[:40].replace("[", r"\[")):
            parse_scenario({"cluster": body})


def test_pydantic_problems_name_the_field_with_list_indexes() -> None:
    body = cluster(group(), group("b"))
    body["spec"]["workerGroupSpecs"][1]["maxReplicas"] = "many"
    with pytest.raises(SpecError, match=r"^spec\.workerGroupSpecs\[1\]\.maxReplicas: Input should be"):
        read_spec(body, check=False)


def _template(**limits: str) -> dict[str, Any]:
    return {"spec": {"containers": [container("ray-worker", **limits)]}}


def test_defaults_and_the_scaled_groups() -> None:
    body = cluster(
        group("cpu", template=_template(cpu="4", memory="8Gi"), max_replicas=3),
        group("off", suspend=True),
    )
    scaling = read_spec(body)
    (only,) = scaling.groups
    assert only.name == "cpu"
    assert dict(only.resources) == {"CPU": 4.0, "memory": float(8 * 1024**3)}
    assert (only.min_replicas, only.max_replicas, only.num_of_hosts, only.priority) == (0, 3, 1, 0)
    assert scaling.options.idle_timeout_seconds == DEFAULT_IDLE_TIMEOUT_SECONDS
    assert scaling.options.upscaling_mode is UpscalingMode.DEFAULT
    assert scaling.options.max_workers is None


def test_options_and_group_fields_are_read() -> None:
    worker = group("gpu", template=_template(cpu="8", **{"nvidia.com/gpu": "2"}), max_replicas=4, hosts=2)
    worker |= {"idleTimeoutSeconds": 30, "priority": 5, "labels": {"zone": "a"}}
    body = cluster(worker, autoscaling=True)
    body["spec"]["rayVersion"] = "2.56.0"
    body["spec"]["autoscalerOptions"] = {
        "version": "v2",
        "idleTimeoutSeconds": 90,
        "upscalingMode": "Aggressive",
    }
    scaling = read_spec(body)
    (gpu,) = scaling.groups
    assert (gpu.idle_timeout_seconds, gpu.priority, gpu.num_of_hosts) == (30.0, 5, 2)
    assert dict(gpu.labels) == {"zone": "a"}
    assert gpu.resources["GPU"] == 2.0
    assert scaling.options.idle_timeout_seconds == 90.0
    assert scaling.options.upscaling_mode is UpscalingMode.AGGRESSIVE


def test_beside_kuberay_only_the_crd_shape_is_required() -> None:
    """KubeRay's operator decides what it accepts: rayscale's own rules do not stop the autoscaler."""
    body = cluster(group(), autoscaling=True)
    body["spec"]["workerGroupSpecs"][0] |= {"idleTimeoutSeconds": 10, "numOfHosts": 0}
    with pytest.raises(SpecError, match=r"numOfHosts: must be >= 1 \(0\)"):
        read_spec(body)
    (lenient,) = read_spec(body, check=False).groups
    assert (lenient.idle_timeout_seconds, lenient.num_of_hosts) == (10.0, 1)


def test_the_pod_limit_caps_max_workers_and_refuses_specs_beyond_it() -> None:
    body = cluster(group("a", max_replicas=UNLIMITED), group("b", max_replicas=5))
    assert read_spec(body, max_pods=10).options.max_workers == 10
    assert read_spec(body).options.max_workers is None
    assert read_spec(cluster(group("b", max_replicas=5)), max_pods=10).options.max_workers is None
    over: dict[str, Any] = cluster(group("a", replicas=20, max_replicas=100))
    for check in (True, False):
        with pytest.raises(SpecError, match=r"over the limit of 10 worker pods"):
            read_spec(over, check=check, max_pods=10)


def test_a_scenario_needs_no_cluster_name() -> None:
    body = cluster(group())
    del body["metadata"]
    assert parse_scenario({"cluster": body}).groups == read_spec(cluster(group())).groups


def test_the_typed_cluster_carries_what_a_round_reads() -> None:
    """workersToDelete, the metadata, the resourceVersion and the status.autoscaler last written."""
    body = cluster(group("a", replicas=2, scaleStrategy={"workersToDelete": ["w-1"]}), group("b"))
    body["spec"]["workerGroupSpecs"][1]["scaleStrategy"] = {"workersToDelete": ["w-2", "w-3"]}
    body["metadata"]["resourceVersion"] = "42"
    body["status"] = {"autoscaler": {"conditions": [{"type": "RayCompatible", "status": "True"}]}}
    scaling = read_spec(body)
    assert scaling.workers_to_delete == {"w-1", "w-2", "w-3"}
    assert (scaling.meta.namespace, scaling.meta.name) == (
        body["metadata"]["namespace"],
        body["metadata"]["name"],
    )
    assert scaling.resource_version == "42"
    assert scaling.written == body["status"]["autoscaler"]
    bare = read_spec(cluster(group()), check=False)
    assert (bare.workers_to_delete, bare.written) == (frozenset(), None)
