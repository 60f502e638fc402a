"""A configured kubernetes-asyncio ApiClient: in-cluster, or $KUBECONFIG / ~/.kube/config."""

from __future__ import annotations

import os

from kubernetes_asyncio import client, config


async def make_api_client(
    kubeconfig: str | None = None, *, qps: float = 0.0, burst: int = 0
) -> client.ApiClient:
    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        await config.load_kube_config(config_file=path, client_configuration=cfg)
    cfg.connection_pool_maxsize = 64
    return client.ApiClient(configuration=cfg)
