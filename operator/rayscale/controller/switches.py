"""KubeRay's operator environment switches, read as KubeRay reads them: from the operator's
environment at each use (set them in the chart's ``env``).

- ``ENABLE_INIT_CONTAINER_INJECTION=false``: workers get no ``wait-gcs-ready`` init container.
- ``ENABLE_DETERMINISTIC_HEAD_POD_NAME=true``: the head pod is named ``<cluster>-head``, not
  ``<cluster>-head-<random>``.
- ``ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE=true``: a ClusterIP head Service gets a cluster IP
  instead of being headless.
- ``ENABLE_LOGIN_SHELL=true``: Ray containers run their command in a login shell
  (``/bin/bash -cl``), so profile scripts (conda, module systems) are sourced.
"""

from __future__ import annotations

import os

__all__ = [
    "container_command",
    "deterministic_head_pod_name",
    "head_cluster_ip_service",
    "init_container_injection",
]


def _is(name: str, value: str) -> bool:
    return os.environ.get(name, "").lower() == value


def init_container_injection() -> bool:
    return not _is("ENABLE_INIT_CONTAINER_INJECTION", "false")


def deterministic_head_pod_name() -> bool:
    return _is("ENABLE_DETERMINISTIC_HEAD_POD_NAME", "true")


def head_cluster_ip_service() -> bool:
    return _is("ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE", "true")


def container_command(options: str = "") -> list[str]:
    """The shell a generated command runs in: ``/bin/bash -c --`` (``-cl`` with a login shell),
    with bash's `options` after the ``c`` (``"e"``: ``-ce``, as the RayJob submitter runs)."""
    login = "l" if _is("ENABLE_LOGIN_SHELL", "true") else ""
    return ["/bin/bash", f"-c{options}{login}", "--"]
