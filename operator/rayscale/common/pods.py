"""Ray pods as plain data: what rayscale reads of a pod, and the slim copy its index keeps.

Pods are dicts as the API returns them, or the slim copies `slim_pod` makes of them for the
operator's pod index (both halves read those). The accessors below read only what the slim copy
keeps: a field read here and not kept there reads as empty in the operator.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from rayscale.common import labels as L
from rayscale.common.timefmt import parse_time
from rayscale.common.types import Obj

# The accessors.


def pod_name(pod: Obj) -> str:
    return str(pod.get("metadata", {}).get("name", ""))


def pod_labels(pod: Obj) -> Mapping[str, str]:
    labels: Mapping[str, str] = pod.get("metadata", {}).get("labels") or {}
    return labels


def pod_group(pod: Obj) -> str:
    return pod_labels(pod).get(L.GROUP, "")


def is_head(pod: Obj) -> bool:
    return pod_labels(pod).get(L.NODE_TYPE) == L.HEAD


def is_worker(pod: Obj) -> bool:
    return pod_labels(pod).get(L.NODE_TYPE) == L.WORKER


def phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def deletion_time(pod: Obj) -> datetime | None:
    return parse_time(pod.get("metadata", {}).get("deletionTimestamp"))


def is_terminating(pod: Obj) -> bool:
    return bool(pod.get("metadata", {}).get("deletionTimestamp"))


def creation_time(pod: Obj) -> str:
    return str(pod.get("metadata", {}).get("creationTimestamp") or "")


def condition(pod: Obj, kind: str) -> Obj | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            found: Obj = cond
            return found
    return None


def is_running_and_ready(pod: Obj) -> bool:
    """Phase Running and the Ready condition True."""
    ready = condition(pod, "Ready")
    return phase(pod) == "Running" and ready is not None and ready.get("status") == "True"


def is_running_ready_if_present(pod: Obj) -> bool:
    """Phase Running and, if the pod has a Ready condition, it is True (status `state` rule)."""
    ready = condition(pod, "Ready")
    return phase(pod) == "Running" and (ready is None or ready.get("status") == "True")


def awaits_scheduler(pod: Obj) -> bool:
    """Created and not yet looked at by a scheduler: Pending, not terminating, and no PodScheduled
    condition (binding sets it True; a pod that cannot be placed now gets it False)."""
    return (
        phase(pod) in ("", "Pending") and not is_terminating(pod) and condition(pod, "PodScheduled") is None
    )


def is_scheduling_gated(pod: Obj) -> bool:
    """Held back by a scheduling gate (Kueue's, anyone's): the API server says so in ``PodScheduled``
    (``False``, reason ``SchedulingGated``), which the index keeps (the spec's gates it does not)."""
    scheduled = condition(pod, "PodScheduled")
    return (
        scheduled is not None
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "SchedulingGated"
    )


def replica_index(pod: Obj) -> int | None:
    try:
        return int(pod_labels(pod)[L.REPLICA_INDEX])
    except (KeyError, ValueError):
        return None


def ray_container_name(pod: Obj) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    return str(containers[0].get("name", "")) if containers else ""


def is_unhealthy(pod: Obj) -> bool:
    """KubeRay's shouldDeletePod: Failed/Succeeded, or a dead Ray container with Never."""
    now = phase(pod)  # first: most pods are Pending or Running, and planning asks of every pod
    if now not in ("Failed", "Succeeded", "Running") or is_terminating(pod):
        return False
    if now != "Running":
        return True
    name = ray_container_name(pod)
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == name and "terminated" in (status.get("state") or {}):
            return (pod.get("spec") or {}).get("restartPolicy") == "Never"
    return False


# The slim copies the index keeps.

# The pod annotations rayscale reads: what the head was built from (upgradeStrategy Recreate).
POD_ANNOTATIONS = (L.HASH_ANNOTATION, L.KUBERAY_VERSION_ANNOTATION)

# The pod conditions rayscale reads, and their keys: Ready (the head's status), PodScheduled (the
# autoscaler's provisioning and boot clocks, and what a pending pod waits for in Ray's report).
_POD_CONDITIONS = {
    "Ready": ("type", "status", "reason", "message"),
    "PodScheduled": ("type", "status", "reason", "lastTransitionTime"),
}


def slim(body: Obj, spec_keys: tuple[str, ...]) -> dict[str, Any]:
    """The metadata rayscale reads of a pod or a Service, the `spec_keys` of its spec, its status."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    return {
        "metadata": {k: meta[k] for k in (
            "name", "namespace", "uid", "labels", "creationTimestamp", "deletionTimestamp", "resourceVersion"
        ) if k in meta},
        "spec": {k: spec[k] for k in spec_keys if k in spec},
        "status": dict(body.get("status") or {}),
    }  # fmt: skip


def slim_pod(body: Obj) -> dict[str, Any]:
    """The copy of a pod the index keeps: `slim`, the annotations of `POD_ANNOTATIONS`, the
    containers' names and `slim_pod_status`."""
    pod = slim(body, ("restartPolicy", "containers"))
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    kept = {k: v for k, v in annotations.items() if k in POD_ANNOTATIONS}
    if kept:
        pod["metadata"]["annotations"] = kept
    # Container names only: the first is Ray's; an "autoscaler" one is Ray's autoscaler sidecar.
    pod["spec"]["containers"] = [{"name": c.get("name")} for c in pod["spec"].get("containers", [])]
    pod["status"] = slim_pod_status(pod["status"])
    return pod


def slim_pod_status(status: Obj) -> dict[str, Any]:
    """The pod status fields rayscale reads: phase, IP, the Ready and PodScheduled conditions, the
    containers' states (a terminated one's finishedAt: when a RayJob's sidecar submitter ended).

    A kwok or kubelet pod status was two thirds of an indexed pod's memory (6.6 of 10 KB); this
    keeps about a fifth of it.
    """
    out: dict[str, Any] = {k: status[k] for k in ("phase", "podIP", "reason", "message") if status.get(k)}
    out["conditions"] = [
        {k: c[k] for k in _POD_CONDITIONS[c["type"]] if k in c}
        for c in status.get("conditions") or []
        if c.get("type") in _POD_CONDITIONS
    ]
    out["containerStatuses"] = [
        {
            "name": cs.get("name"),
            "state": {
                kind: {k: v[k] for k in ("reason", "exitCode", "finishedAt") if k in v}
                for kind, v in (cs.get("state") or {}).items()
                if isinstance(v, Mapping)
            },
        }
        for cs in status.get("containerStatuses") or []
    ]
    return out
