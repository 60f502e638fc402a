"""Each RayJob's and RayCronJob's reconcile is a flow of its own in the client-side rate limit:
in one shared flow every RayJob's requests would be served after every RayCluster's (the fair
bucket serves the flow with the fewest waiting first), and a running job's status would wait
behind a fleet's creates."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest

from rayscale.common.retry import Failed
from rayscale.common.types import ClusterKey
from rayscale.kube import flow, rayjob_ops
from rayscale.rayjob import controller as rayjob_controller
from rayscale.rayjob.actions import Step
from rayscale.rayjob.controller import RayJobController
from rayscale.rayjob.cron_controller import RayCronJobController
from rayscale.rayjob.index import RayJobIndex


async def test_a_rayjob_reconciles_as_its_own_flow() -> None:
    controller = RayJobController(None, RayJobIndex(), None, None, None)  # type: ignore[arg-type]
    seen: list[Hashable] = []

    async def body(key: ClusterKey) -> float | Failed | None:
        seen.append(flow.current())
        return None

    controller._reconcile = body  # type: ignore[method-assign]
    await controller.reconcile(("ns", "a"))
    await controller.reconcile(("ns", "b"))
    assert seen == [("rayjob", "ns", "a"), ("rayjob", "ns", "b")]
    assert flow.current() is None
    assert flow.kind_of(seen[0]) == "rayjob"


async def test_a_raycronjob_reconciles_as_its_own_flow() -> None:
    controller: Any = RayCronJobController.__new__(RayCronJobController)
    seen: list[Hashable] = []

    async def body(key: ClusterKey) -> float | Failed | None:
        seen.append(flow.current())
        return None

    controller._reconcile = body
    await controller.reconcile(("ns", "nightly"))
    assert seen == [("raycronjob", "ns", "nightly")]
    assert flow.kind_of(seen[0]) == "raycronjob"


@pytest.mark.parametrize(
    ("before", "after", "flow_kind"),
    [
        ({"jobStatus": "PENDING", "jobDeploymentStatus": "Running"}, {"jobStatus": "RUNNING"}, "transition"),
        ({"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Running"}, {"jobDeploymentStatus": "Complete"},
         "transition"),
        ({"jobStatus": "RUNNING", "jobDeploymentStatus": "Running"}, {"message": "the cluster's status"},
         "rayjob"),
    ],
)  # fmt: skip
async def test_a_status_write_that_tells_a_new_state_is_a_transition(
    monkeypatch: pytest.MonkeyPatch, before: dict[str, str], after: dict[str, str], flow_kind: str
) -> None:
    index = RayJobIndex()
    index.rayjobs[("ns", "a")] = {"metadata": {"name": "a", "namespace": "ns"}, "status": before}
    controller = RayJobController(None, index, None, None, None)  # type: ignore[arg-type]
    written: list[str] = []

    async def world(job: Any) -> None:
        return None

    async def replace_status(api: Any, kind: Any, body: Any) -> Any:
        written.append(flow.kind_of(flow.current()))
        return body

    monkeypatch.setattr(controller, "world", world)
    monkeypatch.setattr(rayjob_controller, "plan", lambda _: Step(status={**before, **after}, requeue=3.0))
    monkeypatch.setattr(rayjob_ops, "replace_status", replace_status)
    await controller.reconcile(("ns", "a"))
    assert written == [flow_kind]
