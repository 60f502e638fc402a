"""A RayCluster's GCS address (and whether its annotation is followed) and auth-token Secret."""

from __future__ import annotations

from typing import Any

import pytest

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.naming import dialled_gcs_port, dialled_head_endpoint
from rayscale.ray.address import (
    GCS_ADDRESS_ANNOTATION,
    AddressError,
    GcsTarget,
    SecretKeyRef,
    auth_token_secret,
    gcs_target,
    parse_address,
)

HEAD = "demo-head-svc.team-a.svc.cluster.local:6379"


Typed = tuple[ClusterMeta, RayClusterSpec]


def gcs_address(cluster: Typed, *, allow_override: bool = True) -> str:
    return gcs_target(*cluster, allow_override=allow_override).address


def gcs_port(cluster: Typed) -> int:
    return dialled_head_endpoint(*cluster).port


def _cluster(
    name: str = "demo",
    namespace: str = "team-a",
    *,
    annotations: dict[str, str] | None = None,
    head: dict[str, Any] | None = None,
    auth: dict[str, Any] | None = None,
) -> Typed:
    """The metadata and typed spec of a RayCluster, as the autoscaler's reader gives them."""
    spec: dict[str, Any] = {"headGroupSpec": {"template": {}, **(head or {"rayStartParams": {}})}}
    if auth is not None:
        spec["authOptions"] = auth
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations is not None:
        meta["annotations"] = annotations
    body = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}
    return ClusterMeta.from_body(body), RayClusterSpec.model_validate(spec)


@pytest.fixture(autouse=True)
def _default_domain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLUSTER_DOMAIN", raising=False)


@pytest.mark.parametrize("allow", [False, True])
def test_default_address(allow: bool) -> None:
    assert gcs_target(*_cluster(), allow_override=allow) == GcsTarget(HEAD)
    assert dialled_head_endpoint(*_cluster()).address == HEAD


def test_port_from_ray_start_params() -> None:
    cluster = _cluster(head={"rayStartParams": {"port": "6380"}})
    assert gcs_port(cluster) == 6380
    assert gcs_address(cluster) == "demo-head-svc.team-a.svc.cluster.local:6380"


@pytest.mark.parametrize("params", [{}, {"port": ""}, None])
def test_default_port(params: dict[str, str] | None) -> None:
    head: dict[str, Any] = {} if params is None else {"rayStartParams": params}
    assert gcs_port(_cluster(head=head)) == 6379


def test_integer_port_is_accepted() -> None:
    assert dialled_gcs_port({"port": 7000}) == 7000


@pytest.mark.parametrize("port", ["abc", "0", "70000", "-1", "63 79"])
def test_bad_port(port: str) -> None:
    with pytest.raises(AddressError, match=r"rayStartParams\.port"):
        gcs_port(_cluster(head={"rayStartParams": {"port": port}}))


def test_head_service_name_override() -> None:
    cluster = _cluster(head={"rayStartParams": {}, "headService": {"metadata": {"name": "my-head"}}})
    assert dialled_head_endpoint(*cluster).service == "my-head"
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


@pytest.mark.parametrize("allow", [False, True])
def test_empty_annotation_is_no_override(allow: bool) -> None:
    target = gcs_target(*_cluster(annotations={GCS_ADDRESS_ANNOTATION: " "}), allow_override=allow)
    assert (target.address, target.override, target.ignored) == (HEAD, None, None)


# ---- the annotation without --allow-gcs-address-override: the token goes to the head Service only


@pytest.mark.parametrize("value", ["10.0.0.5:6379", "attacker.example.com:443", "[::1]:6379", "no-port"])
def test_without_the_flag_another_address_is_ignored_for_the_head_service(value: str) -> None:
    target = gcs_target(*_cluster(annotations={GCS_ADDRESS_ANNOTATION: value}), allow_override=False)
    assert target.address == HEAD  # what is dialed, and where the token goes
    assert target.override == value
    assert target.ignored == value
    assert not target.override_allowed


@pytest.mark.parametrize("value", [HEAD, HEAD.upper(), f" {HEAD} "])
def test_an_annotation_naming_the_head_service_is_no_override(value: str) -> None:
    for allow in (False, True):
        target = gcs_target(*_cluster(annotations={GCS_ADDRESS_ANNOTATION: value}), allow_override=allow)
        assert target.address.lower() == HEAD.lower()
        assert (target.override, target.ignored) == (None, None)


def test_without_the_flag_a_bad_head_port_is_still_an_error() -> None:
    cluster = _cluster(
        annotations={GCS_ADDRESS_ANNOTATION: "127.0.0.2:6379"}, head={"rayStartParams": {"port": "x"}}
    )
    with pytest.raises(AddressError, match=r"rayStartParams\.port"):
        gcs_target(*cluster, allow_override=False)


def test_with_the_flag_another_address_is_followed_and_reported() -> None:
    target = gcs_target(
        *_cluster(annotations={GCS_ADDRESS_ANNOTATION: "127.0.0.2:6379"}), allow_override=True
    )
    assert target == GcsTarget("127.0.0.2:6379", "127.0.0.2:6379", override_allowed=True)
    assert target.ignored is None


def test_missing_metadata() -> None:
    with pytest.raises(AddressError, match=r"metadata\.name"):
        gcs_address(_cluster(name="", namespace=""))


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
    assert auth_token_secret(*_cluster(auth=auth)) == expected


@pytest.mark.parametrize(
    ("name", "secret"),
    [("1demo", "rdemo"), ("-demo", "rdemo"), ("a" * 53, "a" * 50), ("x" + "b" * 52, "b" * 50)],
)
def test_auth_token_secret_is_the_one_the_controller_creates(name: str, secret: str) -> None:
    """KubeRay names the Secret by its CheckName of the cluster's name (a leading digit becomes 'r',
    longer names lose their front): the token is read from that Secret, not one of the raw name."""
    assert auth_token_secret(*_cluster(name, auth={"mode": "token"})) == SecretKeyRef("team-a", secret)
