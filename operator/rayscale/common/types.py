"""The type aliases every part of rayscale shares, defined once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ClusterKey", "Manifest", "Obj"]

Obj = Mapping[str, Any]
"""A Kubernetes object as read: a parsed JSON body, never changed in place."""

Manifest = dict[str, Any]
"""A Kubernetes object the operator builds to create, apply or patch."""

ClusterKey = tuple[str, str]
"""A RayCluster's (namespace, name)."""
