"""A container's environment as a kubelet gives it: literal ``value``s, and ``valueFrom`` Secret and
ConfigMap keys read through the API server (``secretKeyRef``, ``configMapKeyRef``; a missing one
marked ``optional`` is left out). Other ``valueFrom`` sources (``fieldRef``, ``resourceFieldRef``)
name things of a real pod and are left out.

The Ray bridge gives a pod's Ray node only Ray's auth settings (`RAY_AUTH`: ``RAY_AUTH_MODE``,
``RAY_AUTH_TOKEN``, ...) of its Ray container: the rest of a Ray container's environment names
cluster Services that have no Ray here (``RAY_ADDRESS``, ``RAY_IP``). A submitter gets all of its
container's environment.

    env = await resolve(api, "ns", container, keep=is_ray_auth)   # on an event loop
    env = resolve_sync(kubeconfig, "ns", container, keep=is_ray_auth)   # on a thread without one
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

__all__ = [
    "RAY_AUTH",
    "EnvError",
    "is_ray_auth",
    "keep_all",
    "literal",
    "needs_api",
    "resolve",
    "resolve_sync",
]

RAY_AUTH = "RAY_AUTH_"  # the prefix of Ray's token auth settings (RAY_AUTH_MODE, RAY_AUTH_TOKEN)
_REFS = ("secretKeyRef", "configMapKeyRef")


class EnvError(RuntimeError):
    """A key the container needs cannot be read (a kubelet: CreateContainerConfigError)."""


def is_ray_auth(name: str) -> bool:
    return name.startswith(RAY_AUTH)


def keep_all(name: str) -> bool:
    return bool(name)


def _entries(container: Mapping[str, Any], keep: Callable[[str], bool]) -> list[Mapping[str, Any]]:
    return [e for e in container.get("env") or [] if keep(str(e.get("name") or ""))]


def needs_api(container: Mapping[str, Any], keep: Callable[[str], bool]) -> bool:
    """Whether a kept variable comes from a Secret or a ConfigMap."""
    return any(ref in (e.get("valueFrom") or {}) for e in _entries(container, keep) for ref in _REFS)


def literal(container: Mapping[str, Any], keep: Callable[[str], bool]) -> dict[str, str]:
    """The kept variables that have a literal value."""
    return {
        str(e["name"]): str(e.get("value") or "") for e in _entries(container, keep) if "valueFrom" not in e
    }


async def _key(api: client.ApiClient, namespace: str, source: Mapping[str, Any]) -> str | None:
    ref = source.get("secretKeyRef") or source.get("configMapKeyRef") or {}
    name, key = str(ref.get("name") or ""), str(ref.get("key") or "")
    core = client.CoreV1Api(api)
    try:
        if "secretKeyRef" in source:
            secret = await core.read_namespaced_secret(name, namespace)
            data = (secret.data or {}).get(key)
            value = None if data is None else base64.b64decode(data).decode()
        else:
            found = await core.read_namespaced_config_map(name, namespace)
            value = (found.data or {}).get(key)
    except ApiException as exc:
        if exc.status != 404:
            raise EnvError(f"reading {name}: {exc.status} {exc.reason}") from None
        value = None
    if value is None and not ref.get("optional"):
        raise EnvError(f"{'Secret' if 'secretKeyRef' in source else 'ConfigMap'} {name} has no key {key!r}")
    return value


async def resolve(
    api: client.ApiClient, namespace: str, container: Mapping[str, Any], *, keep: Callable[[str], bool]
) -> dict[str, str]:
    """The kept variables of `container` with their values; EnvError if a needed key is missing."""
    env = literal(container, keep)
    for entry in _entries(container, keep):
        source = entry.get("valueFrom") or {}
        if any(ref in source for ref in _REFS):
            value = await _key(api, namespace, source)
            if value is not None:
                env[str(entry["name"])] = value
    return env


def resolve_sync(
    kubeconfig: str, namespace: str, container: Mapping[str, Any], *, keep: Callable[[str], bool]
) -> dict[str, str]:
    """`resolve` for a thread that runs no event loop; the API is asked only when it must be."""

    async def run() -> dict[str, str]:
        cfg = client.Configuration()
        await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        async with client.ApiClient(configuration=cfg) as api:
            return await resolve(api, namespace, container, keep=keep)

    if not needs_api(container, keep):
        return literal(container, keep)
    try:
        return asyncio.run(run())
    except EnvError:
        raise
    except Exception as exc:  # the API server unreachable, a dropped connection
        raise EnvError(f"reading the container's environment: {exc!r}") from None
