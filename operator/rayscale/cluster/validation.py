"""Whether a RayCluster may be acted on: the checks both halves make before they do, pure.

The controller reports a problem in the ``SpecValid`` condition and an Event and builds nothing;
the autoscaler, beside rayscale's controller, neither plans nor patches such a cluster.

Each problem names the field and the rule, e.g.
`spec.workerGroupSpecs[0].minReplicas: must be <= maxReplicas (3 > 2)`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from rayscale.api.disruption_annotations import annotation_problem
from rayscale.api.raycluster import RayClusterSpec, WorkerGroupSpec
from rayscale.cluster import fields, ft, host
from rayscale.cluster.limits import DEFAULT_MAX_PODS, pods_problem
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.naming import is_dns1035_label
from rayscale.cluster.rayversion import version_at_least
from rayscale.common import labels as L

MAX_CLUSTER_NAME = 53
#: Ray 2.60's in-place pod resize for KubeRay (autoscaler v2): JSON, per group ``max-cpu``,
#: ``max-memory`` and ``resize-timeout``. rayscale resizes no pod: refused (`ippr_problem`).
IPPR_ANNOTATION = "ray.io/ippr"
#: rayStartParams a group's ``resources`` map replaces (`rayscale.cluster.host`).
RESOURCE_PARAMS = (*host.AMOUNT_PARAMS.values(), host.RESOURCES_PARAM)
_QUALIFIED = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclasses.dataclass(frozen=True)
class Invalid:
    reason: str  # InvalidRayClusterMetadata | InvalidRayClusterSpec
    message: str


def _env(template: Mapping[str, Any], name: str) -> str | None:
    containers = (template.get("spec") or {}).get("containers") or []
    for item in (containers[0].get("env") or []) if containers else []:
        if item.get("name") == name:
            return str(item.get("value", ""))
    return None


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true")


def _group_checks(
    path: str,
    template: Mapping[str, Any],
    params: Mapping[str, str] | None,
    resources: Mapping[str, str] | None,
    labels: Mapping[str, str] | None,
) -> str | None:
    if problem := fields.template_problem(f"{path}.template", template):
        return problem
    if problem := fields.ray_start_params_problem(f"{path}.rayStartParams", params):
        return problem
    if problem := fields.resource_map_problem(f"{path}.resources", resources):
        return problem
    if resources:
        for key in RESOURCE_PARAMS:
            if key in (params or {}):
                return f"{path}.rayStartParams.{key}: not allowed with {path}.resources (use only one)"
    if host.LABELS_PARAM in (params or {}):
        return f"{path}.rayStartParams.labels: not allowed (use {path}.labels)"
    for key, value in (labels or {}).items():
        if len(key.rsplit("/", 1)[-1]) > 63 or not _QUALIFIED.match(key):
            return f"{path}.labels: key {key!r} is not a qualified name"
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            return f"{path}.labels.{key}: value {value!r} is not a valid label value"
    return None


def _group_name_problem(path: str, name: str, seen: Mapping[str, int]) -> str | None:
    """A group name is the ``ray.io/group`` label of its pods and Ray's node type: a label
    value, unique, and not the head group's."""
    where = f"{path}.groupName"
    if not name:
        return f"{where}: must not be empty"
    if len(name) > 63 or not _LABEL_VALUE.match(name):
        return f"{where}: {fields.shown(name)} is not a valid label value (it labels the group's pods)"
    if name == L.HEAD_GROUP:
        return f"{where}: {name!r} is the head group's name (the ray.io/group label of the head pod)"
    if name in seen:
        return f"{where}: {name!r} is also the name of spec.workerGroupSpecs[{seen[name]}]"
    return None


def _count_checks(path: str, group: WorkerGroupSpec) -> str | None:
    for field, value, lowest in (
        ("replicas", group.replicas, 0),
        ("minReplicas", group.min_replicas, 0),
        ("maxReplicas", group.max_replicas, 0),
        ("numOfHosts", group.num_of_hosts, 1),
    ):
        if value is not None and value < lowest:
            return f"{path}.{field}: must be >= {lowest} ({value})"
    if group.min_replicas > group.max_replicas:
        return f"{path}.minReplicas: must be <= maxReplicas ({group.min_replicas} > {group.max_replicas})"
    return None


