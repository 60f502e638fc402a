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
    monkeypatch.setattr(rayjob_controller, "monotonic", lambda: 5.0)  # the reconcile took no time
    assert await controller.reconcile(("ns", "a")) == after


async def test_the_next_read_is_due_a_poll_period_after_this_read_not_after_the_reconcile_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reconcile that took 0.75 s after its read (a slow status write) asks for the next read
    1.25 s later: a status Ray changed waits for a read at most `RUNNING_POLL_SECONDS`; one that
    took longer than the period reads again at once."""
    status = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}
    index = RayJobIndex()
    index.rayjobs[("ns", "a")] = {"metadata": {"name": "a", "namespace": "ns"}, "status": status}
    controller = RayJobController(None, index, None, None, None)  # type: ignore[arg-type]
    now = [100.0]
    took = [0.75]

    async def world(job: Any) -> None:
        now[0] += took[0]  # the read, the plan and the write, all after the moment of the read
        return

    monkeypatch.setattr(controller, "world", world)
    monkeypatch.setattr(rayjob_controller, "plan", lambda _: Step(requeue=C.REQUEUE_SECONDS))
    monkeypatch.setattr(rayjob_controller, "monotonic", lambda: now[0])
    assert await controller.reconcile(("ns", "a")) == pytest.approx(C.RUNNING_POLL_SECONDS - 0.75)
    took[0] = C.RUNNING_POLL_SECONDS + 1.0
    assert await controller.reconcile(("ns", "a")) == 0.0
