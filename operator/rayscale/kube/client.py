"""A configured kubernetes-asyncio ApiClient: in-cluster, or $KUBECONFIG / ~/.kube/config.

With ``qps > 0`` every request it sends first takes a token from a TokenBucket (``--kube-api-qps``
and ``--kube-api-burst``). kopf's own watches and patches use kopf's session, not this client, and
are not limited.
"""

from __future__ import annotations

import os
from typing import Any

from kubernetes_asyncio import client, config

from rayscale.kube.ratelimit import TokenBucket


class RateLimitedApiClient(client.ApiClient):
    """An ApiClient whose every request waits for a token of `bucket` first."""

    def __init__(self, configuration: client.Configuration, bucket: TokenBucket) -> None:
        super().__init__(configuration=configuration)
        self.bucket = bucket

    async def request(self, *args: Any, **kwargs: Any) -> Any:
        await self.bucket.take()
        return await super().request(*args, **kwargs)


async def make_api_client(
    kubeconfig: str | None = None, *, qps: float = 0.0, burst: int = 0
) -> client.ApiClient:
    """The client; `qps` <= 0 means no client-side limit (`burst` is then ignored)."""
    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        await config.load_kube_config(config_file=path, client_configuration=cfg)
    cfg.connection_pool_maxsize = 64
    if qps > 0:
        return RateLimitedApiClient(cfg, TokenBucket(qps, burst))
    return client.ApiClient(configuration=cfg)
