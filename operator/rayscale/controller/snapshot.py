"""What a reconcile sees: one RayCluster, its pods and services, as plain data."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rayscale.controller import labels as L

Obj = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class ClusterMeta:
    namespace: str
    name: str
    uid: str
    generation: int = 0
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    deleting: bool = False
    finalizers: tuple[str, ...] = ()

    @classmethod
    def from_body(cls, body: Obj) -> ClusterMeta:
        meta = body.get("metadata") or {}
        return cls(
            namespace=meta.get("namespace", ""),
            name=meta.get("name", ""),
            uid=meta.get("uid", ""),
            generation=int(meta.get("generation") or 0),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            deleting=bool(meta.get("deletionTimestamp")),
            finalizers=tuple(meta.get("finalizers") or ()),
        )

    def owner_reference(self) -> dict[str, Any]:
        return {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


@dataclasses.dataclass(frozen=True)
class ClusterSnapshot:
    """A RayCluster body with every pod and service labelled with its name."""

    body: Obj
    pods: Sequence[Obj]
    services: Sequence[Obj]

    @property
    def meta(self) -> ClusterMeta:
        return ClusterMeta.from_body(self.body)

    @property
    def raw_spec(self) -> Obj:
        spec: Obj = self.body.get("spec") or {}
        return spec

    @property
    def status(self) -> Obj:
        status: Obj = self.body.get("status") or {}
        return status


# Pod accessors: pods are dicts as the API returns them (or the slim copies handlers keep).


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


def parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


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


def replica_index(pod: Obj) -> int | None:
    try:
        return int(pod_labels(pod)[L.REPLICA_INDEX])
    except (KeyError, ValueError):
        return None


def ray_container_name(pod: Obj) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    return str(containers[0].get("name", "")) if containers else ""


def is_unhealthy(pod: Obj) -> bool:
    """KubeRay's shouldDeletePod (§4.5): Failed/Succeeded, or a dead Ray container with Never."""
    if is_terminating(pod):
        return False
    if phase(pod) in ("Failed", "Succeeded"):
        return True
    if phase(pod) != "Running":
        return False
    name = ray_container_name(pod)
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == name and "terminated" in (status.get("state") or {}):
            return (pod.get("spec") or {}).get("restartPolicy") == "Never"
    return False
