"""rayscale: run and autoscale Ray clusters on Kubernetes."""

from rayscale import slim_client

__version__ = "0.1.0"

slim_client.install()  # before any rayscale module imports kubernetes_asyncio
