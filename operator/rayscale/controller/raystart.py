"""The `ray start` command KubeRay generates from rayStartParams and container resources (§3.4)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import ROUND_CEILING
from typing import Any

from rayscale.resources import QuantityError, is_gpu_key, parse_quantity, parse_resources_param

DEFAULT_HEAD_PORT = 6379
METRICS_PORT = 8080
DASHBOARD_AGENT_PORT = 52365
ALWAYS_VALUED = frozenset({"log-color", "include-dashboard", "include-log-monitor"})
ACCELERATORS = {"aws.amazon.com/neuroncore": "neuron_cores", "google.com/tpu": "TPU"}


def head_port(head_params: Mapping[str, str] | None) -> int:
    try:
        return int((head_params or {}).get("port", DEFAULT_HEAD_PORT))
    except ValueError:
        return DEFAULT_HEAD_PORT


def _ceil(value: Any) -> int:
    return int(parse_quantity(value).to_integral_value(rounding=ROUND_CEILING))


def _nonzero(value: Any) -> bool:
    try:
        return parse_quantity(value) != 0
    except QuantityError:
        return False


def _resources_json(resources: Mapping[str, float]) -> str:
    body = {k: (int(v) if float(v).is_integer() else v) for k, v in resources.items()}
    return "'" + json.dumps(body, sort_keys=True, separators=(",", ":")) + "'"


def apply_group_resources(params: dict[str, str], resources: Mapping[str, str] | None) -> None:
    """The group `resources` map overrides num-cpus, memory, num-gpus and the resources JSON."""
    if not resources:
        return
    custom: dict[str, float] = {}
    for key, raw in sorted(resources.items()):
        if key.lower() == "cpu":
            params["num-cpus"] = str(_ceil(raw))  # ray start takes whole numbers; KubeRay rounds up
        elif key.lower() == "memory":
            params["memory"] = str(_ceil(raw))
        elif is_gpu_key(key):
            params["num-gpus"] = str(_ceil(raw))
        else:
            custom[key] = float(parse_quantity(raw))
    if custom:
        params["resources"] = _resources_json(custom)


def apply_container_resources(params: dict[str, str], container: Mapping[str, Any]) -> None:
    """num-cpus, memory, num-gpus and accelerator resources from the Ray container, if absent."""
    res = container.get("resources") or {}
    limits: Mapping[str, Any] = res.get("limits") or {}
    requests: Mapping[str, Any] = res.get("requests") or {}
    if "num-cpus" not in params:
        if _nonzero(limits.get("cpu")):
            params["num-cpus"] = str(_ceil(limits["cpu"]))
        elif _nonzero(requests.get("cpu")):
            params["num-cpus"] = str(_ceil(requests["cpu"]))
    if "memory" not in params and limits.get("memory") is not None and _nonzero(limits["memory"]):
        params["memory"] = str(_ceil(limits["memory"]))
    if "num-gpus" not in params:
        for key in sorted(limits):
            if is_gpu_key(key) and _nonzero(limits[key]):
                params["num-gpus"] = str(_ceil(limits[key]))
                break
    existing = parse_resources_param(params["resources"]) if "resources" in params else {}
    if "TPU" in existing or "neuron_cores" in existing:
        return
    for key in sorted(limits):
        if key in ACCELERATORS and _nonzero(limits[key]):
            existing[ACCELERATORS[key]] = float(_ceil(limits[key]))
            params["resources"] = _resources_json(existing)
            break


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
    """The effective rayStartParams of one pod, defaults included."""
    params = {str(k): str(v) for k, v in (user_params or {}).items()}
    apply_group_resources(params, group_resources)
    if group_labels:
        params["labels"] = ",".join(f"{k}={v}" for k, v in sorted(group_labels.items()))
    if is_head:
        params.setdefault("dashboard-host", "0.0.0.0")
        if autoscaling:
            params["no-monitor"] = "true"
    else:
        params.setdefault("address", head_address)
    params.setdefault("metrics-export-port", str(METRICS_PORT))
    params.setdefault("dashboard-agent-listen-port", str(DASHBOARD_AGENT_PORT))
    params["block"] = "true"
    apply_container_resources(params, container)
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
