"""Applying a plan stops creating pods once the RayCluster is being deleted (the API faked)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from raycluster_factory import cluster

from rayscale.controller.apply import PlanApplier
from rayscale.controller.expectations import ScaleExpectations
from rayscale.controller.plan import CreatePod, Step
from rayscale.kube import ops


class Events:
    def post(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, action: str = "") -> None:
        pass


async def test_no_pod_is_created_once_the_cluster_is_no_longer_wanted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    created: list[str] = []
    deleting = {"at": 5}  # the watch sees the deletion after the 5th create

    async def create_pod(api: Any, namespace: str, manifest: dict[str, Any]) -> str:
        created.append(manifest["metadata"]["generateName"])
        return f"pod-{len(created)}"

    monkeypatch.setattr(ops, "create_pod", create_pod)
    manifest = {"metadata": {"generateName": "rc-small-worker-", "namespace": "ns"}}
    steps = [Step("small", creates=[CreatePod("small", "worker", manifest) for _ in range(100)])]
    applier = PlanApplier(None, ScaleExpectations(), Events())  # type: ignore[arg-type]

    def wanted() -> bool:
        return len(created) < deleting["at"]

    assert await applier.run_steps(cluster(), steps, wanted) is None
    assert len(created) == 5
    assert await applier.run_steps(cluster(), steps) is None  # without `wanted`: every create
    assert len(created) == 105
