"""Status of a RayCluster computed from its spec, pods and services, pure."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from rayscale.api.raycluster import (
    HEAD_POD_READY,
    MAX_INT32,
    PROVISIONED,
    REPLICA_FAILURE,
    SPEC_VALID,
    SUSPENDED,
    SUSPENDING,
    RayClusterSpec,
)
from rayscale.cluster import naming
from rayscale.cluster.accelerators import TPU_RESOURCE, is_gpu_key
from rayscale.cluster.meta import ClusterMeta
from rayscale.cluster.replicas import expected_replicas, num_hosts
from rayscale.common import labels as L
from rayscale.common.pods import (
    condition,
    is_head,
    is_running_and_ready,
    is_running_ready_if_present,
    is_worker,
    phase,
    pod_name,
)
from rayscale.common.timefmt import rfc3339
from rayscale.common.types import Obj
from rayscale.quantities import format_quantity, template_resources, uses_binary_suffix

PROVISIONING = "RayClusterPodsProvisioning"  # the reason of RayClusterProvisioned=False

#: status keys another writer owns (rayscale's autoscaler): the controller never writes them
FOREIGN = ("autoscaler",)
#: fields whose change alone does not justify a status write
_NOT_COMPARED = ("lastUpdateTime", "stateTransitionTimes", *FOREIGN)


@dataclasses.dataclass(frozen=True)
class ReconcileError:
    """A failed create/delete; `reason` is KubeRay's ReplicaFailure reason (None: untagged);
    `retry_after` the server's Retry-After, in seconds, when it sent one."""

    message: str
    reason: str | None = None
    retry_after: float | None = None


def _conditions(status: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: dict(c) for c in status.get("conditions") or [] if "type" in c}


def _is_true(conds: Mapping[str, Mapping[str, Any]], kind: str) -> bool:
    return conds.get(kind, {}).get("status") == "True"


def _set(
    conds: dict[str, dict[str, Any]],
    kind: str,
    status: bool,
    reason: str,
    message: str,
    *,
    now: datetime,
    generation: int,
) -> None:
    old = conds.get(kind)
    value = "True" if status else "False"
    changed = old is None or old.get("status") != value
    conds[kind] = {
        "type": kind,
        "status": value,
        "observedGeneration": generation,
        "lastTransitionTime": rfc3339(now) if changed else old["lastTransitionTime"],  # type: ignore[index]
        "reason": reason,
        "message": message,
    }


def desired_resources(spec: RayClusterSpec) -> dict[str, str]:
    """desiredCPU/Memory/GPU/TPU from templates: head x1 + group x replicas(unclamped) x hosts."""
    total: dict[str, Decimal] = {}
    weighted = [(spec.head_group_spec.template, 1)] + [
        (g.template, 0 if g.suspend else (g.replicas or 0) * num_hosts(g)) for g in spec.workers
    ]
    for template, count in weighted:
        for key, value in template_resources(template).items():
            total[key] = total.get(key, Decimal(0)) + value * count
    # Like Go's Quantity.Add, the sum keeps the format of the first template declaring memory.
    binary = next((uses_binary_suffix(t, "memory") for t, _ in weighted if _has(t, "memory")), False)
    gpu = sum((v for k, v in total.items() if is_gpu_key(k)), Decimal(0))
    return {
        "desiredCPU": format_quantity(total.get("cpu", Decimal(0))),
        "desiredMemory": format_quantity(total.get("memory", Decimal(0)), binary=binary),
        "desiredGPU": format_quantity(gpu),
        "desiredTPU": format_quantity(total.get(TPU_RESOURCE, Decimal(0))),
    }


def _has(template: Mapping[str, Any], key: str) -> bool:
    return key in template_resources(template)


def replica_sums(spec: RayClusterSpec) -> dict[str, int]:
    active = [g for g in spec.workers if not g.suspend]
    return {
        "desiredWorkerReplicas": sum(expected_replicas(g) * num_hosts(g) for g in active),
        "minWorkerReplicas": sum(g.min_replicas * num_hosts(g) for g in active),
        "maxWorkerReplicas": min(MAX_INT32, sum(g.max_replicas * num_hosts(g) for g in active)),
    }


def _head_service(meta: ClusterMeta, services: Sequence[Obj]) -> Obj | None:
    for svc in services:
        labels = svc.get("metadata", {}).get("labels") or {}
        if (
            labels.get(L.RAY_CLUSTER) == meta.name
            and labels.get(L.NODE_TYPE) == L.HEAD
            and labels.get(L.IDENTIFIER) == naming.head_identifier(meta.name)
        ):
            return svc
    return None