def validate_metadata(meta: ClusterMeta) -> Invalid | None:
    if len(meta.name) > MAX_CLUSTER_NAME:
        return Invalid(
            "InvalidRayClusterMetadata",
            f"metadata.name: must be no more than {MAX_CLUSTER_NAME} characters ({len(meta.name)})",
        )
    if not is_dns1035_label(meta.name):
        return Invalid("InvalidRayClusterMetadata", f"metadata.name: {meta.name!r} is not a DNS-1035 label")
    return None


def spec_error(exc: ValidationError) -> str:
    """The first problem pydantic found in a spec, as a field path and a message:
    ``spec.workerGroupSpecs[0].groupName: Field required``."""
    err = exc.errors()[0]
    where = "spec"
    for part in err["loc"]:
        where += f"[{part}]" if isinstance(part, int) else f".{part}"
    return f"{where}: {err['msg']}"


def parse_and_validate(
    meta: ClusterMeta, raw: Mapping[str, Any], *, max_pods: int = DEFAULT_MAX_PODS
) -> RayClusterSpec | Invalid:
    """The parsed spec, or the first problem found (`max_pods`: worker pods allowed, see limits)."""
    problem = validate_metadata(meta)
    if problem:
        return problem
    try:
        spec = RayClusterSpec.model_validate(raw)
    except ValidationError as exc:
        return Invalid("InvalidRayClusterSpec", spec_error(exc))
    message = validate_spec(meta, spec, max_pods=max_pods)
    return Invalid("InvalidRayClusterSpec", message) if message else spec


def _unimplemented(spec: RayClusterSpec) -> str | None:
    """Fields of newer KubeRay APIs that rayscale (like KubeRay v1.6's operator) does not act on:
    refused, so that nobody believes them in force."""
    fields: list[tuple[str, object]] = [
        ("spec.networkPolicy", spec.network_policy),
        ("spec.tlsOptions", spec.tls_options),
        ("spec.historyServerOptions", spec.history_server_options),
        ("spec.headGroupSpec.ingressOptions", spec.head_group_spec.ingress_options),
    ]
    options = spec.gcs_fault_tolerance_options
    if options is not None:
        fields.append(("spec.gcsFaultToleranceOptions.storage", options.storage))
        if options.backend == "rocksdb":
            return "spec.gcsFaultToleranceOptions.backend: rocksdb is not implemented (use redis)"
    for path, value in fields:
        if value is not None:
            return f"{path}: not implemented by rayscale (remove it)"
    return None


def ippr_problem(annotations: Mapping[str, str]) -> str | None:
    """Why a RayCluster asking for Ray's in-place pod resize (`IPPR_ANNOTATION`) is refused, or None.

    Ray 2.60's autoscaler with KubeRay resizes running worker pods (the ``resize`` subresource)
    before it adds pods; rayscale's autoscaler only adds and removes pods, and the Role rayscale's
    controller gives Ray's own autoscaler (``--mode controller``) has no ``pods/resize``. Refused
    so that nobody believes it in force."""
    if IPPR_ANNOTATION not in annotations:
        return None
    return (
        f"metadata.annotations.{IPPR_ANNOTATION}: in-place pod resize is not implemented by rayscale"
        " (its autoscaler adds and removes pods, it never resizes one); remove the annotation"
    )


