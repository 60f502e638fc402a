"""Head and worker pod manifests, as KubeRay builds them."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from rayscale import __version__
from rayscale.api.disruption_annotations import DRAIN_ON_STOP_ANNOTATION, enabled
from rayscale.api.raycluster import HeadGroupSpec, RayClusterSpec, WorkerGroupSpec
from rayscale.cluster import naming
from rayscale.cluster.meta import ClusterMeta
from rayscale.common import labels as L
from rayscale.common.types import Manifest
from rayscale.controller import gcsft, prestop, probes, raystart, sidecar, switches, tokenauth, upgrade

ULIMIT = "ulimit -n 65536"
WAIT_GCS_SCRIPT = """SECONDS=0
while true; do
  if (( SECONDS <= 120 )); then
    if ray health-check --address {address} > /dev/null 2>&1; then
      echo "GCS is ready."
      break
    fi
    echo "$SECONDS seconds elapsed: Waiting for GCS to be ready."
  else
    if ray health-check --address {address}; then
      echo "GCS is ready. Any error messages above can be safely ignored."
      break
    fi
    echo "$SECONDS seconds elapsed: Still waiting for GCS to be ready. {faq}"
  fi
  sleep 5
done"""
FAQ = (
    "For troubleshooting, refer to the FAQ at"
    " https://docs.ray.io/en/master/cluster/kubernetes/troubleshooting.html."
)


def head_endpoint(meta: ClusterMeta, spec: RayClusterSpec) -> naming.HeadEndpoint:
    """The head Service and GCS port every pod of the cluster is given."""
    head = spec.head_group_spec
    return naming.head_endpoint(meta.name, meta.namespace, head.head_service, head.ray_start_params)


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _add_env(env: list[dict[str, Any]], item: dict[str, Any], *, if_absent: bool = True) -> None:
    if if_absent and any(e.get("name") == item["name"] for e in env):
        return
    env.append(item)


def _base_labels(meta: ClusterMeta, *, head: bool, group: str) -> dict[str, str]:
    return {
        L.IS_RAY_NODE: "yes",
        L.RAY_CLUSTER: meta.name,
        L.NODE_TYPE: L.HEAD if head else L.WORKER,
        L.GROUP: group,
        L.IDENTIFIER: naming.head_identifier(meta.name) if head else naming.worker_identifier(meta.name),
        L.APP_NAME: L.APP_NAME_VALUE,
        L.CREATED_BY: L.CREATED_BY_VALUE,
    }


def _merge_labels(base: dict[str, str], *overlays: Mapping[str, str] | None) -> dict[str, str]:
    out = dict(base)
    for overlay in overlays:
        for key, value in (overlay or {}).items():
            if key not in L.PROTECTED:
                out[key] = value
    return out


def _memory_of(container: Mapping[str, Any]) -> Any:
    res = container.get("resources") or {}
    return (res.get("limits") or {}).get("memory") or (res.get("requests") or {}).get("memory")


def _add_shared_memory(
    pod_spec: dict[str, Any], container: dict[str, Any], params: Mapping[str, str]
) -> None:
    mounts = container.setdefault("volumeMounts", [])
    if "plasma-directory" in params or any(m.get("mountPath") == "/dev/shm" for m in mounts):
        return
    empty_dir: dict[str, Any] = {"medium": "Memory"}
    memory = _memory_of(container)
    if memory is not None:
        empty_dir["sizeLimit"] = memory
    volumes = pod_spec.setdefault("volumes", [])
    if not any(v.get("name") == "shared-mem" for v in volumes):  # the template's own is mounted
        volumes.append({"name": "shared-mem", "emptyDir": empty_dir})
    mounts.append({"name": "shared-mem", "mountPath": "/dev/shm"})


def _add_empty_dir(pod_spec: dict[str, Any], container: dict[str, Any], name: str, path: str) -> None:
    """An emptyDir ``name`` mounted at ``path`` in ``container`` (KubeRay's addEmptyDir)."""
    mounts = container.setdefault("volumeMounts", [])
    if any(m.get("mountPath") == path for m in mounts):
        return
    volumes = pod_spec.setdefault("volumes", [])
    if not any(v.get("name") == name for v in volumes):
        volumes.append({"name": name, "emptyDir": {}})
    mounts.append({"name": name, "mountPath": path})


def _rewrite_command(container: dict[str, Any], start_cmd: str, annotations: Mapping[str, str]) -> None:
    if annotations.get(L.OVERWRITE_CMD_ANNOTATION, "").lower() == "true":
        return
    user = " ".join([*container.get("command", []), *container.get("args", [])]).strip()
    if "ray start" in user:
        return
    generated = f"{ULIMIT}; {start_cmd}"
    container["command"] = switches.container_command()
    container["args"] = [f"{user} && {generated}" if user else generated]


def _ray_env(
    container: dict[str, Any],
    *,
    head: bool,
    start_cmd: str,
    endpoint: naming.HeadEndpoint,
) -> None:
    env: list[dict[str, Any]] = container.setdefault("env", [])
    port = endpoint.port
    if not head:
        _add_env(env, {"name": "FQ_RAY_IP", "value": endpoint.fqdn}, if_absent=False)
        _add_env(env, {"name": "RAY_IP", "value": endpoint.service}, if_absent=False)
    _add_env(env, _field_env("RAY_CLUSTER_NAME", f"metadata.labels['{L.RAY_CLUSTER}']"), if_absent=False)
    _add_env(env, _field_env("RAY_CLUSTER_NAMESPACE", "metadata.namespace"), if_absent=False)
    _add_env(env, _field_env("RAY_CLOUD_INSTANCE_ID", "metadata.name"), if_absent=False)
    _add_env(env, _field_env("RAY_NODE_TYPE_NAME", f"metadata.labels['{L.GROUP}']"), if_absent=False)
    _add_env(env, {"name": "KUBERAY_GEN_RAY_START_CMD", "value": start_cmd}, if_absent=False)
    _add_env(env, {"name": "RAY_PORT", "value": str(port)})
    _add_env(env, {"name": "RAY_ADDRESS", "value": f"127.0.0.1:{port}" if head else endpoint.address})
    _add_env(env, {"name": "RAY_USAGE_STATS_KUBERAY_IN_USE", "value": "1"})
    if head:
        tags = f"kuberay_version=rayscale-{__version__};kuberay_crd=RayCluster"
        _add_env(env, {"name": "RAY_USAGE_STATS_EXTRA_TAGS", "value": tags}, if_absent=False)
    _add_env(env, {"name": "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", "value": "1"})


def _autoscaler_env(container: dict[str, Any], version: str | None, autoscaling: bool) -> None:
    env: list[dict[str, Any]] = container.setdefault("env", [])
    if version in ("v1", "v2"):
        value = "true" if version == "v2" else "false"
        _add_env(env, {"name": "RAY_enable_autoscaler_v2", "value": value})
    elif autoscaling:
        # Unlike KubeRay: rayscale's autoscaler speaks only Ray's v2 protocol, and Ray (before
        # its own KubeRay default) starts v1 when nothing says otherwise. Unlike an explicit v2,
        # restartPolicy is left alone.
        _add_env(env, {"name": "RAY_enable_autoscaler_v2", "value": "true"})


def _add_metrics_port(container: dict[str, Any]) -> None:
    ports = container.setdefault("ports", [])
    if not any(p.get("name") == "metrics" for p in ports):
        ports.append({"name": "metrics", "containerPort": naming.METRICS_PORT, "protocol": "TCP"})


def _wait_gcs_ready(container: Mapping[str, Any], address: str) -> dict[str, Any]:
    init: dict[str, Any] = {
        "name": "wait-gcs-ready",
        "image": container.get("image"),
        "command": switches.container_command(),
        "args": [WAIT_GCS_SCRIPT.format(address=address, faq=FAQ)],
        "env": copy.deepcopy(container.get("env", [])),
        "resources": {
            "limits": {"cpu": "200m", "memory": "256Mi"},
            "requests": {"cpu": "200m", "memory": "256Mi"},
        },
    }
    for key in ("imagePullPolicy", "volumeMounts", "securityContext"):
        if key in container:
            init[key] = copy.deepcopy(container[key])
    return init


_POD_LISTS = ("containers", "initContainers", "volumes")
_CONTAINER_FIELDS = ("env", "ports", "volumeMounts", "command", "args", "resources")


def _without_nulls(pod_spec: dict[str, Any]) -> dict[str, Any]:
    """`pod_spec` without the null lists a YAML ``env:`` with no items leaves (Kubernetes reads
    null as absent; the builders append to these lists)."""
    for key in _POD_LISTS:
        if key in pod_spec and pod_spec[key] is None:
            del pod_spec[key]
    for kind in ("containers", "initContainers"):
        for container in pod_spec.get(kind) or []:
            for key in _CONTAINER_FIELDS:
                if key in container and container[key] is None:
                    del container[key]
    return pod_spec


def _build(
    meta: ClusterMeta,
    spec: RayClusterSpec,
    group: HeadGroupSpec | WorkerGroupSpec,
    *,
    head: bool,
    group_name: str,
    extra_labels: Mapping[str, str],
    sidecar_autoscaler: bool = False,
) -> Manifest:
    template: dict[str, Any] = copy.deepcopy(group.template)
    tmeta = template.get("metadata") or {}
    pod_spec: dict[str, Any] = _without_nulls(template.get("spec") or {})
    containers: list[dict[str, Any]] = pod_spec.setdefault("containers", [])
    if not containers:
        raise ValueError("pod template has no containers")
    ray = containers[0]
    template_ray = copy.deepcopy(ray)  # what wait-gcs-ready copies: the template's Ray container
    endpoint = head_endpoint(meta, spec)
    params = raystart.start_params(
        user_params=group.ray_start_params,
        group_resources=group.resources,
        group_labels=group.labels,
        container=ray,
        is_head=head,
        head_address=endpoint.address,
        autoscaling=spec.autoscaling,
    )
    if head:
        gcsft.start_params(spec, meta.annotations, params)
    start_cmd = raystart.render(params, is_head=head)
    version = spec.autoscaler_options.version if spec.autoscaler_options else None
    annotations = dict(tmeta.get("annotations") or {})
    # In KubeRay's order: the init container (a copy of the template's Ray container), the
    # autoscaler's switch, GCS fault tolerance, token auth; then the variables every pod gets.
    if not head and switches.init_container_injection():
        pod_spec.setdefault("initContainers", []).append(_wait_gcs_ready(template_ray, endpoint.address))
    with_sidecar = head and sidecar_autoscaler and spec.autoscaling
    if with_sidecar:
        # Ray's own autoscaler beside Ray, as KubeRay runs it (rayscale --mode controller).
        pod_spec["serviceAccountName"] = naming.check_name(sidecar.service_account_name(meta, spec))
        containers.append(sidecar.container(meta, spec, ray.get("image")))
        if sidecar.v2(spec):
            _add_env(ray.setdefault("env", []), {"name": "RAY_enable_autoscaler_v2", "value": "true"})
    elif head:
        _autoscaler_env(ray, version, spec.autoscaling)
    gcsft.configure(ray, annotations, head=head, meta=meta, spec=spec, params=params)
    tokenauth.configure(pod_spec, meta.name, spec.auth_options)
    _ray_env(ray, head=head, start_cmd=start_cmd, endpoint=endpoint)
    _rewrite_command(ray, start_cmd, meta.annotations)
    _add_metrics_port(ray)
    _add_shared_memory(pod_spec, ray, params)
    if with_sidecar:
        for container in (ray, containers[-1]):
            _add_empty_dir(pod_spec, container, sidecar.LOG_VOLUME, sidecar.LOG_MOUNT)
    probes.inject(ray, head=head, ray_version=spec.ray_version, params=params)
    if not head and enabled(meta.annotations, DRAIN_ON_STOP_ANNOTATION):
        prestop.inject(pod_spec, ray)
    if version == "v2":
        pod_spec["restartPolicy"] = "Never"
    for init in pod_spec.get("initContainers", []):
        env = init.setdefault("env", [])
        _add_env(env, {"name": "FQ_RAY_IP", "value": endpoint.fqdn})
        _add_env(env, {"name": "RAY_IP", "value": endpoint.service})

    labels = _merge_labels(
        _base_labels(meta, head=head, group=group_name), tmeta.get("labels"), group.labels, extra_labels
    )
    if L.OVERWRITE_CMD_ANNOTATION in meta.annotations:
        annotations[L.OVERWRITE_CMD_ANNOTATION] = meta.annotations[L.OVERWRITE_CMD_ANNOTATION]
    if head:
        annotations[L.KUBERAY_VERSION_ANNOTATION] = upgrade.OPERATOR_VERSION
        annotations[L.HASH_ANNOTATION] = upgrade.spec_hash(spec)
        generate_name = naming.head_pod_generate_name(meta.name)
    else:
        generate_name = naming.worker_pod_generate_name(meta.name, group_name)
    # Like KubeRay, keep the template's metadata (finalizers included) but not its name.
    pod_meta = {k: v for k, v in tmeta.items() if k not in ("name", "generateName", "namespace")}
    if head and switches.deterministic_head_pod_name():
        pod_meta["name"] = generate_name.rstrip("-")  # <cluster>-head
    else:
        pod_meta["generateName"] = generate_name
    pod_meta.update(
        namespace=meta.namespace,
        labels=labels,
        annotations=annotations,
        ownerReferences=[meta.owner_reference()],
    )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


def head_pod(meta: ClusterMeta, spec: RayClusterSpec, *, sidecar_autoscaler: bool = False) -> Manifest:
    """The head pod; with ``sidecar_autoscaler`` (``--mode controller``) an autoscaling cluster's
    head runs Ray's own autoscaler beside Ray, as under KubeRay."""
    return _build(
        meta,
        spec,
        spec.head_group_spec,
        head=True,
        group_name=L.HEAD_GROUP,
        extra_labels={},
        sidecar_autoscaler=sidecar_autoscaler,
    )


def worker_pods(
    meta: ClusterMeta, spec: RayClusterSpec, group: WorkerGroupSpec, replica_indexes: Sequence[int]
) -> list[Manifest]:
    """`worker_pod` for each replica index of a single-host group, built once: the manifests
    differ only in the replica-index label, so they share everything but their metadata and
    labels (nothing changes a manifest once planned). Building one costs about 0.3 ms, which a
    1,000-pod scale-up would otherwise pay a thousand times in one reconcile."""
    if not replica_indexes:
        return []
    first = worker_pod(meta, spec, group, replica_index=replica_indexes[0])
    manifests = [first]
    for index in replica_indexes[1:]:
        labels = {**first["metadata"]["labels"], L.REPLICA_INDEX: str(index)}
        manifests.append({**first, "metadata": {**first["metadata"], "labels": labels}})
    return manifests


def worker_pod(
    meta: ClusterMeta,
    spec: RayClusterSpec,
    group: WorkerGroupSpec,
    *,
    replica_index: int,
    replica_name: str | None = None,
    host_index: int | None = None,
) -> Manifest:
    extra = {L.REPLICA_INDEX: str(replica_index)}
    if replica_name is not None:
        extra[L.REPLICA_NAME] = replica_name
    if host_index is not None:
        extra[L.HOST_INDEX] = str(host_index)
    return _build(meta, spec, group, head=False, group_name=group.group_name, extra_labels=extra)