def _endpoints(service: Obj | None, old: Mapping[str, str]) -> dict[str, str]:
    out = dict(old)
    for port in ((service or {}).get("spec") or {}).get("ports") or []:
        if not port.get("name"):
            continue
        target = port.get("targetPort")
        if port.get("nodePort"):
            out[port["name"]] = str(port["nodePort"])
        elif target not in (None, "", 0):
            out[port["name"]] = str(target)
    return out


def _head_pod_ready(head: Obj | None) -> tuple[bool, str, str]:
    if head is None:
        return False, "HeadPodNotFound", "Head Pod not found"
    ready = condition(head, "Ready")
    if ready is None:
        return False, "Unknown", ""
    status = ready.get("status") == "True"
    reason = str(ready.get("reason") or "")
    if reason == "ContainersNotReady":
        for cs in (head.get("status") or {}).get("containerStatuses") or []:
            state = cs.get("state") or {}
            detail = (state.get("waiting") or state.get("terminated") or {}).get("reason")
            if detail:
                reason = str(detail)
            break
    if status and not reason:
        reason = "HeadPodRunningAndReady"
    return status, reason or "Unknown", str(ready.get("message") or "")


def _suspend_conditions(
    conds: dict[str, dict[str, Any]],
    spec: RayClusterSpec,
    pods: Sequence[Obj],
    complete: bool,
    *,
    now: datetime,
    generation: int,
) -> None:
    """RayClusterProvisioned, RayClusterSuspending and RayClusterSuspended as KubeRay writes
    them: both suspend conditions are always present (False unless suspending or suspended)."""
    suspending, suspended = _is_true(conds, SUSPENDING), _is_true(conds, SUSPENDED)

    def put(kind: str, value: bool, reason: str, message: str = "") -> None:
        _set(conds, kind, value, reason, message, now=now, generation=generation)

    if not _is_true(conds, PROVISIONED) and not suspended:
        if complete and all(is_running_and_ready(p) for p in pods):
            put(
                PROVISIONED,
                True,
                "AllPodRunningAndReadyFirstTime",
                "All Ray Pods are ready for the first time",
            )
        else:
            put(PROVISIONED, False, PROVISIONING, "RayCluster Pods are being provisioned for first time")
    if suspending:
        if not pods:
            put(PROVISIONED, False, PROVISIONING, "RayCluster has been suspended")
            put(SUSPENDING, False, SUSPENDING)
            put(SUSPENDED, True, SUSPENDED)
    elif suspended:
        if not spec.suspend:  # KubeRay only on suspend: false; a removed field resumes too
            put(SUSPENDED, False, SUSPENDED)
    else:
        put(SUSPENDED, False, SUSPENDED)
        put(SUSPENDING, bool(spec.suspend), SUSPENDING)


def compute_status(
    meta: ClusterMeta,
    spec: RayClusterSpec,
    old: Mapping[str, Any],
    pods: Sequence[Obj],
    services: Sequence[Obj],
    *,
    error: ReconcileError | None = None,
    now: datetime,
) -> dict[str, Any]:
    """The new status; `pods` are all pods labelled with the cluster (terminating included)."""
    status: dict[str, Any] = {k: v for k, v in old.items() if k not in ("conditions",)}
    conds = _conditions(old)
    conds.pop(SPEC_VALID, None)
    gen = meta.generation
    workers = [p for p in pods if is_worker(p)]
    heads = [p for p in pods if is_head(p)]
    head = heads[0] if heads else None
    status["readyWorkerReplicas"] = sum(1 for p in workers if is_running_and_ready(p))
    status["availableWorkerReplicas"] = sum(1 for p in workers if phase(p) == "Running")
    status.update(replica_sums(spec))
    status.update(desired_resources(spec))

    ready, reason, message = _head_pod_ready(head)
    _set(conds, HEAD_POD_READY, ready, reason, message, now=now, generation=gen)

    all_up = bool(pods) and all(is_running_ready_if_present(p) for p in pods)
    complete = len(pods) == status["desiredWorkerReplicas"] + 1 and all_up
    _suspend_conditions(conds, spec, pods, complete, now=now, generation=gen)

    if error is None:
        conds.pop(REPLICA_FAILURE, None)
    elif error.reason is not None:
        _set(conds, REPLICA_FAILURE, True, error.reason, error.message, now=now, generation=gen)

    state = old.get("state")
    if error is None and complete:
        state = "ready"
        status["reason"] = ""
    if _is_true(conds, SUSPENDED):
        state = "suspended"
    if state is not None:
        if state != old.get("state"):
            times = dict(old.get("stateTransitionTimes") or {})
            times[state] = rfc3339(now)
            status["stateTransitionTimes"] = times
        status["state"] = state

    service = _head_service(meta, services)
    endpoints = _endpoints(service, old.get("endpoints") or {})
    if endpoints:
        status["endpoints"] = endpoints
    head_ip = str((head or {}).get("status", {}).get("podIP") or "")
    head_info: dict[str, str] = {"podIP": head_ip, "podName": pod_name(head) if head else ""}
    if service is not None:
        cluster_ip = str((service.get("spec") or {}).get("clusterIP") or "")
        head_info["serviceName"] = service["metadata"]["name"]
        head_info["serviceIP"] = head_ip if cluster_ip == "None" else cluster_ip
    status["head"] = head_info
    status["conditions"] = sorted(conds.values(), key=lambda c: c["type"])
    status["observedGeneration"] = gen
    return omit_empty(status)


