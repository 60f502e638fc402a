"""Whether a RayJob (or a RayCronJob's template) may run: KubeRay v1.6's checks, in its order and
its words, pure. The first problem found is returned as the Event reason and the message that go
into ``status.message`` with ``jobDeploymentStatus: ValidationFailed``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import ValidationError

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.naming import is_dns1035_label
from rayscale.cluster.validation import spec_error, validate_spec
from rayscale.rayjob import consts as C

__all__ = ["Invalid", "runtime_env", "validate_job", "validate_spec_only"]


@dataclasses.dataclass(frozen=True)
class Invalid:
    reason: str  # the Event's reason: InvalidRayJobMetadata | InvalidRayJobSpec | InvalidRayJobStatus
    message: str


_SPEC = "The RayJob spec is invalid: "
_UNSET = (
    "the DeletionPolicyType field of DeletionStrategy.{} cannot be unset when DeletionStrategy is enabled"
)


def runtime_env(text: str) -> dict[str, Any]:
    """``spec.runtimeEnvYAML`` as a mapping ({} when empty); ValueError as KubeRay words it."""
    if not text:
        return {}
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"failed to unmarshal RuntimeEnvYAML: {text}: {exc}") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"failed to unmarshal RuntimeEnvYAML: {text}: not a mapping")
    return value


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def validate_job(job: Mapping[str, Any]) -> Invalid | None:
    """KubeRay's validateRayJob: metadata, spec, status."""
    meta = job.get("metadata") or {}
    name = str(meta.get("name") or "")
    if len(name) > C.MAX_NAME:
        return Invalid(
            C.EV_INVALID_METADATA,
            f"The RayJob metadata is invalid: RayJob name should be no more than {C.MAX_NAME} characters",
        )
    if not is_dns1035_label(name):
        return Invalid(
            C.EV_INVALID_METADATA,
            f"The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label: {name!r}",
        )
    spec = job.get("spec") or {}
    problem = validate_spec_only(spec, meta.get("annotations") or {})
    if problem:
        return Invalid(C.EV_INVALID_SPEC, problem)
    status = job.get("status") or {}
    if status.get("jobDeploymentStatus") == C.WAITING and spec.get("submissionMode") != C.INTERACTIVE_MODE:
        return Invalid(
            C.EV_INVALID_STATUS,
            "The RayJob status is invalid: JobDeploymentStatus cannot be `Waiting` when SubmissionMode "
            "is not InteractiveMode",
        )
    return None


