"""Head and worker pods, head and headless Services."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import cluster, container_env, group

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster import ft
from rayscale.cluster.meta import ClusterMeta
from rayscale.common import labels as L
from rayscale.controller import ingress, pods, services, tokenauth

FQDN = "rc-head-svc.ns.svc.cluster.local"


def _setup(body: dict[str, Any]) -> tuple[ClusterMeta, RayClusterSpec]:
    return ClusterMeta.from_body(body), RayClusterSpec.model_validate(body["spec"])


def test_worker_pods_are_worker_pod_for_each_index() -> None:
    """Built once per group, yet each one equal to its own `worker_pod`, and a change to one's
    metadata is not a change to another's."""
    g = group("cpu", template={"metadata": {"labels": {"team": "a"}},
                               "spec": {"containers": [{"name": "w", "image": "ray"}]}})  # fmt: skip
    meta, spec = _setup(cluster(g))
    indexes = [0, 2, 5]
    built = pods.worker_pods(meta, spec, spec.workers[0], indexes)
    assert built == [pods.worker_pod(meta, spec, spec.workers[0], replica_index=i) for i in indexes]
    assert [m["metadata"]["labels"][L.REPLICA_INDEX] for m in built] == ["0", "2", "5"]
    built[1]["metadata"]["labels"]["x"] = "y"
    assert "x" not in built[0]["metadata"]["labels"]
    assert "x" not in built[2]["metadata"]["labels"]
    assert pods.worker_pods(meta, spec, spec.workers[0], []) == []


def test_worker_pod_names_labels_owner() -> None:
    g = group("cpu", template={"metadata": {"name": "x", "labels": {L.GROUP: "evil", "team": "a"},
                                            "finalizers": ["hold"]},
                               "spec": {"containers": [{"name": "w", "image": "ray"}]}})  # fmt: skip
    meta, spec = _setup(cluster(g))
    pod = pods.worker_pod(meta, spec, spec.workers[0], replica_index=3)
    md = pod["metadata"]
    assert md["generateName"] == "rc-cpu-worker-"
    assert md["finalizers"] == ["hold"]
    assert "name" not in md
    assert md["namespace"] == "ns"
    assert md["labels"] == {
        L.IS_RAY_NODE: "yes",
        L.RAY_CLUSTER: "rc",
        L.NODE_TYPE: "worker",
        L.GROUP: "cpu",
        L.IDENTIFIER: "rc-worker",
        L.APP_NAME: "kuberay",
        L.CREATED_BY: "kuberay-operator",
        L.REPLICA_INDEX: "3",
        "team": "a",
    }
    assert md["ownerReferences"] == [
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": "uid-1",
         "controller": True, "blockOwnerDeletion": True}
    ]  # fmt: skip


def test_multi_host_labels() -> None:
    meta, spec = _setup(cluster(group("tpu", hosts=4)))
    pod = pods.worker_pod(
        meta, spec, spec.workers[0], replica_index=0, replica_name="tpu-abcde", host_index=2
    )
    labels = pod["metadata"]["labels"]
    assert (labels[L.REPLICA_NAME], labels[L.HOST_INDEX], labels[L.REPLICA_INDEX]) == ("tpu-abcde", "2", "0")


def test_long_names_are_truncated() -> None:
    name = "a" * 53
    meta, spec = _setup(cluster(group("g" * 20), name=name))
    assert pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["metadata"]["generateName"] == (
        f"{(name + '-' + 'g' * 20)[:50]}-worker-"
    )
    assert pods.head_pod(meta, spec)["metadata"]["generateName"] == f"{name[:50]}-head-"


