"""What an API request is, as the client's metrics label it: its verb and resource (pure).

The verb is Kubernetes': ``get`` or ``list`` (a GET of one object or of a collection), ``create``,
``update``, ``patch``, ``delete`` or ``deletecollection``. The resource is the plural name, with
its subresource after a slash (``rayclusters/status``, ``pods/binding``); ``other`` for a path
that names none (discovery, ``/version``).
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["request_kind"]

VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def request_kind(method: str, url: str) -> tuple[str, str]:
    """(verb, resource) of a request to `url` (absolute, or a path)."""
    parts = [p for p in urlsplit(url).path.split("/") if p]
    # /api/v1/... or /apis/<group>/<version>/...
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:] if parts[:1] == ["apis"] else []
    if len(rest) > 2 and rest[0] == "namespaces":  # an object in a namespace (not the namespace)
        rest = rest[2:]
    if not rest:
        return VERBS.get(method.upper(), method.lower()), "other"
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    named = len(rest) >= 2
    upper = method.upper()
    if upper == "GET":
        verb = "get" if named else "list"
    elif upper == "DELETE":
        verb = "delete" if named else "deletecollection"
    else:
        verb = VERBS.get(upper, method.lower())
    return verb, resource
