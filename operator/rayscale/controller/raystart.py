"""The `ray start` command KubeRay generates from rayStartParams and container resources."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayscale.cluster import host
from rayscale.cluster.naming import DASHBOARD_AGENT_PORT, METRICS_PORT

ALWAYS_VALUED = frozenset({"log-color", "include-dashboard", "include-log-monitor"})


def start_params(
    *,
    user_params: Mapping[str, str] | None,
    group_resources: Mapping[str, str] | None,
    group_labels: Mapping[str, str] | None,
    container: Mapping[str, Any],
    is_head: bool,
    head_address: str,
    autoscaling: bool,
) -> dict[str, str]:
    """The effective rayStartParams of one pod, defaults included; the resource flags are
    `rayscale.cluster.host`'s (the group's resources map, then the Ray container)."""
    params = host.start_resource_params(
        {str(k): str(v) for k, v in (user_params or {}).items()}, group_resources, container
    )
    if (labels := host.labels_param(group_labels)) is not None:
        params[host.LABELS_PARAM] = labels
    if is_head:
        params.setdefault("dashboard-host", "0.0.0.0")
        if autoscaling:
            params["no-monitor"] = "true"
    else:
        params.setdefault("address", head_address)
    params.setdefault("metrics-export-port", str(METRICS_PORT))
    params.setdefault("dashboard-agent-listen-port", str(DASHBOARD_AGENT_PORT))
    params["block"] = "true"
    return params


def render(params: Mapping[str, str], *, is_head: bool) -> str:
    """`ray start [--head] --k=v ...`: keys sorted; true -> flag, false -> omitted."""
    flags = []
    for key in sorted(params):
        value = params[key]
        if key in ALWAYS_VALUED:
            flags.append(f"--{key}={value}")
        elif value.lower() == "true":
            flags.append(f"--{key}")
        elif value.lower() == "false":
            continue
        else:
            flags.append(f"--{key}={value}")
    head = ["ray", "start", "--head"] if is_head else ["ray", "start"]
    return " ".join(head + flags)
