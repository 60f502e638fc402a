"""RayResourceRequest (rayscale.io/v1alpha1): a declarative ``request_resources`` for one cluster.

Capacity reserved from outside Ray. Each RayResourceRequest is its own all-or-nothing unit
(``<namespace>/<name>``), placed after Ray's own ``request_resources`` bundles (which count the
head's capacity), so one request that cannot be met never blocks another.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rayscale.api.schema import KubeModel, Quantity

Phase = Literal["Pending", "Satisfied", "Unsatisfiable"]


class Bundle(KubeModel):
    """``count`` bundles of ``resources``: Ray resource names, memory as bytes or a quantity."""

    resources: dict[str, Quantity] = Field(json_schema_extra={"minProperties": 1})
    count: int = Field(default=1, ge=1, json_schema_extra={"format": "int32", "default": 1})


class RayResourceRequestSpec(KubeModel):
    """What to reserve, and on which RayCluster of the same namespace."""

    cluster_name: str = Field(min_length=1)
    bundles: list[Bundle] = Field(min_length=1)


class RayResourceRequestStatus(KubeModel):
    """Whether the cluster can hold every bundle, and why not (the scheduler's unmet reason)."""

    phase: Phase | None = None
    reason: str | None = None
    message: str | None = None
    observed_generation: int | None = Field(default=None, json_schema_extra={"format": "int64"})


__all__ = ["Bundle", "Phase", "RayResourceRequestSpec", "RayResourceRequestStatus"]
