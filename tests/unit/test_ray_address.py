"""A RayCluster's GCS address and auth-token Secret."""

from __future__ import annotations

from typing import Any

import pytest

from rayscale.ray.address import (
    GCS_ADDRESS_ANNOTATION,
    AddressError,
    SecretKeyRef,
    auth_token_secret,
    gcs_address,
    gcs_port,
    head_service_name,
    parse_address,
)


def _cluster(
    name: str = "demo",
    namespace: str = "team-a",
    *,
    annotations: dict[str, str] | None = None,
    head: dict[str, Any] | None = None,
    auth: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"headGroupSpec": head or {"rayStartParams": {}}}
    if auth is not None:
        spec["authOptions"] = auth
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}


@pytest.fixture(autouse=True)
def _default_domain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLUSTER_DOMAIN", raising=False)


def test_default_address() -> None:
    assert gcs_address(_cluster()) == "demo-head-svc.team-a.svc.cluster.local:6379"


def test_port_from_ray_start_params() -> None:
    cluster = _cluster(head={"rayStartParams": {"port": "6380"}})
    assert gcs_port(cluster) == 6380
    assert gcs_address(cluster) == "demo-head-svc.team-a.svc.cluster.local:6380"


@pytest.mark.parametrize("params", [{}, {"port": ""}, None])
def test_default_port(params: dict[str, str] | None) -> None:
    head: dict[str, Any] = {} if params is None else {"rayStartParams": params}
    assert gcs_port(_cluster(head=head)) == 6379


def test_integer_port_is_accepted() -> None:
    assert gcs_port(_cluster(head={"rayStartParams": {"port": 7000}})) == 7000


@pytest.mark.parametrize("port", ["abc", "0", "70000", "-1", "63 79"])
def test_bad_port(port: str) -> None:
    with pytest.raises(AddressError, match=r"rayStartParams\.port"):
        gcs_port(_cluster(head={"rayStartParams": {"port": port}}))


def test_head_service_name_override() -> None:
    cluster = _cluster(head={"rayStartParams": {}, "headService": {"metadata": {"name": "my-head"}}})
    assert head_service_name(cluster) == "my-head"
    assert gcs_address(cluster) == "my-head.team-a.svc.cluster.local:6379"


def test_cluster_domain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTER_DOMAIN", "corp.example")
    assert gcs_address(_cluster()) == "demo-head-svc.team-a.svc.corp.example:6379"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.2:6379", "127.0.0.2:6379"),
        (" localhost:16379 ", "localhost:16379"),
        ("ray-head.example.com:443", "ray-head.example.com:443"),
        ("[::1]:6379", "[::1]:6379"),
    ],
)
def test_annotation_overrides(value: str, expected: str) -> None:
    cluster = _cluster(annotations={GCS_ADDRESS_ANNOTATION: value}, head={"rayStartParams": {"port": "bad"}})
    assert gcs_address(cluster) == expected


@pytest.mark.parametrize("value", ["no-port", "host:", ":6379", "host:0", "host:99999", "ho st:1", "a:b"])
def test_bad_annotation(value: str) -> None:
    with pytest.raises(AddressError, match="host:port"):
        gcs_address(_cluster(annotations={GCS_ADDRESS_ANNOTATION: value}))


def test_empty_annotation_is_ignored() -> None:
    assert gcs_address(_cluster(annotations={GCS_ADDRESS_ANNOTATION: ""})).startswith("demo-head-svc.")


def test_missing_metadata() -> None:
    with pytest.raises(AddressError, match=r"metadata\.name"):
        gcs_address({"spec": {}})


def test_parse_address() -> None:
    assert parse_address("[fd00::2]:6379") == ("[fd00::2]", 6379)


@pytest.mark.parametrize(
    ("auth", "expected"),
    [
        (None, None),
        ({}, None),
        ({"mode": "disabled"}, None),
        ({"mode": "token"}, SecretKeyRef("team-a", "demo", "auth_token")),
        ({"mode": "token", "secretName": "ray-token"}, SecretKeyRef("team-a", "ray-token", "auth_token")),
    ],
)
def test_auth_token_secret(auth: dict[str, Any] | None, expected: SecretKeyRef | None) -> None:
    assert auth_token_secret(_cluster(auth=auth)) == expected
