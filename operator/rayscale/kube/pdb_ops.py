"""The PodDisruptionBudget calls (policy/v1) of a RayCluster's budgets, with 404/409 tolerated.

Used only for clusters that ask for budgets (annotation ``rayscale.io/disruption-budget``): the
chart grants these verbs only when ``podDisruptionBudgets.enabled`` is set, and a 403 is the
caller's to report (``KubeError.status``).
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from rayscale.kube.ops import MERGE_PATCH, send
from rayscale.kube.ops import _send_unless as send_unless  # its 404/409 tolerance, reused

__all__ = ["create_pdb", "delete_pdb", "list_pdbs", "patch_pdb"]


def _policy(api: client.ApiClient) -> Any:
    """PolicyV1Api, untyped: bodies are plain dicts and responses raw."""
    return client.PolicyV1Api(api)


async def list_pdbs(api: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    """Every PodDisruptionBudget of `namespace` (a namespace holds few: one page)."""
    call = _policy(api).list_namespaced_pod_disruption_budget(namespace, _preload_content=False)
    body = await send(call, f"list poddisruptionbudgets in {namespace}", body=True)
    return list(body.get("items") or [])


async def create_pdb(api: client.ApiClient, namespace: str, manifest: dict[str, Any]) -> bool:
    """Create a budget; False when one of that name exists already."""
    call = _policy(api).create_namespaced_pod_disruption_budget(namespace, manifest, _preload_content=False)
    return await send_unless(
        call, f"create poddisruptionbudget {manifest['metadata']['name']}", tolerated=409
    )


async def patch_pdb(api: client.ApiClient, namespace: str, name: str, patch: dict[str, Any]) -> bool:
    """Merge-patch a budget; False when it is gone."""
    call = _policy(api).patch_namespaced_pod_disruption_budget(
        name, namespace, patch, _content_type=MERGE_PATCH, _preload_content=False
    )
    return await send_unless(call, f"patch poddisruptionbudget {name}", tolerated=404)


async def delete_pdb(api: client.ApiClient, namespace: str, name: str) -> bool:
    """Delete a budget; False when it was gone already."""
    call = _policy(api).delete_namespaced_pod_disruption_budget(name, namespace, _preload_content=False)
    return await send_unless(call, f"delete poddisruptionbudget {name}", tolerated=404)