def validate_spec(meta: ClusterMeta, spec: RayClusterSpec, *, max_pods: int = DEFAULT_MAX_PODS) -> str | None:
    if problem := _unimplemented(spec):
        return problem
    if spec.autoscaling and (problem := ippr_problem(meta.annotations)):
        return problem
    if problem := annotation_problem(meta.annotations):
        return problem
    head = spec.head_group_spec
    problem = _group_checks(
        "spec.headGroupSpec", head.template, head.ray_start_params, head.resources, head.labels
    )
    if problem:
        return problem
    if problem := fields.service_type_problem("spec.headGroupSpec.serviceType", head.service_type):
        return problem
    if problem := fields.head_service_problem("spec.headGroupSpec.headService", head.head_service):
        return problem
    head_v2 = _env(head.template, "RAY_enable_autoscaler_v2")
    version = spec.autoscaler_options.version if spec.autoscaler_options else None
    v2 = version == "v2" or _truthy(head_v2)
    names: dict[str, int] = {}
    for i, g in enumerate(spec.workers):
        path = f"spec.workerGroupSpecs[{i}]"
        if problem := _group_name_problem(path, g.group_name, names):
            return problem
        names[g.group_name] = i
        problem = _group_checks(path, g.template, g.ray_start_params, g.resources, g.labels)
        if problem:
            return problem
        if problem := _count_checks(path, g):
            return problem
        if g.idle_timeout_seconds is not None:
            if g.idle_timeout_seconds < 0:
                return f"{path}.idleTimeoutSeconds: must be >= 0 ({g.idle_timeout_seconds})"
            if not v2:
                return f"{path}.idleTimeoutSeconds: only allowed with autoscaler v2"
        if g.priority and not (v2 and version_at_least(spec.ray_version, (2, 56, 0))):
            return f"{path}.priority: requires autoscaler v2 and rayVersion >= 2.56.0"
    if problem := pods_problem(spec.workers, max_pods):
        return problem
    if ft.FT_ENABLED_ANNOTATION in meta.annotations and spec.gcs_fault_tolerance_options is not None:
        return "spec.gcsFaultToleranceOptions: not allowed together with annotation ray.io/ft-enabled"
    if not ft.enabled(spec, meta.annotations) and _env(head.template, "RAY_REDIS_ADDRESS") is not None:
        return "spec.headGroupSpec.template: env RAY_REDIS_ADDRESS requires GCS fault tolerance"
    if spec.gcs_fault_tolerance_options is not None:
        if "redis-password" in (head.ray_start_params or {}):
            return (
                "spec.headGroupSpec.rayStartParams.redis-password: use gcsFaultToleranceOptions.redisPassword"
            )
        for env in ("REDIS_PASSWORD", "RAY_REDIS_ADDRESS"):
            if _env(head.template, env) is not None:
                return f"spec.headGroupSpec.template: env {env} not allowed with gcsFaultToleranceOptions"
        if meta.annotations.get(ft.STORAGE_NS_ANNOTATION):
            return (
                f"metadata.annotations.{ft.STORAGE_NS_ANNOTATION}: not allowed with"
                " gcsFaultToleranceOptions (use gcsFaultToleranceOptions.externalStorageNamespace)"
            )
    if "redis-username" in (head.ray_start_params or {}) or _env(head.template, "REDIS_USERNAME") is not None:
        return "spec.headGroupSpec: redis-username / REDIS_USERNAME not allowed (use redisUsername)"
    if not spec.autoscaling:
        if _truthy(head_v2):
            return (
                "spec.headGroupSpec.template: env RAY_enable_autoscaler_v2 requires enableInTreeAutoscaling"
            )
    else:
        for i, g in enumerate(spec.workers):
            if g.suspend:
                return f"spec.workerGroupSpecs[{i}].suspend: not allowed with enableInTreeAutoscaling"
        if version is not None and head_v2 is not None:
            return "spec.autoscalerOptions.version: not allowed together with env RAY_enable_autoscaler_v2"
        if version == "v2":
            for path, template in [("spec.headGroupSpec", head.template)] + [
                (f"spec.workerGroupSpecs[{i}]", g.template) for i, g in enumerate(spec.workers)
            ]:
                policy = (template.get("spec") or {}).get("restartPolicy")
                if policy not in (None, "", "Never"):
                    return f"{path}.template.spec.restartPolicy: must be unset or Never with autoscaler v2"
    opts = spec.autoscaler_options
    if opts is not None:
        if opts.idle_timeout_seconds is not None and opts.idle_timeout_seconds < 0:
            return f"spec.autoscalerOptions.idleTimeoutSeconds: must be >= 0 ({opts.idle_timeout_seconds})"
        if any(e.get("name") == "KUBERAY_GEN_AUTOSCALER_START_CMD" for e in opts.env or []):
            return "spec.autoscalerOptions.env: KUBERAY_GEN_AUTOSCALER_START_CMD is reserved"
    return _auth_problem(spec)


def _auth_problem(spec: RayClusterSpec) -> str | None:
    """KubeRay's rules for ``authOptions``: token mode needs Ray 2.52; Kubernetes token auth needs
    token mode, Ray 2.55 and no ``secretName``."""
    auth = spec.auth_options
    if auth is None:
        return None
    if auth.mode == "token" and not version_at_least(spec.ray_version, (2, 52, 0)):
        return "spec.authOptions.mode: token authentication requires rayVersion >= 2.52.0"
    if not auth.enable_k8s_token_auth:
        return None
    if auth.mode != "token":
        return "spec.authOptions.enableK8sTokenAuth: needs authOptions.mode: token"
    if not version_at_least(spec.ray_version, (2, 55, 0)):
        return "spec.authOptions.enableK8sTokenAuth: requires rayVersion >= 2.55.0"
    if auth.secret_name:
        return "spec.authOptions.enableK8sTokenAuth: not allowed together with authOptions.secretName"
    return None
