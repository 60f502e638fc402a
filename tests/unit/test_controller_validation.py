"""Controller-side validation: each case names the field and the rule."""

from __future__ import annotations

from typing import Any

import pytest
from raycluster_factory import cluster, group

from rayscale.controller.snapshot import ClusterMeta
from rayscale.controller.validation import Invalid, parse_and_validate


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
        (cluster(group(maxReplicas="many")), "spec.workerGroupSpecs.0.maxReplicas: "
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
