"""Liveness and readiness probes KubeRay injects when the user left them unset."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from rayscale.cluster.naming import DASHBOARD_AGENT_PORT, DASHBOARD_PORT
from rayscale.cluster.rayversion import version_at_least

HTTP_PROBES_SINCE = (2, 53, 0)


def _handler(*, head: bool, ray_version: str | None, params: Mapping[str, str]) -> dict[str, Any]:
    agent = params.get("dashboard-agent-listen-port", str(DASHBOARD_AGENT_PORT))
    if version_at_least(ray_version, HTTP_PROBES_SINCE):
        return {"httpGet": {"path": "/api/healthz", "port": int(agent)}}
    cmd = f"wget --tries 1 -T 2 -q -O- http://localhost:{agent}/api/local_raylet_healthz | grep success"
    if head:
        dashboard = params.get("dashboard-port", str(DASHBOARD_PORT))
        cmd += f" && wget --tries 1 -T 10 -q -O- http://localhost:{dashboard}/api/gcs_healthz | grep success"
    return {"exec": {"command": ["bash", "-c", cmd]}}


def inject(
    container: dict[str, Any], *, head: bool, ray_version: str | None, params: Mapping[str, str]
) -> None:
    if os.environ.get("ENABLE_PROBES_INJECTION", "").lower() == "false":
        return
    timeout = 5 if head else 2
    common = {"timeoutSeconds": timeout, "periodSeconds": 5, "successThreshold": 1}
    if "livenessProbe" not in container:
        container["livenessProbe"] = {
            **_handler(head=head, ray_version=ray_version, params=params),
            "initialDelaySeconds": 30,
            **common,
            "failureThreshold": 120,
        }
    if "readinessProbe" not in container:
        container["readinessProbe"] = {
            **_handler(head=head, ray_version=ray_version, params=params),
            "initialDelaySeconds": 10,
            **common,
            "failureThreshold": 10,
        }
