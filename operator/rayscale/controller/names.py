"""Names of the objects the controller creates."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

MAX_NAME = 63
MAX_PREFIX = 50


def cluster_domain() -> str:
    return os.environ.get("CLUSTER_DOMAIN", "cluster.local")


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


def head_service_name(cluster: str, head_service: Mapping[str, Any] | None = None) -> str:
    """``headGroupSpec.headService.metadata.name`` when set, else ``<cluster>-head-svc``; the
    Service, every worker's ``--address`` and the GCS address rayscale dials all use it."""
    override = ((head_service or {}).get("metadata") or {}).get("name")
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