def validate_spec_only(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> str | None:
    """KubeRay's ValidateRayJobSpec (also what a RayCronJob's jobTemplate must pass). A RayJob is
    planned every few seconds while it runs and its spec rarely changes: the answer is remembered
    by the arguments' JSON (validating the embedded RayCluster costs many times more)."""
    return _validated(json.dumps([spec, annotations], sort_keys=True, separators=(",", ":"), default=str))


@functools.lru_cache(maxsize=4096)
def _validated(arguments: str) -> str | None:
    spec, annotations = json.loads(arguments)
    return _validate_spec_only(spec, annotations)


def _validate_spec_only(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> str | None:
    suspend = bool(spec.get("suspend"))
    shutdown = bool(spec.get("shutdownAfterJobFinishes"))
    mode = spec.get("submissionMode") or C.K8S_JOB_MODE
    selector = spec.get("clusterSelector") or {}
    backoff = _int(spec.get("backoffLimit"))
    if suspend and not shutdown:
        return _SPEC + "a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended"
    if int(spec.get("ttlSecondsAfterFinished") or 0) < 0:
        return _SPEC + "TTLSecondsAfterFinished must be a non-negative integer"
    if problem := _deletion_problem(spec):
        return problem
    if suspend and selector:
        return _SPEC + "the ClusterSelector mode doesn't support the suspend operation"
    cluster_spec = spec.get("rayClusterSpec")
    if cluster_spec is None and not selector:
        return _SPEC + "one of RayClusterSpec or ClusterSelector must be set"
    if selector:
        if not selector.get(C.CLUSTER_SELECTOR_LABEL):
            return "cluster name in ClusterSelector should not be empty"
        if mode == C.SIDECAR_MODE:
            return "ClusterSelector is not supported in SidecarMode"
        if backoff is not None and backoff > 0:
            return _SPEC + "BackoffLimit is incompatible with ClusterSelector mode"
    if mode == C.INTERACTIVE_MODE and backoff is not None and backoff > 0:
        return _SPEC + "BackoffLimit is incompatible with InteractiveMode"
    if mode == C.SIDECAR_MODE:
        if spec.get("submitterPodTemplate") is not None:
            return "Currently, SidecarMode doesn't support SubmitterPodTemplate"
        if spec.get("submitterConfig") is not None:
            return "Currently, SidecarMode doesn't support SubmitterConfig"
        head_spec = (((cluster_spec or {}).get("headGroupSpec") or {}).get("template") or {}).get(
            "spec"
        ) or {}
        if head_spec.get("restartPolicy") not in (None, "", "Never"):
            return "restartPolicy for head Pod should be Never or unset when using SidecarMode"
    if cluster_spec is not None and (problem := _cluster_spec_problem(cluster_spec, annotations)):
        return problem
    try:
        runtime_env(str(spec.get("runtimeEnvYAML") or ""))
    except ValueError as exc:
        return str(exc)
    if (entry := spec.get("entrypointResources")) and not _json_object(str(entry)):
        return _SPEC + f"entrypointResources must be a JSON object of resource names to amounts: {entry}"
    active = _int(spec.get("activeDeadlineSeconds"))
    if active is not None and active <= 0:
        return _SPEC + "activeDeadlineSeconds must be a positive integer"
    pre_running = _int(spec.get("preRunningDeadlineSeconds"))
    if pre_running is not None and pre_running <= 0:
        return _SPEC + "preRunningDeadlineSeconds must be a positive integer"
    if backoff is not None and backoff < 0:
        return _SPEC + "backoffLimit must be a positive integer"
    return None


def _json_object(text: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict)


def _cluster_spec_problem(raw: Mapping[str, Any], annotations: Mapping[str, str]) -> str | None:
    auth = raw.get("authOptions") or {}
    if auth.get("enableK8sTokenAuth"):
        return _SPEC + "K8s token auth mode is currently not supported for RayJob"
    try:
        spec = RayClusterSpec.model_validate(raw)
    except ValidationError as exc:
        return _SPEC + spec_error(exc).replace("spec.", "spec.rayClusterSpec.", 1)
    meta = ClusterMeta(namespace="", name="", uid="", annotations=dict(annotations))
    problem = validate_spec(meta, spec)
    return _SPEC + problem if problem else None


# ---- deletionStrategy (KubeRay's validateDeletionConfiguration)


def _deletion_problem(spec: Mapping[str, Any]) -> str | None:
    shutdown = bool(spec.get("shutdownAfterJobFinishes"))
    if not shutdown and int(spec.get("ttlSecondsAfterFinished") or 0) > 0:
        return (
            _SPEC + "a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished"
        )
    strategy = spec.get("deletionStrategy")
    if strategy is None:
        return None
    legacy = strategy.get("onSuccess") is not None or strategy.get("onFailure") is not None
    rules = strategy.get("deletionRules") or []
    if rules and shutdown:
        return _SPEC + (
            "spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive"
        )
    if rules and legacy:
        return _SPEC + "Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously"
    if legacy:
        return _legacy_problem(spec, strategy)
    if rules:
        return _rules_problem(spec, rules)
    return _SPEC + (
        "DeletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field "
        "(cannot be empty)"
    )


def _rules_problem(spec: Mapping[str, Any], rules: list[Mapping[str, Any]]) -> str | None:
    selector = bool(spec.get("clusterSelector"))
    errors: list[str] = []
    by_condition: dict[tuple[str, str], dict[str, int]] = {}
    for i, rule in enumerate(rules):
        condition = rule.get("condition") or {}
        policy = str(rule.get("policy") or "")
        job_status, deployment = condition.get("jobStatus"), condition.get("jobDeploymentStatus")
        ttl = int(condition.get("ttlSeconds") or 0)
        if job_status is not None and deployment is not None:
            errors.append(
                f"deletionRules[{i}]: cannot set both JobStatus and JobDeploymentStatus at the same time"
            )
            continue
        if job_status is None and deployment is None:
            errors.append(f"deletionRules[{i}]: exactly one of JobStatus and JobDeploymentStatus must be set")
            continue
        if ttl < 0:
            errors.append(f"deletionRules[{i}]: TTLSeconds must be non-negative")
            continue
        if selector and policy in (C.DELETE_CLUSTER, C.DELETE_WORKERS):
            errors.append(
                f"deletionRules[{i}]: DeletionPolicyType '{policy}' not supported when ClusterSelector is set"
            )
            continue
        kind, value = (
            ("JobStatus", job_status) if job_status is not None else ("JobDeploymentStatus", deployment)
        )
        ttls = by_condition.setdefault((kind, str(value)), {})
        if policy in ttls:
            errors.append(
                f"deletionRules[{i}]: duplicate rule for DeletionPolicyType '{policy}' and {kind} '{value}'"
            )
            continue
        ttls[policy] = ttl
    for (kind, value), ttls in by_condition.items():
        errors += _ttl_order_problems(ttls, kind, value)
    return "\n".join(errors) or None


def _ttl_order_problems(ttls: Mapping[str, int], kind: str, value: str) -> list[str]:
    """TTLs must not decrease along DeleteWorkers, DeleteCluster, DeleteSelf."""
    problems: list[str] = []
    previous: tuple[str, int] | None = None
    for policy in (C.DELETE_WORKERS, C.DELETE_CLUSTER, C.DELETE_SELF):
        if policy not in ttls:
            continue
        if previous is not None and ttls[policy] < previous[1]:
            problems.append(
                f"for {kind} '{value}': {policy} TTL ({ttls[policy]}) must be >= "
                f"{previous[0]} TTL ({previous[1]})"
            )
        previous = (policy, ttls[policy])
    return problems


def _legacy_problem(spec: Mapping[str, Any], strategy: Mapping[str, Any]) -> str | None:
    on_success, on_failure = strategy.get("onSuccess"), strategy.get("onFailure")
    if on_success is None or on_failure is None:
        return (
            "both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the "
            "legacy deletion policy fields of DeletionStrategy"
        )
    success, failure = on_success.get("policy"), on_failure.get("policy")
    if success is None:
        return _UNSET.format("OnSuccess")
    if failure is None:
        return _UNSET.format("OnFailure")
    if spec.get("clusterSelector"):
        if success in (C.DELETE_CLUSTER, C.DELETE_WORKERS):
            return f"the ClusterSelector mode doesn't support DeletionStrategy={success} on success"
        if failure in (C.DELETE_CLUSTER, C.DELETE_WORKERS):
            return f"the ClusterSelector mode doesn't support DeletionStrategy={failure} on failure"
    if spec.get("shutdownAfterJobFinishes") and C.DELETE_NONE in (success, failure):
        return _SPEC + "shutdownAfterJobFinshes is set to 'true' while deletion policy is 'DeleteNone'"
    return None
