"""Pure parts of the Ray bridge: which Ray node a pod stands for, read from its generated command.

rayscale (like KubeRay) puts the whole ``ray start`` command of a pod in its Ray container, both in
the container args and in the env var ``KUBERAY_GEN_RAY_START_CMD``. The bridge starts a local
Ray node with the same logical resources (``--num-cpus``, ``--num-gpus``, ``--resources``,
``--memory``) and labels, under the pod's name (``RAY_CLOUD_INSTANCE_ID``) and group
(``RAY_NODE_TYPE_NAME``). Init containers that only sleep (``sleep 15``, as KubeRay's e2e suite
uses to make a node slow to join) delay the worker's start by as long. Everything about the
machine (addresses, ports, object store, dashboard) is the bridge's own choice and is not taken
from the pod.

The head pod decides whether the Ray head runs (`live_head`, `head_action`): once a head pod
has Run, the Ray head runs while a head pod is Running and not being deleted, and a new head pod
(another uid) gets a new Ray head, as a new head container would.

Standard library only (no kubernetes client objects: pods are plain JSON mappings).
"""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "GEN_CMD_ENV",
    "HeadAction",
    "PodSpecError",
    "WorkerSpec",
    "head_action",
    "is_head_pod",
    "is_live_worker",
    "live_head",
    "parse_labels",
    "parse_ray_start",
    "parse_resources",
    "sleep_seconds",
    "start_command",
    "wanted_workers",
    "worker_spec",
]

GEN_CMD_ENV = "KUBERAY_GEN_RAY_START_CMD"
CLUSTER_LABEL = "ray.io/cluster"
GROUP_LABEL = "ray.io/group"
NODE_TYPE_LABEL = "ray.io/node-type"


class PodSpecError(ValueError):
    """The pod's ray start command cannot be read."""


@dataclass(frozen=True)
class WorkerSpec:
    """The Ray worker node a pod stands for."""

    pod: str  # instance id
    group: str  # node type
    num_cpus: float | None = None
    num_gpus: float | None = None
    memory: int | None = None  # bytes (Ray's logical `memory` resource)
    resources: Mapping[str, float] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    start_delay: float = 0.0  # seconds its init containers sleep before Ray starts


def parse_ray_start(command: str) -> dict[str, str]:
    """The ``--key=value`` flags of a ``ray start`` command line; a bare ``--flag`` is "true".

    Shell quoting is undone (``--resources='{"a":1}'``). Also takes ``--key value`` pairs.
    """
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise PodSpecError(f"unparseable ray start command: {exc}") from None
    if "start" not in words:
        raise PodSpecError(f"not a `ray start` command: {command[:200]!r}")
    words = words[words.index("start") + 1 :]
    params: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("--"):
            continue  # e.g. `&& sleep infinity` after the command, or shell glue
        key, sep, value = word[2:].partition("=")
        if not sep:
            if i < len(words) and not words[i].startswith("--") and key not in _BARE_FLAGS:
                value = words[i]
                i += 1
            else:
                value = "true"
        params[key] = value
    return params


_BARE_FLAGS = frozenset({"head", "block", "no-monitor", "disable-usage-stats"})


def parse_labels(text: str) -> dict[str, str]:
    """Ray's ``--labels``: ``k1=v1,k2=v2`` (or the older JSON object)."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PodSpecError(f"bad --labels JSON {text!r}: {exc}") from None
        return {str(k): str(v) for k, v in loaded.items()}
    labels: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PodSpecError(f"bad --labels item {item!r} in {text!r}")
        labels[key.strip()] = value.strip()
    return labels


def _number(params: Mapping[str, str], key: str) -> float | None:
    if key not in params:
        return None
    try:
        return float(params[key])
    except ValueError:
        raise PodSpecError(f"--{key}={params[key]!r} is not a number") from None


def parse_resources(text: str) -> dict[str, float]:
    """Ray's ``--resources`` JSON object."""
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PodSpecError(f"bad --resources {text!r}: {exc}") from None
    if not isinstance(loaded, dict):
        raise PodSpecError(f"--resources must be a JSON object, got {text!r}")
    return {str(k): float(v) for k, v in loaded.items()}


