"""Validation of a RayCluster (both halves run it): each case names the field and the rule."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import cluster, group
from tests.support.invalid_specs import CASES, BadSpec

from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.validation import Invalid, parse_and_validate


def _check(body: dict[str, Any]) -> str | None:
    result = parse_and_validate(ClusterMeta.from_body(body), body["spec"])
    return result.message if isinstance(result, Invalid) else None


def _head_env(body: dict[str, Any], name: str, value: str) -> dict[str, Any]:
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": name, "value": value}
    ]
    return body


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (cluster(group()), None),
        (cluster(group(), name="x" * 54), "metadata.name: must be no more than 53 characters (54)"),
        (cluster(group(), name="Bad_Name"), "metadata.name: 'Bad_Name' is not a DNS-1035 label"),
        (cluster(group(min_replicas=3, max_replicas=2)),
         "spec.workerGroupSpecs[0].minReplicas: must be <= maxReplicas (3 > 2)"),
        (cluster(group(min_replicas=-1)), "spec.workerGroupSpecs[0].minReplicas: must be >= 0 (-1)"),
        (cluster(group(template={"spec": {"containers": []}})),
         "spec.workerGroupSpecs[0].template.spec.containers: must have at least one container"),
        (cluster(group(rayStartParams={"num-cpus": "1"}, resources={"CPU": "1"})),
         "spec.workerGroupSpecs[0].rayStartParams.num-cpus: not allowed with "
         "spec.workerGroupSpecs[0].resources (use only one)"),
        (cluster(group(rayStartParams={"labels": "a=b"})),
         "spec.workerGroupSpecs[0].rayStartParams.labels: not allowed (use spec.workerGroupSpecs[0].labels)"),
        (cluster(group(idleTimeoutSeconds=10)),
         "spec.workerGroupSpecs[0].idleTimeoutSeconds: only allowed with autoscaler v2"),
        (cluster(group(idleTimeoutSeconds=10), autoscaling=True, autoscalerOptions={"version": "v2"}), None),
        (cluster(group(suspend=True), autoscaling=True),
         "spec.workerGroupSpecs[0].suspend: not allowed with enableInTreeAutoscaling"),
        (_head_env(cluster(group()), "RAY_enable_autoscaler_v2", "1"),
         "spec.headGroupSpec.template: env RAY_enable_autoscaler_v2 requires enableInTreeAutoscaling"),
        (cluster(group(maxReplicas="many")), "spec.workerGroupSpecs[0].maxReplicas: "
         "Input should be a valid integer, unable to parse string as an integer"),
    ],
)  # fmt: skip
def test_validation(body: dict[str, Any], expected: str | None) -> None:
    assert _check(body) == expected


def _ft(annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    body = cluster(group())
    body["metadata"]["annotations"] = annotations
    body["spec"].update(spec)
    return body


def test_gcs_fault_tolerance_rules_as_kuberay() -> None:
    options = {"redisAddress": "redis:6379"}
    assert _check(_ft({}, gcsFaultToleranceOptions=options)) is None
    ns = {"ray.io/external-storage-namespace": "x"}
    assert _check(_ft(ns, gcsFaultToleranceOptions=options)) == (
        "metadata.annotations.ray.io/external-storage-namespace: not allowed with"
        " gcsFaultToleranceOptions (use gcsFaultToleranceOptions.externalStorageNamespace)"
    )
    assert _check(_ft({"ray.io/ft-enabled": "true"}, gcsFaultToleranceOptions=options)) == (
        "spec.gcsFaultToleranceOptions: not allowed together with annotation ray.io/ft-enabled"
    )
    # The annotation turns it on whatever its case, so RAY_REDIS_ADDRESS is allowed then.
    assert _check(_head_env(_ft({"ray.io/ft-enabled": "True"}), "RAY_REDIS_ADDRESS", "r:6379")) is None
    assert _check(_head_env(_ft({}), "RAY_REDIS_ADDRESS", "r:6379")) == (
        "spec.headGroupSpec.template: env RAY_REDIS_ADDRESS requires GCS fault tolerance"
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"tlsOptions": {}}, "spec.tlsOptions: not implemented by rayscale (remove it)"),
        ({"networkPolicy": {"enabled": True}}, "spec.networkPolicy: not implemented by rayscale (remove it)"),
        ({"historyServerOptions": {}}, "spec.historyServerOptions: not implemented by rayscale (remove it)"),
        ({"gcsFaultToleranceOptions": {"backend": "rocksdb"}},
         "spec.gcsFaultToleranceOptions.backend: rocksdb is not implemented (use redis)"),
        ({"gcsFaultToleranceOptions": {"redisAddress": "r:6379", "storage": {"size": "1Gi"}}},
         "spec.gcsFaultToleranceOptions.storage: not implemented by rayscale (remove it)"),
    ],
)  # fmt: skip
def test_fields_rayscale_does_not_implement_are_refused(extra: dict[str, Any], expected: str) -> None:
    body = cluster(group())
    body["spec"].update(extra)
    assert _check(body) == expected


def test_ingress_options_are_refused() -> None:
    body = cluster(group())
    body["spec"]["headGroupSpec"]["ingressOptions"] = {"host": "x"}
    assert _check(body) == "spec.headGroupSpec.ingressOptions: not implemented by rayscale (remove it)"


# ----------------------------------------------------------------------------- bad input, bounded


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_bad_spec_names_its_field(case: BadSpec) -> None:
    assert _check(case.apply(cluster(group()))) == case.message


def test_the_pod_limit_is_a_parameter() -> None:
    body = cluster(group(replicas=30, max_replicas=100), group("big", replicas=2, max_replicas=10, hosts=10))
    assert _check(body) is None
    result = parse_and_validate(ClusterMeta.from_body(body), body["spec"], max_pods=49)
    assert isinstance(result, Invalid)
    assert result.message == (
        "spec.workerGroupSpecs: 50 worker pods in all is over the limit of 49 worker pods per RayCluster"
        " (--max-pods-per-cluster)"
    )


def test_suspended_groups_and_replicas_above_max_count_as_the_controller_counts_them() -> None:
    # maxReplicas clamps replicas; a suspended group has no pods; the head is not counted.
    body = cluster(group(replicas=50_000, max_replicas=10_000), group("off", replicas=10_000, suspend=True))
    body["spec"]["workerGroupSpecs"][1]["maxReplicas"] = 10_000
    assert _check(body) is None


def test_validation_costs_nothing_per_pod_or_digit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The largest counts and exponents are refused by arithmetic on the numbers as written:
    no pod manifest is built and no big number is expanded."""
    import rayscale.controller.pods as pods

    def never(*_: Any, **__: Any) -> Any:
        raise AssertionError("a pod was built while validating")

    monkeypatch.setattr(pods, "worker_pod", never)
    body = cluster(group(replicas=2**31 - 1, max_replicas=2**31 - 1, hosts=2**31 - 1))
    assert _check(body) == (
        "spec.workerGroupSpecs[0].numOfHosts: 2147483647 hosts per replica is over the limit of 10000"
        " worker pods per RayCluster (--max-pods-per-cluster)"
    )
    body = cluster(group())
    body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = (
        "9e999999999999999"
    )
    assert _check(body) == (
        "spec.workerGroupSpecs[0].template.spec.containers[0].resources.limits.cpu: '9e999999999999999'"
        " is out of range: quantities are limited to ±9223372036854775807 (2^63-1)"
    )


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"num-gpus": "1", "object-store-memory": "100000000", "port": "6379", "min-worker-port": "0",
          "node-ip-address": "$MY_POD_IP", "dashboard-host": "0.0.0.0"}, None),
        ({"object-store-memory": "lots"},
         "spec.workerGroupSpecs[0].rayStartParams.object-store-memory: not a quantity: 'lots'"),
        ({"metrics-export-port": "8080x"},
         "spec.workerGroupSpecs[0].rayStartParams.metrics-export-port: must be a port number from 0 to 65535"
         " ('8080x')"),
        ({"resources": '{"custom": -1}'},
         "spec.workerGroupSpecs[0].rayStartParams.resources.custom: must not be negative"),
        ({"resources": '"[1, 2]"'},
         "spec.workerGroupSpecs[0].rayStartParams.resources: not a JSON object: '\"[1, 2]\"'"),
    ],
)  # fmt: skip
def test_ray_start_params(params: dict[str, str], expected: str | None) -> None:
    assert _check(cluster(group(rayStartParams=params))) == expected
