"""Where a RayCluster's GCS listens, and where its auth token lives.

Input is the RayCluster as a plain mapping (the object kopf or the API hands over, camelCase
keys). The GCS is on the head's ``gcs-server`` port behind the head Service:
``<head-svc>.<namespace>.svc.<cluster domain>:<port>``, where the Service is
``<cluster>-head-svc`` unless ``headGroupSpec.headService.metadata.name`` names it, the port is
the head's ``rayStartParams.port`` (default 6379) and the domain is ``$CLUSTER_DOMAIN`` (default
``cluster.local``).

The annotation ``rayscale.io/gcs-address`` (``host:port``) names another address, for an operator
running outside the cluster and for tests. rayscale sends the cluster's Ray auth token to whatever
it dials, and anyone who may edit a RayCluster may set the annotation, so it is followed only when
the operator was started with overrides allowed (``rayscale run --allow-gcs-address-override``).
Otherwise rayscale dials the head Service anyway and says the annotation was ignored
(``gcs_target``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_GCS_PORT",
    "GCS_ADDRESS_ANNOTATION",
    "OVERRIDE_FLAG",
    "TOKEN_SECRET_KEY",
    "AddressError",
    "GcsTarget",
    "SecretKeyRef",
    "auth_token_secret",
    "gcs_port",
    "gcs_target",
    "head_gcs_address",
    "head_service_name",
    "parse_address",
]

GCS_ADDRESS_ANNOTATION = "rayscale.io/gcs-address"
OVERRIDE_FLAG = "--allow-gcs-address-override"  # the `rayscale run` flag that lets the annotation count
DEFAULT_GCS_PORT = 6379
TOKEN_SECRET_KEY = "auth_token"  # the key KubeRay stores the token under

_HOST = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$")


class AddressError(ValueError):
    """A GCS address (annotation or port) that cannot be used."""


@dataclass(frozen=True, slots=True)
class SecretKeyRef:
    """The Secret key holding a cluster's Ray auth token."""

    namespace: str
    name: str
    key: str = TOKEN_SECRET_KEY


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _meta(raycluster: Mapping[str, Any]) -> tuple[str, str]:
    meta = _mapping(raycluster.get("metadata"))
    name, namespace = meta.get("name"), meta.get("namespace")
    if not name or not namespace:
        raise AddressError("the RayCluster has no metadata.name or metadata.namespace")
    return str(name), str(namespace)


def parse_address(value: str) -> tuple[str, int]:
    """``host:port`` (IPv6 as ``[addr]:port``) -> (host, port); AddressError when malformed."""
    host, sep, port_text = value.strip().rpartition(":")
    if not sep or not _HOST.match(host) or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise AddressError(f"not a host:port address: {value!r}")
    return host, int(port_text)


def head_service_name(raycluster: Mapping[str, Any]) -> str:
    name, _ = _meta(raycluster)
    head = _mapping(_mapping(raycluster.get("spec")).get("headGroupSpec"))
    override = _mapping(_mapping(head.get("headService")).get("metadata")).get("name")
    return str(override) if override else f"{name}-head-svc"


def gcs_port(raycluster: Mapping[str, Any]) -> int:
    """The head's ``rayStartParams.port`` (a string in the CRD), else 6379."""
    head = _mapping(_mapping(raycluster.get("spec")).get("headGroupSpec"))
    port = _mapping(head.get("rayStartParams")).get("port")
    if port is None or port == "":
        return DEFAULT_GCS_PORT
    text = str(port).strip()
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise AddressError(f"headGroupSpec.rayStartParams.port is not a port: {port!r}")
    return int(text)


def head_gcs_address(raycluster: Mapping[str, Any]) -> str:
    """``<head-svc>.<namespace>.svc.<domain>:<port>``: the GCS behind the cluster's own head Service."""
    _, namespace = _meta(raycluster)
    domain = os.environ.get("CLUSTER_DOMAIN", "cluster.local")
    return f"{head_service_name(raycluster)}.{namespace}.svc.{domain}:{gcs_port(raycluster)}"


@dataclass(frozen=True, slots=True)
class GcsTarget:
    """Where rayscale dials a cluster's GCS (and sends its token), and what became of the annotation.

    `override` is the annotation's value when it names an address other than the head Service's:
    followed when `override_allowed`, else ignored (`address` is then the head Service's).
    """

    address: str
    override: str | None = None
    override_allowed: bool = False

    @property
    def ignored(self) -> str | None:
        """The annotation's value when it names another address and was not followed."""
        return self.override if self.override is not None and not self.override_allowed else None


def gcs_target(raycluster: Mapping[str, Any], *, allow_override: bool) -> GcsTarget:
    """The address rayscale dials for this cluster's GCS; the cluster's token goes there and nowhere else.

    Without `allow_override` it is always the head Service's: an annotation naming anything else is
    reported in ``ignored`` (malformed or not: it is not used). With it, a well-formed annotation is
    followed and a malformed one raises AddressError (reported as that cluster's GCS error).
    """
    annotations = _mapping(_mapping(raycluster.get("metadata")).get("annotations"))
    value = str(annotations.get(GCS_ADDRESS_ANNOTATION) or "").strip()
    if allow_override and value:
        host, port = parse_address(value)
        address = f"{host}:{port}"
        return GcsTarget(address, _other(raycluster, address, value), override_allowed=True)
    head = head_gcs_address(raycluster)
    return GcsTarget(head, _other(raycluster, value, value) if value else None)


def _other(raycluster: Mapping[str, Any], address: str, value: str) -> str | None:
    """`value` when `address` is not the head Service's GCS address (compared case-insensitively)."""
    try:
        head = head_gcs_address(raycluster)
    except AddressError:
        return value
    return None if address.lower() == head.lower() else value


def auth_token_secret(raycluster: Mapping[str, Any]) -> SecretKeyRef | None:
    """Where the token is when ``spec.authOptions.mode`` is ``token``; None when auth is off.

    KubeRay keeps it in the Secret ``authOptions.secretName``, else one named after the cluster,
    under the key ``auth_token``; Ray's clients send it as ``authorization: Bearer <token>``.
    """
    auth = _mapping(_mapping(raycluster.get("spec")).get("authOptions"))
    if auth.get("mode") != "token":
        return None
    name, namespace = _meta(raycluster)
    return SecretKeyRef(namespace=namespace, name=str(auth.get("secretName") or name))