def test_worker_env_in_kuberay_order() -> None:
    meta, spec = _setup(cluster(group()))
    ray = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]["containers"][0]
    names = [e["name"] for e in ray["env"]]
    assert names == [
        "FQ_RAY_IP", "RAY_IP", "RAY_CLUSTER_NAME", "RAY_CLUSTER_NAMESPACE", "RAY_CLOUD_INSTANCE_ID",
        "RAY_NODE_TYPE_NAME", "KUBERAY_GEN_RAY_START_CMD", "RAY_PORT", "RAY_ADDRESS",
        "RAY_USAGE_STATS_KUBERAY_IN_USE", "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE",
    ]  # fmt: skip
    env = container_env(ray)
    assert env["FQ_RAY_IP"] == FQDN
    assert env["RAY_IP"] == "rc-head-svc"
    assert env["RAY_ADDRESS"] == f"{FQDN}:6379"
    assert env["RAY_CLOUD_INSTANCE_ID"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["RAY_NODE_TYPE_NAME"] == {"fieldRef": {"fieldPath": "metadata.labels['ray.io/group']"}}
    assert env["KUBERAY_GEN_RAY_START_CMD"] == (
        f"ray start --address={FQDN}:6379 --block --dashboard-agent-listen-port=52365 "
        "--memory=2147483648 --metrics-export-port=8080 --num-cpus=1"
    )
    assert ray["command"] == ["/bin/bash", "-c", "--"]
    assert ray["args"] == ["ulimit -n 65536; " + env["KUBERAY_GEN_RAY_START_CMD"]]


def test_user_command_is_prefixed_and_ray_start_left_alone() -> None:
    g = group(template={"spec": {"containers": [{"name": "w", "command": ["echo"], "args": ["hi"]}]}})
    meta, spec = _setup(cluster(g))
    ray = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]["containers"][0]
    assert ray["args"][0].startswith("echo hi && ulimit -n")
    g = group(template={"spec": {"containers": [{"name": "w", "args": ["ray start --block"]}]}})
    meta, spec = _setup(cluster(g))
    ray = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]["containers"][0]
    assert ray["args"] == ["ray start --block"]
    assert "command" not in ray


def test_shm_metrics_port_init_container() -> None:
    meta, spec = _setup(cluster(group()))
    pod = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]
    assert pod["volumes"] == [{"name": "shared-mem", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}]
    ray = pod["containers"][0]
    assert {"name": "shared-mem", "mountPath": "/dev/shm"} in ray["volumeMounts"]
    assert {"name": "metrics", "containerPort": 8080, "protocol": "TCP"} in ray["ports"]
    (init,) = pod["initContainers"]
    assert init["name"] == "wait-gcs-ready"
    assert f"ray health-check --address {FQDN}:6379" in init["args"][0]
    assert init["resources"]["limits"] == {"cpu": "200m", "memory": "256Mi"}
    assert container_env(init)["FQ_RAY_IP"] == FQDN


def test_a_shared_mem_volume_of_the_template_is_mounted_not_added_twice() -> None:
    mine = {"name": "shared-mem", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}
    g = group(template={"spec": {"containers": [{"name": "w", "image": "ray"}], "volumes": [mine]}})
    meta, spec = _setup(cluster(g))
    pod = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]
    assert pod["volumes"] == [mine]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "shared-mem", "mountPath": "/dev/shm"}]


def test_a_custom_head_service_name_is_what_workers_dial() -> None:
    body = cluster(group())
    body["spec"]["headGroupSpec"]["headService"] = {"metadata": {"name": "my-head"}}
    meta, spec = _setup(body)
    assert services.head_service(meta, spec)["metadata"]["name"] == "my-head"
    fqdn = "my-head.ns.svc.cluster.local"
    assert pods.head_endpoint(meta, spec).address == f"{fqdn}:6379"
    pod = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]
    ray = pod["containers"][0]
    assert f"--address={fqdn}:6379" in ray["args"][0]
    assert container_env(ray)["FQ_RAY_IP"] == fqdn
    assert container_env(ray)["RAY_ADDRESS"] == f"{fqdn}:6379"
    (init,) = pod["initContainers"]
    assert f"ray health-check --address {fqdn}:6379" in init["args"][0]
    assert container_env(init)["FQ_RAY_IP"] == fqdn


def test_head_pod_autoscaling_has_no_monitor_and_no_sidecar() -> None:
    meta, spec = _setup(cluster(group(), autoscaling=True, autoscalerOptions={"version": "v2"}))
    pod = pods.head_pod(meta, spec)
    containers = pod["spec"]["containers"]
    assert [c["name"] for c in containers] == ["ray-head"]
    env = container_env(containers[0])
    assert "--no-monitor" in env["KUBERAY_GEN_RAY_START_CMD"]
    assert env["KUBERAY_GEN_RAY_START_CMD"].startswith("ray start --head ")
    assert env["RAY_ADDRESS"] == "127.0.0.1:6379"
    assert env["RAY_enable_autoscaler_v2"] == "true"
    assert "FQ_RAY_IP" not in env
    assert pod["spec"]["restartPolicy"] == "Never"
    assert "initContainers" not in pod["spec"]
    assert pod["metadata"]["labels"][L.GROUP] == "headgroup"
    assert pod["metadata"]["annotations"][ft.FT_ENABLED_ANNOTATION] == "false"


