"""How soon the RayJob controller reads a running Ray job again: every 2 s (one GCS key-value get)
while Ray's job runs, KubeRay's 3 s requeue otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from rayscale.rayjob import consts as C
from rayscale.rayjob import controller as rayjob_controller
from rayscale.rayjob.actions import Step
from rayscale.rayjob.controller import RayJobController
from rayscale.rayjob.index import RayJobIndex


@pytest.mark.parametrize(
    ("status", "requeue", "after"),
    [
        ({"jobDeploymentStatus": "Running", "jobStatus": "PENDING"}, 3.0, C.RUNNING_POLL_SECONDS),
        ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, 3.0, C.RUNNING_POLL_SECONDS),
        ({"jobDeploymentStatus": "Running", "jobStatus": "SUCCEEDED"}, 3.0, 3.0),  # ending: KubeRay's
        ({"jobDeploymentStatus": "Initializing", "jobStatus": "NEW"}, 3.0, 3.0),
        ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, 10.0, 10.0),  # a deadline's own
        ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, None, None),
    ],
)
async def test_a_running_ray_job_is_read_again_sooner_than_kuberays_requeue(
    monkeypatch: pytest.MonkeyPatch, status: dict[str, str], requeue: float | None, after: float | None
) -> None:
    index = RayJobIndex()
    index.rayjobs[("ns", "a")] = {"metadata": {"name": "a", "namespace": "ns"}, "status": status}
    controller = RayJobController(None, index, None, None, None)  # type: ignore[arg-type]

    async def world(job: Any) -> None:
        return None

    monkeypatch.setattr(controller, "world", world)
    monkeypatch.setattr(rayjob_controller, "plan", lambda _: Step(requeue=requeue))
    assert await controller.reconcile(("ns", "a")) == after
