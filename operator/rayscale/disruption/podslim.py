"""The copy of a Ray pod the operator indexes, with what the disruption notices read (pure).

`rayscale.common.pods.slim_pod` keeps what the controller and the autoscaler read of a pod; a
pod's disruption notice (notice.py) also needs the node it runs on (``spec.nodeName``: the node's
notice applies to it), its ``terminationGracePeriodSeconds`` (its deadline before a
``deletionTimestamp`` is set) and its ``DisruptionTarget`` condition. They are added here, a few
dozen bytes a pod.
"""

from __future__ import annotations

from typing import Any

from rayscale.common.pods import slim_pod as base_slim_pod
from rayscale.common.types import Obj

__all__ = ["DISRUPTION_TARGET", "slim_pod"]

DISRUPTION_TARGET = "DisruptionTarget"
_SPEC_KEYS = ("nodeName", "terminationGracePeriodSeconds")
_CONDITION_KEYS = ("type", "status", "reason", "lastTransitionTime")


def slim_pod(body: Obj) -> dict[str, Any]:
    """`rayscale.common.pods.slim_pod`, with the pod's node, grace period and ``DisruptionTarget``
    condition when it has them."""
    pod = base_slim_pod(body)
    spec = body.get("spec") or {}
    pod["spec"].update({k: spec[k] for k in _SPEC_KEYS if k in spec})
    target = [
        {k: c[k] for k in _CONDITION_KEYS if k in c}
        for c in (body.get("status") or {}).get("conditions") or ()
        if c.get("type") == DISRUPTION_TARGET
    ]
    if target:
        pod["status"]["conditions"] = [*pod["status"].get("conditions", []), *target]
    return pod