def test_probes_injected_unless_set() -> None:
    meta, spec = _setup(cluster(group(), rayVersion="2.55.0"))
    ray = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]["containers"][0]
    assert ray["readinessProbe"]["httpGet"] == {"path": "/api/healthz", "port": 52365}
    assert ray["livenessProbe"]["failureThreshold"] == 120
    meta, spec = _setup(cluster(group()))
    head = pods.head_pod(meta, spec)["spec"]["containers"][0]
    assert "gcs_healthz" in head["livenessProbe"]["exec"]["command"][2]
    assert head["livenessProbe"]["timeoutSeconds"] == 5


def test_head_service_headless_with_default_ports() -> None:
    meta, spec = _setup(cluster(group()))
    svc = services.head_service(meta, spec)
    assert svc["metadata"]["name"] == "rc-head-svc"
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert [(p["name"], p["port"]) for p in svc["spec"]["ports"]] == [
        ("client", 10001), ("dashboard", 8265), ("gcs-server", 6379), ("metrics", 8080), ("serve", 8000)
    ]  # fmt: skip
    assert svc["spec"]["selector"] == svc["metadata"]["labels"]
    assert svc["spec"]["selector"][L.IDENTIFIER] == "rc-head"


def test_head_service_declared_ports_and_type() -> None:
    body = cluster(group())
    head = body["spec"]["headGroupSpec"]
    head["serviceType"] = "NodePort"
    head["template"]["spec"]["containers"][0]["ports"] = [
        {"containerPort": 6379, "name": "gcs"},
        {"containerPort": 1},
    ]
    meta, spec = _setup(body)
    svc = services.head_service(meta, spec)
    assert svc["spec"]["type"] == "NodePort"
    assert "clusterIP" not in svc["spec"]
    assert [p["name"] for p in svc["spec"]["ports"]] == ["1-port", "gcs", "metrics"]


def test_headless_worker_service_only_for_multi_host() -> None:
    _, spec = _setup(cluster(group()))
    assert not services.needs_headless_service(spec)
    meta, spec = _setup(cluster(group(hosts=2)))
    assert services.needs_headless_service(spec)
    svc = services.headless_worker_service(meta)
    assert svc["metadata"]["name"] == "rc-headless"
    assert svc["spec"] == {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {L.RAY_CLUSTER: "rc", L.NODE_TYPE: "worker"},
    }


def _head_env_and_policy(**spec: Any) -> tuple[dict[str, Any], str | None]:
    meta, parsed = _setup(cluster(group(), **spec))
    pod = pods.head_pod(meta, parsed)
    return container_env(pod["spec"]["containers"][0]), pod["spec"].get("restartPolicy")


def test_autoscaling_without_a_version_runs_ray_autoscaler_v2() -> None:
    """rayscale speaks only Ray's v2 protocol: unlike KubeRay, an unset version means v2 on the
    head, without the restartPolicy an explicit v2 brings."""
    env, policy = _head_env_and_policy(autoscaling=True)
    assert env["RAY_enable_autoscaler_v2"] == "true"
    assert policy is None
    # not without autoscaling, and never over the user's own value or an explicit v1
    assert "RAY_enable_autoscaler_v2" not in _head_env_and_policy()[0]
    assert (
        _head_env_and_policy(autoscaling=True, autoscalerOptions={"version": "v1"})[0][
            "RAY_enable_autoscaler_v2"
        ]
        == "false"
    )
    user = {"name": "ray-head", "env": [{"name": "RAY_enable_autoscaler_v2", "value": "0"}]}
    body = cluster(group(), autoscaling=True)
    body["spec"]["headGroupSpec"]["template"]["spec"]["containers"] = [user]
    meta, parsed = _setup(body)
    assert (
        container_env(pods.head_pod(meta, parsed)["spec"]["containers"][0])["RAY_enable_autoscaler_v2"] == "0"
    )
    # workers never get it
    meta, parsed = _setup(cluster(group(), autoscaling=True))
    worker = pods.worker_pod(meta, parsed, parsed.workers[0], replica_index=0)["spec"]["containers"][0]
    assert "RAY_enable_autoscaler_v2" not in container_env(worker)


def _token_cluster(**auth: Any) -> tuple[ClusterMeta, RayClusterSpec]:
    body = cluster(group())
    body["spec"]["rayVersion"] = "2.55.0"
    body["spec"]["authOptions"] = {"mode": "token", **auth}
    return _setup(body)


