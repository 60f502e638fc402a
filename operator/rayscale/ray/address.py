"""Where rayscale dials a RayCluster's GCS, and where its auth token lives.

Input is the RayCluster as the autoscaler's reader read it: its metadata (`ClusterMeta`) and its
typed spec. The GCS is the one behind the cluster's own head Service, at the address its workers are
given (`rayscale.cluster.naming.dialled_head_endpoint`:
``<head-svc>.<namespace>.svc.<cluster domain>:<port>``); the token is in the Secret the
controller creates or mounts (`rayscale.cluster.naming.auth_token_secret_name`).

The annotation ``rayscale.io/gcs-address`` (``host:port``) names another address, for an operator
running outside the cluster and for tests. rayscale sends the cluster's Ray auth token to whatever
it dials, and anyone who may edit a RayCluster may set the annotation, so it is followed only when
the operator was started with overrides allowed (``rayscale run --allow-gcs-address-override``).
Otherwise rayscale dials the head Service anyway and says the annotation was ignored
(``gcs_target``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.naming import (
    AUTH_TOKEN_KEY,
    AddressError,
    auth_token_secret_name,
    dialled_head_endpoint,
    raycluster_name,
)

__all__ = [
    "GCS_ADDRESS_ANNOTATION",
    "OVERRIDE_FLAG",
    "AddressError",
    "GcsTarget",
    "SecretKeyRef",
    "auth_token_secret",
    "gcs_target",
    "parse_address",
]

GCS_ADDRESS_ANNOTATION = "rayscale.io/gcs-address"
OVERRIDE_FLAG = "--allow-gcs-address-override"  # the `rayscale run` flag that lets the annotation count

_HOST = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$")


@dataclass(frozen=True, slots=True)
class SecretKeyRef:
    """The Secret key holding a cluster's Ray auth token."""

    namespace: str
    name: str
    key: str = AUTH_TOKEN_KEY


def parse_address(value: str) -> tuple[str, int]:
    """``host:port`` (IPv6 as ``[addr]:port``) -> (host, port); AddressError when malformed."""
    host, sep, port_text = value.strip().rpartition(":")
    if not sep or not _HOST.match(host) or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise AddressError(f"not a host:port address: {value!r}")
    return host, int(port_text)


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


def gcs_target(meta: ClusterMeta, spec: RayClusterSpec, *, allow_override: bool) -> GcsTarget:
    """The address rayscale dials for this cluster's GCS; the cluster's token goes there and nowhere else.

    Without `allow_override` it is always the head Service's: an annotation naming anything else is
    reported in ``ignored`` (malformed or not: it is not used). With it, a well-formed annotation is
    followed and a malformed one raises AddressError (reported as that cluster's GCS error).
    """
    value = str(meta.annotations.get(GCS_ADDRESS_ANNOTATION) or "").strip()
    if allow_override and value:
        host, port = parse_address(value)
        address = f"{host}:{port}"
        return GcsTarget(address, _other(meta, spec, address, value), override_allowed=True)
    head = dialled_head_endpoint(meta, spec).address
    return GcsTarget(head, _other(meta, spec, value, value) if value else None)


def _other(meta: ClusterMeta, spec: RayClusterSpec, address: str, value: str) -> str | None:
    """`value` when `address` is not the head Service's GCS address (compared case-insensitively)."""
    try:
        head = dialled_head_endpoint(meta, spec).address
    except AddressError:
        return value
    return None if address.lower() == head.lower() else value


def auth_token_secret(meta: ClusterMeta, spec: RayClusterSpec) -> SecretKeyRef | None:
    """Where the token is when ``spec.authOptions.mode`` is ``token``; None when auth is off.

    KubeRay keeps it in the Secret ``authOptions.secretName``, else one named after the cluster
    (the one rayscale's controller creates), under the key ``auth_token``; Ray's clients send it as
    ``authorization: Bearer <token>``.
    """
    auth = spec.auth_options
    if auth is None or auth.mode != "token":
        return None
    name, namespace = raycluster_name(meta)
    return SecretKeyRef(namespace, auth_token_secret_name(name, auth.secret_name or None))
