"""The names, addresses and ports a RayCluster implies, as KubeRay derives them.

The head Service is ``<cluster>-head-svc`` unless ``headGroupSpec.headService.metadata.name``
names it. The head's GCS listens on ``rayStartParams.port`` of the head (default 6379), and
everyone reaches it through the head Service at ``<head Service>.<namespace>.svc.<cluster
domain>:<port>``: the workers (``--address``, ``RAY_ADDRESS``, ``wait-gcs-ready``) with the
address `head_endpoint` gives the controller, rayscale's autoscaler with the one
`dialled_head_endpoint` gives it, which is the same address but refuses a port nobody can dial.
The cluster domain is ``$CLUSTER_DOMAIN`` (default ``cluster.local``), read at each use, as
KubeRay reads it.

The Ray auth token (``spec.authOptions.mode: token``) is in the Secret ``authOptions.secretName``,
else in one named after the cluster (`check_name`), under the key ``auth_token``: the controller
creates it and mounts it, the autoscaler reads it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayscale.api.raycluster import RayClusterSpec
from rayscale.cluster.meta import ClusterMeta

__all__ = [
    "AUTH_TOKEN_KEY",
    "CLIENT_PORT",
    "CLUSTER_DOMAIN_ENV",
    "DASHBOARD_AGENT_PORT",
    "DASHBOARD_PORT",
    "DEFAULT_CLUSTER_DOMAIN",
    "DEFAULT_GCS_PORT",
    "DEFAULT_HEAD_SERVICE_PORTS",
    "METRICS_PORT",
    "SERVE_PORT",
    "AddressError",
    "HeadEndpoint",
    "auth_token_secret_name",
    "check_name",
    "cluster_domain",
    "dialled_gcs_port",
    "dialled_head_endpoint",
    "fqdn",
    "gcs_port",
    "head_endpoint",
    "head_identifier",
    "head_ingress_name",
    "head_pod_generate_name",
    "head_service_name",
    "headless_worker_service_name",
    "is_dns1035_label",
    "raycluster_name",
    "serve_service_name",
    "trim_front",
    "worker_identifier",
    "worker_pod_generate_name",
]

MAX_NAME = 63
MAX_PREFIX = 50

CLUSTER_DOMAIN_ENV = "CLUSTER_DOMAIN"
DEFAULT_CLUSTER_DOMAIN = "cluster.local"

DEFAULT_GCS_PORT = 6379
CLIENT_PORT = 10001
DASHBOARD_PORT = 8265
METRICS_PORT = 8080
SERVE_PORT = 8000
DASHBOARD_AGENT_PORT = 52365
#: The head Service's ports when the head's Ray container declares none (KubeRay's defaults).
DEFAULT_HEAD_SERVICE_PORTS: Mapping[str, int] = {
    "client": CLIENT_PORT,
    "gcs-server": DEFAULT_GCS_PORT,
    "dashboard": DASHBOARD_PORT,
    "metrics": METRICS_PORT,
    "serve": SERVE_PORT,
}
_MAX_PORT = 65535

AUTH_TOKEN_KEY = "auth_token"  # the Secret key KubeRay keeps the Ray auth token under


class AddressError(ValueError):
    """A GCS address (a RayCluster's, or one given as ``host:port``) that cannot be dialled."""


def cluster_domain() -> str:
    return os.environ.get(CLUSTER_DOMAIN_ENV, DEFAULT_CLUSTER_DOMAIN)


# ---- names of the objects KubeRay creates


def check_name(name: str) -> str:
    """KubeRay's CheckName: trim from the front to 50 chars; a leading digit or punctuation -> 'r'."""
    if len(name) > MAX_PREFIX:
        name = name[len(name) - MAX_PREFIX :]
    if name and not name[0].isalpha():
        name = "r" + name[1:]
    return name


def trim_front(value: str, limit: int = MAX_NAME) -> str:
    return value[-limit:] if len(value) > limit else value


def head_pod_generate_name(cluster: str) -> str:
    return f"{cluster[:MAX_PREFIX]}-head-".lower()


def worker_pod_generate_name(cluster: str, group: str) -> str:
    return f"{f'{cluster}-{group}'[:MAX_PREFIX]}-worker-".lower()


def head_identifier(cluster: str) -> str:
    return trim_front(f"{cluster}-head")


def worker_identifier(cluster: str) -> str:
    return trim_front(f"{cluster}-worker")


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def head_service_name(cluster: str, head_service: Mapping[str, Any] | None = None) -> str:
    """``headGroupSpec.headService.metadata.name`` when set, else ``<cluster>-head-svc``; the
    Service, every worker's ``--address`` and the GCS address rayscale dials all use it."""
    override = _mapping(_mapping(head_service).get("metadata")).get("name")
    return str(override) if override else f"{cluster}-head-svc"


def head_ingress_name(cluster: str) -> str:
    return f"{cluster}-head-ingress"


def serve_service_name(cluster: str) -> str:
    return f"{cluster}-serve-svc"


def headless_worker_service_name(cluster: str) -> str:
    return f"{cluster}-headless"


def fqdn(service: str, namespace: str) -> str:
    return f"{service}.{namespace}.svc.{cluster_domain()}"


_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def is_dns1035_label(value: str) -> bool:
    return len(value) <= MAX_NAME and bool(_DNS1035.match(value))


def auth_token_secret_name(cluster: str, secret_name: str | None) -> str:
    """The Secret holding the Ray auth token: ``authOptions.secretName``, else the cluster's own
    (KubeRay's `check_name` of the cluster's name)."""
    return secret_name if secret_name else check_name(cluster)


# ---- the GCS port and address


def _port_text(head_params: Mapping[str, Any] | None) -> str | None:
    raw = (head_params or {}).get("port")
    return None if raw is None or raw == "" else str(raw).strip()


def gcs_port(head_params: Mapping[str, Any] | None) -> int:
    """The head's ``rayStartParams.port`` (a string in the CRD), else 6379, read as KubeRay reads it:
    a value that is no number is 6379 too. What the pods are built with."""
    text = _port_text(head_params)
    try:
        return DEFAULT_GCS_PORT if text is None else int(text)
    except ValueError:
        return DEFAULT_GCS_PORT


def dialled_gcs_port(head_params: Mapping[str, Any] | None) -> int:
    """`gcs_port`, refusing (AddressError) a value that is not a port from 1 to 65535 in digits.

    Where the validation admits the value (every port but 0), the same as `gcs_port`."""
    text = _port_text(head_params)
    port = gcs_port(head_params)
    if text is not None and (not text.isdigit() or not 0 < port <= _MAX_PORT):
        raw = (head_params or {}).get("port")
        raise AddressError(f"headGroupSpec.rayStartParams.port is not a port: {raw!r}")
    return port


@dataclass(frozen=True, slots=True)
class HeadEndpoint:
    """Where a cluster's GCS is reached: the head Service, its fully qualified name, the GCS port."""

    service: str
    fqdn: str
    port: int

    @property
    def address(self) -> str:
        """``<head Service>.<namespace>.svc.<cluster domain>:<port>``."""
        return f"{self.fqdn}:{self.port}"


def head_endpoint(
    cluster: str,
    namespace: str,
    head_service: Mapping[str, Any] | None,
    head_params: Mapping[str, Any] | None,
) -> HeadEndpoint:
    """The head's GCS as the pods reach it (KubeRay's reading of the port, `gcs_port`)."""
    service = head_service_name(cluster, head_service)
    return HeadEndpoint(service, fqdn(service, namespace), gcs_port(head_params))


def raycluster_name(meta: ClusterMeta) -> tuple[str, str]:
    """``(metadata.name, metadata.namespace)`` of a RayCluster; AddressError without either."""
    if not meta.name or not meta.namespace:
        raise AddressError("the RayCluster has no metadata.name or metadata.namespace")
    return meta.name, meta.namespace


def dialled_head_endpoint(meta: ClusterMeta, spec: RayClusterSpec) -> HeadEndpoint:
    """The head's GCS as rayscale dials it, from the RayCluster's metadata and typed spec:
    `head_endpoint`, refusing (AddressError) a port nobody can dial (`dialled_gcs_port`)."""
    name, namespace = raycluster_name(meta)
    head = spec.head_group_spec
    dialled_gcs_port(head.ray_start_params)
    return head_endpoint(name, namespace, head.head_service, head.ray_start_params)