def test_token_auth_env_from_the_clusters_secret_in_ray_and_wait_gcs_ready() -> None:
    meta, spec = _token_cluster()
    ref = {"secretKeyRef": {"name": "rc", "key": "auth_token"}}
    worker = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]
    for container in (worker["containers"][0], worker["initContainers"][0]):
        env = container_env(container)
        assert (env["RAY_AUTH_MODE"], env["RAY_AUTH_TOKEN"]) == ("token", ref)
    head = pods.head_pod(meta, spec)["spec"]["containers"][0]
    assert container_env(head)["RAY_AUTH_TOKEN"] == ref
    assert tokenauth.needs_secret(spec.auth_options)
    secret = tokenauth.secret_manifest(meta, spec.auth_options)
    assert secret["metadata"]["name"] == "rc"
    assert secret["metadata"]["labels"] == {L.RAY_CLUSTER: "rc"}
    assert secret["metadata"]["ownerReferences"][0]["name"] == "rc"


def test_token_auth_with_a_named_secret_or_kubernetes_tokens_needs_no_secret() -> None:
    meta, spec = _token_cluster(secretName="mine")
    ray = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]["containers"][0]
    assert container_env(ray)["RAY_AUTH_TOKEN"] == {"secretKeyRef": {"name": "mine", "key": "auth_token"}}
    assert not tokenauth.needs_secret(spec.auth_options)

    meta, spec = _token_cluster(enableK8sTokenAuth=True)
    pod = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]
    assert not tokenauth.needs_secret(spec.auth_options)
    assert {
        "name": "ray-token",
        "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
    } in pod["volumes"]
    mount = {"name": "ray-token", "mountPath": "/var/run/secrets/ray.io/serviceaccount", "readOnly": True}
    for container in (pod["containers"][0], pod["initContainers"][0]):
        env = container_env(container)
        assert (env["RAY_AUTH_MODE"], env["RAY_ENABLE_K8S_TOKEN_AUTH"]) == ("token", "true")
        assert "RAY_AUTH_TOKEN" not in env
        assert mount in container["volumeMounts"]


def test_token_auth_keeps_the_templates_own_variables() -> None:
    mine = {"name": "RAY_AUTH_TOKEN", "value": "from-template"}
    g = group(template={"spec": {"containers": [{"name": "w", "image": "ray", "env": [mine]}]}})
    body = cluster(g)
    body["spec"]["rayVersion"] = "2.55.0"
    body["spec"]["authOptions"] = {"mode": "token"}
    meta, spec = _setup(body)
    ray = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]["containers"][0]
    assert [e for e in ray["env"] if e["name"] == "RAY_AUTH_TOKEN"] == [mine]


def test_no_token_auth_no_variables() -> None:
    meta, spec = _setup(cluster(group()))
    ray = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]["containers"][0]
    assert "RAY_AUTH_MODE" not in container_env(ray)
    assert not tokenauth.needs_secret(spec.auth_options)


def _ft_cluster(annotations: dict[str, str] | None = None, **spec: Any) -> tuple[ClusterMeta, RayClusterSpec]:
    body = cluster(group())
    body["metadata"]["annotations"] = annotations or {}
    body["spec"].update(spec)
    return _setup(body)


def test_gcs_fault_tolerance_with_redis_options() -> None:
    password = {"valueFrom": {"secretKeyRef": {"name": "redis", "key": "password"}}}
    options = {"redisAddress": "redis:6379", "redisPassword": password, "redisUsername": {"value": "ray"}}
    meta, spec = _ft_cluster(gcsFaultToleranceOptions=options)
    head = pods.head_pod(meta, spec)
    assert head["metadata"]["annotations"]["ray.io/ft-enabled"] == "true"
    assert head["metadata"]["annotations"]["ray.io/external-storage-namespace"] == "uid-1"
    ray = head["spec"]["containers"][0]
    env = container_env(ray)
    assert env["RAY_REDIS_ADDRESS"] == "redis:6379"
    assert env["RAY_external_storage_namespace"] == "uid-1"
    assert env["REDIS_USERNAME"] == "ray"
    assert env["REDIS_PASSWORD"] == password["valueFrom"]
    command = ray["args"][0]
    assert "--redis-password=$REDIS_PASSWORD" in command
    assert "--redis-username=$REDIS_USERNAME" in command
    worker = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]["containers"][0]
    assert container_env(worker)["RAY_gcs_rpc_server_reconnect_timeout_s"] == "600"
    assert "RAY_REDIS_ADDRESS" not in container_env(worker)