def _ray_container(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = ((pod.get("spec") or {}).get("containers")) or []
    if not containers:
        raise PodSpecError("pod has no containers")
    first: Mapping[str, Any] = containers[0]
    return first


def start_command(pod: Mapping[str, Any]) -> str:
    """The pod's generated ray start command: env ``KUBERAY_GEN_RAY_START_CMD``, else its args."""
    container = _ray_container(pod)
    for env in container.get("env") or []:
        if env.get("name") == GEN_CMD_ENV and env.get("value"):
            return str(env["value"])
    for part in [*(container.get("args") or []), *(container.get("command") or [])]:
        if "ray start" in str(part):
            text = str(part)
            return text[text.index("ray start") :]
    raise PodSpecError("the Ray container has no generated `ray start` command")


def sleep_seconds(pod: Mapping[str, Any]) -> float:
    """How long the pod's init containers sleep: ``sleep N`` as command and args, or in ``sh -c``."""
    total = 0.0
    for init in ((pod.get("spec") or {}).get("initContainers")) or []:
        words = [str(w) for w in [*(init.get("command") or []), *(init.get("args") or [])]]
        if words and words[0].rsplit("/", 1)[-1] in _SHELLS and "-c" in words[:-1]:
            try:
                words = shlex.split(words[words.index("-c") + 1])
            except ValueError:
                continue
        if len(words) == 2 and words[0].rsplit("/", 1)[-1] == "sleep":
            with contextlib.suppress(ValueError):
                total += float(words[1])
    return total


_SHELLS = frozenset({"sh", "bash"})


def worker_spec(pod: Mapping[str, Any]) -> WorkerSpec:
    """The Ray worker node of a worker pod."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    name = str(meta.get("name") or "")
    group = str(labels.get(GROUP_LABEL) or "")
    if not name or not group:
        raise PodSpecError(f"pod {name or '?'} has no name or no {GROUP_LABEL} label")
    params = parse_ray_start(start_command(pod))
    gpus = _number(params, "num-gpus")
    memory = _number(params, "memory")
    return WorkerSpec(
        pod=name,
        group=group,
        num_cpus=_number(params, "num-cpus"),
        num_gpus=gpus,
        memory=None if memory is None else int(memory),
        resources=parse_resources(params["resources"]) if "resources" in params else {},
        labels=parse_labels(params["labels"]) if "labels" in params else {},
        start_delay=sleep_seconds(pod),
    )


def is_live_worker(pod: Mapping[str, Any], cluster: str) -> bool:
    """A worker pod of `cluster` that is Running and not being deleted: its Ray node should run."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (
        labels.get(CLUSTER_LABEL) == cluster
        and labels.get(NODE_TYPE_LABEL) == "worker"
        and not meta.get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") == "Running"
    )


def wanted_workers(
    pods: Iterable[Mapping[str, Any]], cluster: str
) -> tuple[dict[str, WorkerSpec], dict[str, str]]:
    """Pod name -> WorkerSpec for every live worker of `cluster`; pod name -> error for unreadable ones."""
    wanted: dict[str, WorkerSpec] = {}
    errors: dict[str, str] = {}
    for pod in pods:
        if not is_live_worker(pod, cluster):
            continue
        name = str((pod.get("metadata") or {}).get("name"))
        try:
            wanted[name] = worker_spec(pod)
        except PodSpecError as exc:
            errors[name] = str(exc)
    return wanted, errors


# ---- the head pod ----


def is_head_pod(pod: Mapping[str, Any], cluster: str) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(CLUSTER_LABEL) == cluster and labels.get(NODE_TYPE_LABEL) == "head"


def live_head(pods: Iterable[Mapping[str, Any]], cluster: str) -> str | None:
    """The head pod of `cluster` that is Running and not being deleted, as ``"name uid"``."""
    for pod in pods:
        meta = pod.get("metadata") or {}
        if (
            is_head_pod(pod, cluster)
            and not meta.get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") == "Running"
        ):
            return f"{meta.get('name')} {meta.get('uid') or ''}".strip()
    return None


HeadAction = str  # "keep" | "adopt" | "stop" | "start" | "restart"


def head_action(*, running: bool, bound: str | None, live: str | None) -> HeadAction:
    """What the bridge does with its Ray head, given the head pod.

    `running`: the Ray head runs; `bound`: the head pod it stands for (None: the head `start`
    began with, before the cluster had a Running head pod, or no head); `live`: the Running
    head pod, if any (`live_head`). The first Running head pod adopts the head the bridge began
    with; from then on the head stops when its pod goes, and a new head pod gets a new head.
    """
    if live is None:
        return "stop" if running and bound is not None else "keep"
    if not running:
        return "start"
    if bound is None:
        return "adopt"
    return "keep" if bound == live else "restart"
