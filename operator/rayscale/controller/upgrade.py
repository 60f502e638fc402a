"""``upgradeStrategy.type: Recreate``: when the spec changes, every pod is deleted and the
cluster starts again from the new spec, as KubeRay does it.

The head pod carries ``ray.io/upgrade-strategy-recreate-hash``: a hash of the spec without what
autoscaling and external controllers change (``replicas``, ``minReplicas``, ``maxReplicas``,
``workersToDelete``, tolerations and scheduling gates of the templates) and without
``upgradeStrategy`` itself. When the head's hash differs from the spec's, all pods go. A head
pod written by another operator version (its ``ray.io/kuberay-version`` differs, e.g. one that
KubeRay created) is never a reason to recreate: its hash was computed another way.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from rayscale import __version__
from rayscale.api.raycluster import RayClusterSpec
from rayscale.common import labels as L

__all__ = ["OPERATOR_VERSION", "must_recreate", "spec_hash"]

OPERATOR_VERSION = f"rayscale-{__version__}"


def _mute_template(template: dict[str, Any]) -> None:
    pod_spec = template.get("spec") or {}
    pod_spec.pop("tolerations", None)
    pod_spec.pop("schedulingGates", None)


def spec_hash(spec: RayClusterSpec) -> str:
    """base32hex(sha1) of the spec's canonical JSON, the fields above muted."""
    body: dict[str, Any] = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    body.pop("upgradeStrategy", None)
    _mute_template(body["headGroupSpec"].get("template") or {})
    for group in body.get("workerGroupSpecs") or []:
        for key in ("replicas", "minReplicas", "maxReplicas"):
            group.pop(key, None)
        (group.get("scaleStrategy") or {}).pop("workersToDelete", None)
        _mute_template(group.get("template") or {})
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return base64.b32hexencode(hashlib.sha1(canonical.encode(), usedforsecurity=False).digest()).decode()


def must_recreate(spec: RayClusterSpec, head: Mapping[str, Any] | None) -> bool:
    """Whether every pod must go: Recreate is on and the running head was built from another spec."""
    strategy = spec.upgrade_strategy
    if head is None or strategy is None or strategy.type != "Recreate":
        return False
    annotations = (head.get("metadata") or {}).get("annotations") or {}
    version = annotations.get(L.KUBERAY_VERSION_ANNOTATION, "")
    if version and version != OPERATOR_VERSION:
        return False
    actual = annotations.get(L.HASH_ANNOTATION, "")
    return bool(actual) and actual != spec_hash(spec)