def test_gcs_fault_tolerance_by_annotation_and_storage_namespace() -> None:
    annotations = {"ray.io/ft-enabled": "True", "ray.io/external-storage-namespace": "mine"}
    meta, spec = _ft_cluster(annotations)
    spec.head_group_spec.ray_start_params = {"redis-password": "secret"}
    head = pods.head_pod(meta, spec)
    assert head["metadata"]["annotations"]["ray.io/external-storage-namespace"] == "mine"
    env = container_env(head["spec"]["containers"][0])
    assert (env["RAY_external_storage_namespace"], env["REDIS_PASSWORD"]) == ("mine", "secret")
    assert "RAY_REDIS_ADDRESS" not in env


def test_no_gcs_fault_tolerance() -> None:
    meta, spec = _ft_cluster()
    head = pods.head_pod(meta, spec)
    assert head["metadata"]["annotations"]["ray.io/ft-enabled"] == "false"
    assert "ray.io/external-storage-namespace" not in head["metadata"]["annotations"]
    worker = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)["spec"]["containers"][0]
    assert "RAY_gcs_rpc_server_reconnect_timeout_s" not in container_env(worker)


def test_serve_service_for_the_annotation_with_the_heads_serving_ports() -> None:
    body = cluster(group())
    body["metadata"]["annotations"] = {"ray.io/enable-serve-service": "true"}
    head = body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["ports"] = [{"containerPort": 8000, "name": "serve"}, {"containerPort": 9000, "name": "serve-grpc"},
                     {"containerPort": 8265, "name": "dashboard"}]  # fmt: skip
    meta, spec = _setup(body)
    assert services.wants_serve_service(meta)
    svc = services.serve_service(meta, spec)
    assert isinstance(svc, dict)
    assert svc["metadata"]["name"] == "rc-serve-svc"
    assert svc["metadata"]["labels"][L.SERVE] == "rc-serve"
    assert svc["spec"] == {
        "selector": {L.RAY_CLUSTER: "rc"},
        "ports": [{"name": "serve", "port": 8000}, {"name": "serve-grpc", "port": 9000}],
        "type": "ClusterIP",
    }
    head["ports"] = [{"containerPort": 8265, "name": "dashboard"}]
    meta, spec = _setup(body)
    assert "Please specify a port named 'serve'" in str(services.serve_service(meta, spec))
    assert not services.wants_serve_service(_setup(cluster(group()))[0])


def test_head_ingress_to_the_dashboard_with_the_clusters_annotations() -> None:
    body = cluster(group())
    body["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "nginx", "nginx.ingress/rewrite": "/$1"}
    body["spec"]["headGroupSpec"]["enableIngress"] = True
    body["spec"]["headGroupSpec"]["headService"] = {"metadata": {"name": "my-head"}}
    meta, spec = _setup(body)
    assert ingress.wanted(spec)
    ing = ingress.manifest(meta, spec)
    assert ing["metadata"]["name"] == "rc-head-ingress"
    assert ing["metadata"]["annotations"] == {"nginx.ingress/rewrite": "/$1"}
    assert ing["spec"]["ingressClassName"] == "nginx"
    (path,) = ing["spec"]["rules"][0]["http"]["paths"]
    assert path == {
        "path": "/rc/(.*)",
        "pathType": "Exact",
        "backend": {"service": {"name": "my-head", "port": {"number": 8265}}},
    }
    assert not ingress.wanted(_setup(cluster(group()))[1])


def test_kuberays_environment_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    meta, spec = _setup(cluster(group()))
    monkeypatch.setenv("ENABLE_INIT_CONTAINER_INJECTION", "False")
    monkeypatch.setenv("ENABLE_DETERMINISTIC_HEAD_POD_NAME", "true")
    monkeypatch.setenv("ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE", "TRUE")
    monkeypatch.setenv("ENABLE_LOGIN_SHELL", "true")
    worker = pods.worker_pod(meta, spec, spec.workers[0], replica_index=0)
    assert "initContainers" not in worker["spec"]
    assert worker["spec"]["containers"][0]["command"] == ["/bin/bash", "-cl", "--"]
    head = pods.head_pod(meta, spec)
    assert head["metadata"]["name"] == "rc-head"
    assert "generateName" not in head["metadata"]
    svc = services.head_service(meta, spec)["spec"]
    assert "clusterIP" not in svc
    assert svc["type"] == "ClusterIP"
    monkeypatch.delenv("ENABLE_DETERMINISTIC_HEAD_POD_NAME")
    monkeypatch.setenv("ENABLE_LOGIN_SHELL", "false")
    head = pods.head_pod(meta, spec)
    assert head["metadata"]["generateName"] == "rc-head-"
    assert head["spec"]["containers"][0]["command"] == ["/bin/bash", "-c", "--"]
