"""Adapters to the Kubernetes API (kubernetes-asyncio): client setup, object operations, events."""
