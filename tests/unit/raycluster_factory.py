"""Builders of RayCluster bodies and pods for controller unit tests."""

from __future__ import annotations

import copy
from typing import Any

from rayscale.common import labels as L


def container(name: str = "ray", cpu: str = "1", memory: str = "2Gi", **limits: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": "rayproject/ray:2.55.0",
        "resources": {
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu, "memory": memory, **limits},
        },
    }


def group(
    name: str = "small",
    *,
    replicas: int | None = 1,
    min_replicas: int = 0,
    max_replicas: int = 10,
    hosts: int = 1,
    **extra: Any,
) -> dict[str, Any]:
    g: dict[str, Any] = {
        "groupName": name,
        "minReplicas": min_replicas,
        "maxReplicas": max_replicas,
        "numOfHosts": hosts,
        "rayStartParams": {},
        "template": {"spec": {"containers": [container("ray-worker")]}},
        **extra,
    }
    if replicas is not None:
        g["replicas"] = replicas
    return g


def cluster(
    *groups: dict[str, Any], name: str = "rc", autoscaling: bool = False, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "ns", "uid": "uid-1", "generation": 1},
        "spec": {
            "enableInTreeAutoscaling": autoscaling,
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-head", cpu="2", memory="4Gi")]}},
            },
            "workerGroupSpecs": list(groups),
            **spec,
        },
    }


def pod(
    name: str,
    group_name: str = "small",
    *,
    cluster_name: str = "rc",
    phase: str = "Running",
    ready: bool = True,
    created: str = "2026-01-01T00:00:00Z",
    deleting: str | None = None,
    index: int | None = None,
    replica: str | None = None,
    host: int | None = None,
    restart_policy: str | None = None,
    terminated: bool = False,
) -> dict[str, Any]:
    head = group_name == L.HEAD_GROUP
    labels = {
        L.RAY_CLUSTER: cluster_name,
        L.GROUP: group_name,
        L.NODE_TYPE: L.HEAD if head else L.WORKER,
    }
    if index is not None:
        labels[L.REPLICA_INDEX] = str(index)
    if replica is not None:
        labels[L.REPLICA_NAME] = replica
    if host is not None:
        labels[L.HOST_INDEX] = str(host)
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "labels": labels, "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = deleting
    status: dict[str, Any] = {
        "phase": phase,
        "podIP": "10.0.0.1",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    if terminated:
        status["containerStatuses"] = [{"name": "ray", "state": {"terminated": {"exitCode": 1}}}]
    spec: dict[str, Any] = {"containers": [{"name": "ray"}]}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return {"metadata": meta, "spec": spec, "status": status}


def with_status(body: dict[str, Any], **status: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    out["status"] = status
    return out
