"""The Nodes' disruption notices, watched by kopf (`start`, from the operator's startup).

A kopf event handler on core v1 Nodes keeps each node's notice (rayscale.disruption.nodes: only the
notice, never the Node) and, when a node's notice comes, changes or goes, calls `changed` with its
name: the autoscaler then runs the rounds of the clusters with pods on it.

Nodes are cluster-scoped, and reading them needs ``get``, ``list`` and ``watch`` on ``nodes`` in a
ClusterRole, also for an operator that watches a few namespaces (the Helm chart grants it in every
mode). kopf stops the whole operator when a watch is refused, so the access is asked of the API
server first (SelfSubjectAccessReview): without it the handler is not registered, and a Warning
says that node notices (cordons, taints, node conditions) are not seen; a pod's own
``DisruptionTarget`` notice still acts, as the pods are watched anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import kopf
from kubernetes_asyncio import client

from rayscale.disruption.nodes import NodeNotices
from rayscale.kube import ops

__all__ = ["start"]

log = logging.getLogger(__name__)
VERBS = ("get", "list", "watch")
_registered: set[int] = set()  # the registries the handler is on (one per process in production)


async def denied(api: client.ApiClient) -> str | None:
    """Why this operator may not read Nodes (a verb refused, or the question unanswered); None
    when it may."""
    auth = client.AuthorizationV1Api(api)
    for verb in VERBS:
        review: Any = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "resource": "nodes"}},
        }
        call = auth.create_self_subject_access_review(review, _preload_content=False)
        try:
            answer = await ops.send(call, f"may this operator {verb} nodes?", body=True)
        except ops.KubeError as exc:
            return f"whether it may {verb} Nodes could not be asked ({exc})"
        if not (answer.get("status") or {}).get("allowed"):
            return f"it may not {verb} Nodes (RBAC: get, list and watch on nodes, in a ClusterRole)"
    return None


def register(registry: kopf.OperatorRegistry, notices: NodeNotices, changed: Callable[[str], None]) -> None:
    """The Node event handler on `registry`, once."""
    if id(registry) in _registered:
        return
    _registered.add(id(registry))

    @kopf.on.event("", "v1", "nodes", registry=registry)
    async def node_event(event: kopf.RawEvent, **_: Any) -> None:
        node = event["object"]
        name = str((node.get("metadata") or {}).get("name") or "")
        moved = notices.delete(name) if event["type"] == "DELETED" else notices.upsert(node)
        if moved:
            notice = notices.get(name)
            if notice is None:
                log.info("node %s: no disruption notice any more", name)
            else:
                log.info("node %s: disruption notice %s: %s", name, notice.source, notice.message)
            changed(name)


async def start(
    registry: kopf.OperatorRegistry,
    api: client.ApiClient,
    notices: NodeNotices,
    changed: Callable[[str], None],
) -> bool:
    """Watch the Nodes into `notices` (kopf starts the watch once the startup handlers are done);
    False, with a Warning logged, when this operator may not read them."""
    problem = await denied(api)
    if problem is not None:
        log.warning(
            "Nodes are not watched: %s. Node disruption notices (cordons, drains, cluster-autoscaler, "
            "Karpenter, spot and shutdown taints, --disruption-notice) are not seen; a pod's own "
            "DisruptionTarget condition still is (docs/disruptions.md)",
            problem,
        )
        return False
    register(registry, notices, changed)
    return True
