"""What a RayJob makes, as KubeRay v1.6 builds it, pure: its RayCluster, the submitter (a Kubernetes
Job, or a container in the head pod), the ``ray job submit`` command, and the RayJob's own head
Service. Inputs are the RayJob and RayCluster as read (camelCase mappings)."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from rayscale.api.names import RAYJOB
from rayscale.api.raycluster import AuthOptions, RayClusterSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.rayversion import version_at_least
from rayscale.common import labels as L
from rayscale.common.types import Manifest, Obj
from rayscale.controller import switches, tokenauth
from rayscale.controller.services import head_service
from rayscale.rayjob import consts as C
from rayscale.rayjob.validation import runtime_env

__all__ = [
    "cluster_for_job",
    "go_quote",
    "job_head_service",
    "owner_reference",
    "submit_command",
    "submitter_job",
]

_PYTHON_HEALTH = (
    "python -c \"import urllib.request; r=urllib.request.urlopen('http://localhost:{port}/{path}', "
    "timeout={timeout}); exit(0 if b'success' in r.read() else 1)\""
)


def owner_reference(job: Obj) -> dict[str, Any]:
    meta = job.get("metadata") or {}
    return {
        "apiVersion": RAYJOB.api_version,
        "kind": RAYJOB.kind,
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def go_quote(text: str) -> str:
    """Go's strconv.Quote for the text KubeRay quotes (JSON): double quotes, backslash escapes."""
    return json.dumps(text, ensure_ascii=False)


def _origin_labels(job: Obj) -> dict[str, str]:
    return {L.ORIGINATED_FROM_CR_NAME: job["metadata"]["name"], L.ORIGINATED_FROM_CRD: C.CRD_LABEL_VALUE}


