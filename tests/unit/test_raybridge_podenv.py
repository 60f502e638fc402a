"""The Ray bridge's kubelet part: a container's environment with its Secret keys
(e2e/raybridge/podenv.py), what a submitter is given (submitters.command_and_env), and KubeRay's
check of the token settings (authchecks.token_env_problems), on pods as rayscale builds them."""

from __future__ import annotations

import base64
from types import SimpleNamespace
from typing import Any

import pytest
from e2e.raybridge import podenv, submitters
from e2e.raybridge.authchecks import token_env_problems
from kubernetes_asyncio.client.exceptions import ApiException
from tests.support.builders import cluster, group

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.controller import pods


def _ray_container(*, token: bool) -> dict[str, Any]:
    body = cluster(group("g"))
    if token:
        body["spec"].update(authOptions={"mode": "token"}, rayVersion="2.55.0")
    spec = RayClusterSpec.model_validate(body["spec"])
    pod = pods.worker_pod(ClusterMeta.from_body(body), spec, spec.workers[0], replica_index=0)
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


class FakeCore:
    """CoreV1Api with one Secret, ``<cluster>-...`` named as the controller names it."""

    secrets: dict[str, dict[str, str]] = {}

    def __init__(self, api: object) -> None:
        self.api = api

    async def read_namespaced_secret(self, name: str, namespace: str) -> SimpleNamespace:
        if name not in self.secrets:
            raise ApiException(status=404, reason="Not Found")
        return SimpleNamespace(data=self.secrets[name])


def _secret_name(container: dict[str, Any]) -> str:
    (token,) = [e for e in container["env"] if e["name"] == "RAY_AUTH_TOKEN"]
    return str(token["valueFrom"]["secretKeyRef"]["name"])


def test_a_token_cluster_container_has_kuberays_token_settings() -> None:
    container = _ray_container(token=True)
    assert token_env_problems(container, "rc") == []
    assert token_env_problems(_ray_container(token=False), "rc") == [
        "ray-worker: RAY_AUTH_MODE is None, not token",
        "ray-worker: RAY_AUTH_TOKEN is None, not from the cluster's Secret key auth_token",
    ]


def test_only_the_ray_auth_settings_of_a_ray_container_are_taken() -> None:
    container = _ray_container(token=True)
    assert podenv.needs_api(container, podenv.is_ray_auth)
    assert podenv.literal(container, podenv.is_ray_auth) == {"RAY_AUTH_MODE": "token"}
    plain = _ray_container(token=False)
    assert not podenv.needs_api(plain, podenv.is_ray_auth)
    assert podenv.resolve_sync("no-kubeconfig-needed", "ns", plain, keep=podenv.is_ray_auth) == {}


async def test_the_token_is_read_from_the_secret_the_pod_names(monkeypatch: pytest.MonkeyPatch) -> None:
    container = _ray_container(token=True)
    monkeypatch.setattr("e2e.raybridge.podenv.client.CoreV1Api", FakeCore)
    monkeypatch.setattr(FakeCore, "secrets", {})
    with pytest.raises(podenv.EnvError, match="has no key 'auth_token'"):  # not there yet: retried
        await podenv.resolve(object(), "ns", container, keep=podenv.is_ray_auth)  # type: ignore[arg-type]
    secret = {"auth_token": base64.b64encode(b"s3cret").decode()}
    monkeypatch.setattr(FakeCore, "secrets", {_secret_name(container): secret})
    env = await podenv.resolve(object(), "ns", container, keep=podenv.is_ray_auth)  # type: ignore[arg-type]
    assert env == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "s3cret"}


def test_an_optional_missing_key_is_left_out_and_other_sources_are_not_read() -> None:
    container = {
        "env": [
            {"name": "A", "value": "1"},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ]
    }
    assert not podenv.needs_api(container, podenv.keep_all)
    assert podenv.literal(container, podenv.keep_all) == {"A": "1"}


def test_a_submitter_gets_its_resolved_environment_with_the_real_dashboard() -> None:
    container = {
        "name": "ray-job-submitter",
        "command": ["ray", "job", "submit", "--address", "http://rc-head-svc.ns.svc:8265"],
        "env": [{"name": "RAY_DASHBOARD_ADDRESS", "value": "rc-head-svc.ns.svc:8265"}],
    }
    resolved = {"RAY_DASHBOARD_ADDRESS": "rc-head-svc.ns.svc:8265", "RAY_AUTH_TOKEN": "s3cret"}
    words, env = submitters.command_and_env(container, "http://127.0.0.2:9", sidecar=False, env=resolved)
    assert words[-1] == "http://127.0.0.2:9"
    assert env["RAY_AUTH_TOKEN"] == "s3cret"
    assert env["RAY_DASHBOARD_ADDRESS"] == "127.0.0.2:9"