def _empty(value: Any) -> bool:
    return value in ("", 0, {}, []) and not isinstance(value, bool)


def omit_empty(status: Mapping[str, Any]) -> dict[str, Any]:
    """`status` as KubeRay's types serialise it: their fields are `omitempty`, so a zero count, an
    empty string and an empty map or list are not written (`kubectl get` shows a blank, not 0).
    `head` is a struct and always written (as `{}` when empty); the desired quantities are
    Quantity strings ("0"), never empty."""
    out = {k: v for k, v in status.items() if k == "head" or not _empty(v)}
    if isinstance(out.get("head"), Mapping):
        out["head"] = {k: v for k, v in out["head"].items() if not _empty(v)}
    return out


def put_condition(
    status: Mapping[str, Any],
    kind: str,
    value: tuple[bool, str, str] | None,
    *,
    now: datetime,
    generation: int,
) -> dict[str, Any]:
    """`status` with the condition `kind` set to (status, reason, message), or removed (None)."""
    conds = _conditions(status)
    if value is None:
        conds.pop(kind, None)
    else:
        _set(conds, kind, value[0], value[1], value[2], now=now, generation=generation)
    return {**status, "conditions": sorted(conds.values(), key=lambda c: c["type"])}


def invalid_status(
    meta: ClusterMeta, old: Mapping[str, Any], reason: str, message: str, *, now: datetime
) -> dict[str, Any]:
    """Status of an invalid RayCluster: unchanged except for the SpecValid condition."""
    status: dict[str, Any] = dict(old)
    conds = _conditions(old)
    _set(conds, SPEC_VALID, False, reason, message, now=now, generation=meta.generation)
    status["conditions"] = sorted(conds.values(), key=lambda c: c["type"])
    status["observedGeneration"] = meta.generation
    return status


#: fields that follow the pods as they come up one by one: a change of these alone may wait (and
#: of a condition's reason and message, while its status stays: `progress_only`)
PROGRESS = frozenset({"readyWorkerReplicas", "availableWorkerReplicas", "head", "endpoints"})


def _compared(s: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in s.items() if k not in _NOT_COMPARED and v is not None}


def status_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return _compared(old) != _compared(new)


def progress_only(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether `new` differs from `old` only as the pods come up: in `PROGRESS` fields (the worker
    counts, the head's pod name and IP, the endpoints) and in the reasons and messages of
    conditions whose status stays (HeadPodReady False: no head yet, then a head pending). A
    state, a condition turning True or False, the spec's counts or an error is never progress."""
    a, b = _compared(old), _compared(new)
    if any(a.get(k) != b.get(k) for k in a.keys() | b.keys() if k not in PROGRESS and k != "conditions"):
        return False
    return _condition_states(a) == _condition_states(b)


def _condition_states(status: Mapping[str, Any]) -> dict[str, Any]:
    return {c.get("type"): c.get("status") for c in status.get("conditions") or []}


def status_patch(old: Mapping[str, Any], new: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
    """A merge patch turning `old` into `new` (removed keys set to null), stamped lastUpdateTime.

    Keys other writers own are left out, so a stale copy of them is never written back.
    """
    patch: dict[str, Any] = {k: None for k in old if k not in new and k not in FOREIGN}
    patch.update((k, _replacing(old.get(k), v)) for k, v in new.items() if k not in FOREIGN)
    patch["lastUpdateTime"] = rfc3339(now)
    return {"status": patch}


def _replacing(old: Any, new: Any) -> Any:
    """`new` as a merge patch over `old`: a key of a map that `new` no longer has is set to null
    (`head.podName` once the head is gone), else the merge would keep it."""
    if not (isinstance(old, Mapping) and isinstance(new, Mapping)):
        return new
    out: dict[str, Any] = {k: None for k in old if k not in new}
    out.update((k, _replacing(old.get(k), v)) for k, v in new.items())
    return out
