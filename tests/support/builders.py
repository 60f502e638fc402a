"""Builders of RayCluster bodies and pods (the unit tests' factories), and the examples/ RayClusters
the integration and e2e tests start from."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from rayscale.api.names import RAYCLUSTER, RAYRESOURCEREQUEST
from rayscale.common import labels as L

ROOT = Path(__file__).resolve().parents[2]  # the repository
EXAMPLES = ROOT / "examples"


BASIC = "raycluster-basic"  # the name of examples/raycluster-basic.yaml


def example(name: str) -> dict[str, Any]:
    """A RayCluster (or other object) of examples/, a fresh copy each time."""
    body: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return copy.deepcopy(body)


def cpu_and_gpu_cluster() -> dict[str, Any]:
    """examples/raycluster-basic.yaml autoscaled, with a GPU group beside its CPU group, both at 0
    replicas, its GCS unreachable (the integration tests have no Ray)."""
    body = example("raycluster-basic.yaml")
    # Nothing listens there: the GCS is unreachable at once, as on any cluster without Ray.
    body["metadata"]["annotations"] = {"rayscale.io/gcs-address": "127.0.0.1:1"}
    body["spec"]["enableInTreeAutoscaling"] = True
    cpu = body["spec"]["workerGroupSpecs"][0]
    cpu.update({"replicas": 0, "minReplicas": 0, "maxReplicas": 10})
    gpu = copy.deepcopy(cpu)
    gpu.update({"groupName": "gpu", "maxReplicas": 4})
    gpu["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 1
    body["spec"]["workerGroupSpecs"].append(gpu)
    return body


def resource_request(name: str, cluster: str, *bundles: tuple[Mapping[str, Any], int]) -> dict[str, Any]:
    """The RayResourceRequest `name` for RayCluster `cluster`: one bundle shape per (resources, count)."""
    return {
        **RAYRESOURCEREQUEST.type_meta(),
        "metadata": {"name": name},
        "spec": {
            "clusterName": cluster,
            "bundles": [{"resources": dict(resources), "count": count} for resources, count in bundles],
        },
    }


def gpu_request(gpus: int) -> dict[str, Any]:
    """The RayResourceRequest ``reserve-gpus``: `gpus` bundles of 1 GPU for `cpu_and_gpu_cluster`."""
    return resource_request("reserve-gpus", BASIC, ({"GPU": 1}, gpus))


def container(name: str = "ray", cpu: str = "1", memory: str = "2Gi", **limits: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": "rayproject/ray:2.55.0",
        "resources": {
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu, "memory": memory, **limits},
        },
    }


def container_env(container: Mapping[str, Any]) -> dict[str, Any]:
    """A built container's environment: each variable's value (or its valueFrom), by name."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


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
        **RAYCLUSTER.type_meta(),
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


# ---- for the autoscaler


def gpu_group(replicas: int = 0) -> dict[str, Any]:
    """A worker group of 1 GPU per pod, up to 4 replicas."""
    g = group("gpu", replicas=replicas, max_replicas=4)
    g["template"]["spec"]["containers"] = [container("ray-worker", **{"nvidia.com/gpu": "1"})]
    return g


def rc(*groups: dict[str, Any], rv: str = "42") -> dict[str, Any]:
    """An autoscaled RayCluster ``ns/rc`` with `groups`, as a watch gives it (a resourceVersion)."""
    body = cluster(*groups, autoscaling=True)
    body["metadata"]["resourceVersion"] = rv
    return body


def rrr(gpus: int, *, generation: int = 1, status: dict[str, Any] | None = None) -> dict[str, Any]:
    """The RayResourceRequest ``ns/reserve`` of `gpus` bundles of 1 GPU for ``rc``."""
    return {
        "metadata": {"name": "reserve", "namespace": "ns", "generation": generation},
        "spec": {"clusterName": "rc", "bundles": [{"resources": {"GPU": 1}, "count": gpus}]},
        "status": status or {},
    }