def _dashboard_port(cluster_spec: Mapping[str, Any]) -> int:
    head = ((cluster_spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    containers = head.get("containers") or [{}]
    for port in containers[0].get("ports") or []:
        if port.get("name") == C.DASHBOARD_PORT_NAME:
            return int(port.get("containerPort") or C.DEFAULT_DASHBOARD_PORT)
    return C.DEFAULT_DASHBOARD_PORT


def submit_command(job: Obj, mode: str) -> list[str]:
    """KubeRay's BuildJobSubmitCommand: in K8sJobMode idempotent (``ray job status`` first, then
    ``submit --no-wait``, then ``logs --follow``), in SidecarMode after the dashboard is healthy.
    ValueError for what KubeRay refuses (a metadata with a Ray older than 2.6, ...)."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    cluster_spec = spec.get("rayClusterSpec") or {}
    if mode == C.SIDECAR_MODE:
        port = _dashboard_port(cluster_spec)
        address = f"http://127.0.0.1:{port}"
    elif mode == C.K8S_JOB_MODE:
        address = str(status.get("dashboardURL") or "")
        if not address.startswith("http://"):
            address = "http://" + address
    else:
        raise ValueError(f"unsupported submission mode for job submit command: {mode}")
    job_id = str(status.get("jobId") or "")
    cmd: list[str] = []
    if mode == C.SIDECAR_MODE:
        health = _PYTHON_HEALTH.format(port=port, path="api/gcs_healthz", timeout=10)
        waiting = go_quote(f"Waiting for Ray Dashboard GCS to become healthy at {address} ...")
        cmd += ["until", health, ">/dev/null", "2>&1", ";", "do", "echo", waiting, ";", "sleep", "2", ";"]
        cmd += ["done", ";"]
    else:
        cmd += ["if", "!", "ray", "job", "status", "--address", address, job_id, ">/dev/null", "2>&1", ";"]
        cmd += ["then"]
    cmd += ["ray", "job", "submit", "--address", address]
    if mode == C.K8S_JOB_MODE:
        cmd.append("--no-wait")
    env = runtime_env(str(spec.get("runtimeEnvYAML") or ""))
    if env:
        cmd += ["--runtime-env-json", go_quote(json.dumps(env, separators=(",", ":"), sort_keys=True))]
    metadata = spec.get("metadata") or {}
    if metadata and spec.get("rayClusterSpec") is not None:
        version = str(cluster_spec.get("rayVersion") or "")
        if not version_at_least(version, (2, 6, 0)):
            raise ValueError("the Ray version must be at least 2.6.0 to use the metadata field")
        cmd += ["--metadata-json", go_quote(json.dumps(metadata, separators=(",", ":"), sort_keys=True))]
    if job_id:
        cmd += ["--submission-id", job_id]
    if (cpus := float(spec.get("entrypointNumCpus") or 0)) > 0:
        cmd += ["--entrypoint-num-cpus", f"{cpus:f}"]
    if (gpus := float(spec.get("entrypointNumGpus") or 0)) > 0:
        cmd += ["--entrypoint-num-gpus", f"{gpus:f}"]
    if resources := spec.get("entrypointResources"):
        cmd += ["--entrypoint-resources", go_quote(str(resources))]
    cmd += ["--", str(spec.get("entrypoint") or "").strip(), ";"]
    if mode == C.K8S_JOB_MODE:
        cmd += ["fi", ";", "ray", "job", "logs", "--address", address, "--follow", job_id]
    return cmd


def _auth(cluster: Obj | None) -> AuthOptions | None:
    raw = ((cluster or {}).get("spec") or {}).get("authOptions")
    return AuthOptions.model_validate(raw) if raw else None


def _default_submitter(cluster_spec: Mapping[str, Any]) -> dict[str, Any]:
    head = ((cluster_spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    image = ((head.get("containers") or [{}])[0]).get("image", "")
    return {
        "name": C.SUBMITTER_CONTAINER,
        "image": image,
        "resources": {
            "limits": {"cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "500m", "memory": "200Mi"},
        },
    }


def _configure_submitter(container: dict[str, Any], job: Obj, cluster: Obj | None, mode: str) -> None:
    """KubeRay's configureSubmitterContainer: the command (unless the template has one, in
    K8sJobMode), PYTHONUNBUFFERED, the dashboard address and submission id, the auth token."""
    command = submit_command(job, mode)
    if not container.get("command") or mode == C.SIDECAR_MODE:
        container["command"] = switches.container_command("e")
        container["args"] = [" ".join(command)]
    status = job.get("status") or {}
    env: list[dict[str, Any]] = container.setdefault("env", [])
    env.append({"name": "PYTHONUNBUFFERED", "value": "1"})
    env.append({"name": C.DASHBOARD_ADDRESS_ENV, "value": str(status.get("dashboardURL") or "")})
    env.append({"name": C.SUBMISSION_ID_ENV, "value": str(status.get("jobId") or "")})
    auth = _auth(cluster)
    if cluster is not None and tokenauth.enabled(auth):
        tokenauth.configure_container(container, cluster["metadata"]["name"], auth)


def submitter_job(job: Obj, cluster: Obj) -> Manifest:
    """The submitter Kubernetes Job of K8sJobMode, named as the RayJob."""
    spec = job.get("spec") or {}
    template = copy.deepcopy(spec.get("submitterPodTemplate"))
    if template is None:
        template = {
            "spec": {"containers": [_default_submitter(cluster.get("spec") or {})], "restartPolicy": "Never"}
        }
    pod_spec = template.setdefault("spec", {})
    _configure_submitter(pod_spec["containers"][0], job, cluster, C.K8S_JOB_MODE)
    backoff = (spec.get("submitterConfig") or {}).get("backoffLimit")
    meta = job["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "labels": {**_origin_labels(job), L.CREATED_BY: L.CREATED_BY_VALUE},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {
            "backoffLimit": C.SUBMITTER_BACKOFF_LIMIT if backoff is None else int(backoff),
            "template": template,
        },
    }


def cluster_for_job(job: Obj, name: str) -> Manifest:
    """KubeRay's constructRayClusterForRayJob: the RayJob's labels and annotations, the origin
    labels, the submission mode; in SidecarMode the submitter container in the head pod."""
    meta, spec = job["metadata"], job.get("spec") or {}
    mode = spec.get("submissionMode") or C.K8S_JOB_MODE
    labels = {**(meta.get("labels") or {}), **_origin_labels(job), C.SUBMISSION_MODE_LABEL: mode}
    annotations = dict(meta.get("annotations") or {})
    if mode == C.SIDECAR_MODE:
        annotations[C.DISABLE_HEAD_RESTART_ANNOTATION] = "true"
    cluster_meta: dict[str, Any] = {"name": name, "namespace": meta.get("namespace", ""), "labels": labels}
    if annotations:
        cluster_meta["annotations"] = annotations
    cluster_meta["ownerReferences"] = [owner_reference(job)]
    cluster: Manifest = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": cluster_meta,
        "spec": copy.deepcopy(spec.get("rayClusterSpec") or {}),
    }
    if mode == C.SIDECAR_MODE:
        container = _default_submitter(cluster["spec"])
        _configure_submitter(container, job, cluster, C.SIDECAR_MODE)
        head_spec = cluster["spec"]["headGroupSpec"]["template"].setdefault("spec", {})
        head_spec.setdefault("containers", []).append(container)
        head_spec["restartPolicy"] = "Never"
    return cluster


def job_head_service(job: Obj, cluster: Obj) -> Manifest:
    """The RayJob's own head Service (``<rayjob>-head-svc``), selecting its current cluster's head."""
    cmeta = ClusterMeta.from_body(cluster)
    service = head_service(cmeta, RayClusterSpec.model_validate(cluster.get("spec") or {}))
    name = job["metadata"]["name"]
    service["metadata"] = {
        "name": f"{name}-head-svc",
        "namespace": job["metadata"].get("namespace", ""),
        "labels": {
            **_origin_labels(job),
            L.NODE_TYPE: L.HEAD,
            L.IDENTIFIER: f"{name}-head"[-63:],
        },
        **(
            {"annotations": service["metadata"]["annotations"]}
            if service["metadata"].get("annotations")
            else {}
        ),
        "ownerReferences": [owner_reference(job)],
    }
    return service
