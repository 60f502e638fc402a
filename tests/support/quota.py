"""A PriorityClass-scoped ResourceQuota on the local control plane: the 'spot' pods of a test
name the PriorityClass, and the quota caps how many of them the API server lets exist."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.support.kube import Kube

PRIORITY_CLASS = "rayscale-test-spot"
QUOTA = "spot-quota"


async def priority_class(api: client.ApiClient) -> None:
    """The cluster-wide PriorityClass the spot pods name (made once, kept: other runs reuse it)."""
    body: Any = {"metadata": {"name": PRIORITY_CLASS}, "value": 100, "description": "rayscale's quota tests"}
    try:
        await client.SchedulingV1Api(api).create_priority_class(body)
    except ApiException as exc:
        if exc.status != 409:
            raise


def spot_quota(pods: int) -> dict[str, Any]:
    """The ResourceQuota ``spot-quota``: at most `pods` pods of the PriorityClass."""
    scope = {"scopeName": "PriorityClass", "operator": "In", "values": [PRIORITY_CLASS]}
    return {
        "metadata": {"name": QUOTA},
        "spec": {"hard": {"pods": str(pods)}, "scopeSelector": {"matchExpressions": [scope]}},
    }


async def quota_condition(kube: Kube, cluster: str, status: str) -> dict[str, Any] | None:
    """The cluster's ``QuotaExceeded`` condition (in ``status.autoscaler``) when it has `status`."""
    auto = (await kube.get(cluster)).get("status", {}).get("autoscaler") or {}
    found = next((c for c in auto.get("conditions") or [] if c.get("type") == "QuotaExceeded"), None)
    return found if found is not None and found.get("status") == status else None
