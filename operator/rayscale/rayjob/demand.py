"""A RayJob's demand from the start: its entrypoint's declared resources as a RayResourceRequest,
so the autoscaler launches the workers the driver needs while the head boots. Pure.

KubeRay starts workers only once the head is ready and the job is submitted: Ray states the
driver's demand then, and only then does an autoscaler see it. rayscale knows it earlier: a RayJob
whose cluster autoscales and whose entrypoint declares resources (``entrypointNumCpus``,
``entrypointNumGpus``, ``entrypointResources``) gets, with its RayCluster, a RayResourceRequest
(named after the cluster, owned by the RayJob, labelled as the RayJob's) of one bundle of those
resources. The annotation ``rayscale.io/resource-request`` adds bundles of the user's own (a JSON
list in RayResourceRequest's bundle format, ``[{"resources": {"GPU": 1}, "count": 2}]``) to the
same request: workers the job will need, started with the head.

The request goes once the driver runs (``jobStatus: RUNNING``), the job ends, or the cluster is
released (suspend, retry), not at the end of the run. A RayResourceRequest is a floor on the
cluster's capacity, not demand added to Ray's: kept through the run it could never get the job
more, only keep capacity the job has finished with from scaling down. Once the driver runs, Ray
holds the entrypoint's resources for it (its node is busy, so it stays), and what the job asks for
next is Ray's own demand, which the autoscaler reads from the GCS.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rayscale.api.names import RAYRESOURCEREQUEST
from rayscale.autoscaler.request_reader import read_request
from rayscale.common import labels as L
from rayscale.common.types import Manifest, Obj
from rayscale.rayjob import consts as C
from rayscale.rayjob.actions import Action, CreateRequest, DeleteRequest
from rayscale.rayjob.build import owner_reference

__all__ = [
    "REQUEST_ANNOTATION",
    "annotation_problem",
    "demand_request",
    "request_actions",
    "request_name",
    "request_wanted",
]

REQUEST_ANNOTATION = "rayscale.io/resource-request"
_WHERE = f"metadata.annotations.{REQUEST_ANNOTATION}"
# The driver runs, or never will on this cluster: the request has done its part.
_DONE_JOB = frozenset({"RUNNING"}) | C.JOB_TERMINAL
_DONE_DEPLOYMENT = C.DEPLOYMENT_TERMINAL | {C.SUSPENDING, C.SUSPENDED, C.RETRYING}


def request_name(cluster_name: str) -> str:
    return f"{cluster_name}-demand"


def _amount(value: float) -> int | str:
    return int(value) if float(value).is_integer() else repr(float(value))


def _entrypoint(spec: Mapping[str, Any]) -> dict[str, int | str]:
    """The entrypoint's declared resources, Ray's names; the zero ones left out."""
    out: dict[str, float] = {}
    for key, resource in (("entrypointNumCpus", "CPU"), ("entrypointNumGpus", "GPU")):
        if spec.get(key):
            out[resource] = float(spec[key])
    text = spec.get("entrypointResources")
    if text:
        for name, amount in json.loads(str(text)).items():
            if amount:
                out[str(name)] = float(amount)
    return {name: _amount(v) for name, v in out.items() if v > 0}


def _annotated(job: Obj) -> list[Any]:
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(REQUEST_ANNOTATION)
    if text is None:
        return []
    value = json.loads(str(text))
    if not isinstance(value, list):
        raise ValueError("must be a JSON list of bundles")
    return value


def _autoscaling(spec: Mapping[str, Any]) -> bool:
    return bool((spec.get("rayClusterSpec") or {}).get("enableInTreeAutoscaling"))


def annotation_problem(job: Obj) -> str | None:
    """Why the RayJob's ``rayscale.io/resource-request`` annotation cannot be used, or None."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    if REQUEST_ANNOTATION not in annotations:
        return None
    spec = job.get("spec") or {}
    if spec.get("clusterSelector") or not _autoscaling(spec):
        return (
            f"{_WHERE}: only a RayJob whose own RayCluster autoscales"
            " (rayClusterSpec.enableInTreeAutoscaling: true) can request resources"
        )
    try:
        bundles = _annotated(job)
    except ValueError as exc:
        return f"{_WHERE}: {exc} ({annotations[REQUEST_ANNOTATION]!r})"
    if not bundles:
        return f"{_WHERE}: must list at least one bundle"
    read = read_request({"metadata": {"name": "annotation"}, "spec": {"bundles": bundles}})
    if read.problem is not None:
        return f"{_WHERE}: {read.problem.removeprefix('spec.')}"
    return None


def demand_request(job: Obj, cluster_name: str) -> Manifest | None:
    """The RayResourceRequest made with the RayJob's RayCluster, or None when there is nothing to
    ask for (no autoscaling, a cluster chosen by clusterSelector, no declared resources). The
    annotation is known good (`annotation_problem` runs first)."""
    spec = job.get("spec") or {}
    if spec.get("clusterSelector") or not _autoscaling(spec):
        return None
    bundles: list[Any] = []
    entrypoint = _entrypoint(spec)
    if entrypoint:
        bundles.append({"resources": entrypoint, "count": 1})
    bundles.extend(_annotated(job))
    if not bundles:
        return None
    meta = job.get("metadata") or {}
    return {
        **RAYRESOURCEREQUEST.type_meta(),
        "metadata": {
            "name": request_name(cluster_name),
            "namespace": meta.get("namespace", ""),
            "labels": {
                L.ORIGINATED_FROM_CR_NAME: meta.get("name", ""),
                L.ORIGINATED_FROM_CRD: C.CRD_LABEL_VALUE,
            },
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {"clusterName": cluster_name, "bundles": bundles},
    }


def request_wanted(status: Mapping[str, Any]) -> bool:
    """Whether the request still has a part to play: the driver does not run yet."""
    if (status.get("jobDeploymentStatus") or "") in _DONE_DEPLOYMENT:
        return False
    return (status.get("jobStatus") or "") not in _DONE_JOB


def request_actions(job: Obj, cluster: Obj | None, existing: Obj | None, *, creating: bool) -> list[Action]:
    """What the RayJob (`job` with the status this reconcile leaves) does with its request: make it
    with its cluster (`creating`: the cluster is made in this reconcile), delete it once it has
    done its part. `existing`: the request as the index holds it."""
    status = job.get("status") or {}
    wanted = request_wanted(status)
    if existing is not None:
        if wanted or (existing.get("metadata") or {}).get("deletionTimestamp"):
            return []
        return [DeleteRequest(str(existing["metadata"]["name"]))]
    name = str(status.get("rayClusterName") or "")
    if not wanted or not name:
        return []
    if not creating and (cluster is None or (cluster.get("metadata") or {}).get("deletionTimestamp")):
        return []
    manifest = demand_request(job, name)
    return [] if manifest is None else [CreateRequest(manifest)]
