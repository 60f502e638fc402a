"""A worker group removed from the spec, or a lowered maxReplicas, with a real Ray: `rayscale run
--mode all` on the local control plane, the e2e Ray bridge (a real Ray head, a real ``ray start``
worker for each Running worker pod) and a Ray driver whose task blocks on a marker file until the
test lets it end.

1. **a removed group** whose one worker runs the task: its Ray node is drained
   (``DisruptionDrain``, the ``Disruption`` condition names the pod, ``group-removed``), the pod
   stays while the task runs, the task ends there (0 tasks failed), and only then does the
   autoscaler delete the pod (``DisruptionDelete``); nothing of the group is left, and the
   controller did not delete it at once (no ``WorkerGroupRemoved``);
2. **maxReplicas lowered** from 2 to 1 with one busy and one idle worker: the idle one goes, the
   busy one stays and its task runs on; lowered to 0 while the task still runs, the busy worker is
   drained (``max-replicas``), kept while busy and deleted once its task ended (0 tasks failed);
3. **rayscale.io/removal-drain-seconds: "20"**, a removed group's worker busy longer than that: the
   pod goes at the deadline, not before, and Ray runs the task again on the worker of the group
   that stays, where it ends (0 tasks lost).

Nothing sleeps: every wait polls with a deadline, and what must not happen is watched for
(`holds`) while it could.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from e2e.harness import NAME, group, raycluster
from e2e.raybridge.bridge import RayBridge
from e2e.raybridge.driver import RayDriver
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from rayscale.api.disruption_annotations import REMOVAL_DRAIN_ANNOTATION
from tests.support.kube import Kube, names
from tests.support.operators import AUTOSCALING_EXTRA, Operator, running
from tests.support.polling import eventually, holds
from tests.support.ray_tasks import bridge_for

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray 2.60 (the dev extra)"),
    pytest.mark.timeout(360),
]

START = 120.0  # a worker pod Running with its Ray node, on a busy 2-core machine
SETTLE = 60.0  # rayscale's rounds and the controller's work after a change
DEADLINE = 20  # the annotation's seconds in the third test


@pytest.fixture
def operator(
    cluster: testcluster.ClusterHandle, namespace: str, raycluster_crd: None, request: pytest.FixtureRequest
) -> Iterator[Operator]:
    """`rayscale run --mode all`, rounds every second."""
    yield from running(Operator(cluster, namespace, mode="all", extra=AUTOSCALING_EXTRA), request)


@pytest.fixture
def bridge(cluster: testcluster.ClusterHandle, namespace: str, tmp_path: Path) -> Iterator[RayBridge]:
    yield from bridge_for(cluster.kubeconfig, namespace, NAME, tmp_path / "ray")


class Scene:
    """The RayCluster, its Ray driver and the task that ends on cue."""

    def __init__(self, kube: Kube, ray: RayDriver, bridge: RayBridge, marker: Path) -> None:
        self.kube, self.ray, self.bridge, self.marker = kube, ray, bridge, marker

    async def workers(self, group: str | None = None) -> list[Any]:
        return await self.kube.workers(NAME, group=group, live=True)

    async def in_ray(self, count: int, group: str | None = None) -> set[str]:
        """The live workers (of `group`) when exactly `count` run with their Ray node, else empty."""
        pods = [p for p in await self.workers(group) if p.status.phase == "Running"]
        found = names(pods)
        return found if len(found) == count and found <= set(self.bridge.workers()) else set()

    async def start_task(self) -> None:
        await self.ray.call("task", name="t", marker=str(self.marker), num_cpus=1)
        started = Path(str(self.marker) + ".started")
        await eventually(started.exists, timeout=START, message="the task started on a worker")

    async def outcome(self) -> dict[str, Any]:
        found: dict[str, Any] = await self.ray.call("task_outcome", name="t")
        return found

    async def finished(self) -> bool:
        outcome = await self.outcome()
        assert outcome["state"] != "failed", outcome  # a lost task fails the test at once
        return bool(outcome["state"] == "done")

    async def events(self, reason: str) -> list[Any]:
        return [e for e in await self.kube.events(reason) if e.involved_object.name == NAME]

    async def condition(self) -> dict[str, Any] | None:
        auto = ((await self.kube.get(NAME)).get("status") or {}).get("autoscaler") or {}
        return next((c for c in auto.get("conditions") or [] if c.get("type") == "Disruption"), None)

    async def kept_while_busy(self, pod: str) -> bool:
        assert (await self.outcome())["state"] == "running"
        assert pod in names(await self.workers()), f"{pod} deleted while its task runs"
        return True

    async def gone(self, pod: str) -> bool:
        """Its deletion asked (it may still be terminating)."""
        return pod not in names(await self.workers())

    async def none_left(self, group: str) -> bool:
        """No pod of `group` left, terminating ones included: nothing orphaned."""
        return not await self.kube.workers(NAME, group=group)


@pytest.fixture
async def scene(
    api: client.ApiClient, namespace: str, bridge: RayBridge, operator: Operator, tmp_path: Path
) -> AsyncIterator[Scene]:
    async with RayDriver.start(bridge.gcs_address, tmp_path / "driver.log") as ray:
        made = Scene(Kube(api, namespace), ray, bridge, tmp_path / "release")
        yield made
        made.marker.touch()  # let a task still waiting end, so that the driver exits cleanly


TWO_GROUPS = [  # group keep without workers, group old with one: where the task runs
    group("keep", max_replicas=1),
    group("old", replicas=1, min_replicas=1, max_replicas=1),
]


REMOVE_OLD = [
    {"op": "test", "path": "/spec/workerGroupSpecs/1/groupName", "value": "old"},
    {"op": "remove", "path": "/spec/workerGroupSpecs/1"},
]


async def create(
    scene: Scene, groups: list[dict[str, Any]], annotations: dict[str, str] | None = None
) -> None:
    """The autoscaled RayCluster of `groups` on the bridge's Ray head (idle for 10 minutes first)."""
    gcs = scene.bridge.gcs_address
    await scene.kube.create(raycluster(gcs, groups, idle_timeout=600, annotations=annotations))


async def test_a_removed_groups_busy_worker_drains_and_goes_once_its_task_ends(scene: Scene) -> None:
    await create(scene, TWO_GROUPS)
    (worker,) = await eventually(lambda: scene.in_ray(1, "old"), timeout=START, message="old's worker in Ray")
    await scene.start_task()
    await scene.kube.patch_json(NAME, REMOVE_OLD)

    (drained,) = await eventually(
        lambda: scene.events("DisruptionDrain"), timeout=SETTLE, message="the drain"
    )
    assert f"pod {worker} of worker group old, no deadline" in drained.message
    assert "Worker group old was removed from the RayCluster's spec." in drained.message
    said = await eventually(scene.condition, timeout=SETTLE, message="the Disruption condition")
    assert said["reason"] == "Draining"
    assert f"{worker} (group-removed, no deadline)" in said["message"]

    await holds(lambda: scene.kept_while_busy(worker), seconds=5, message=f"{worker} kept while busy")
    assert await scene.events("DisruptionDelete") == []

    scene.marker.touch()  # the task ends on the drained node: 0 tasks failed
    await eventually(scene.finished, timeout=SETTLE, message="the task done")
    await eventually(lambda: scene.gone(worker), timeout=SETTLE, message=f"{worker} deleted once idle")
    (deleted,) = await eventually(
        lambda: scene.events("DisruptionDelete"), timeout=SETTLE, message="the Event"
    )
    assert f"Deleting pod {worker} of worker group old" in deleted.message
    await eventually(lambda: scene.none_left("old"), timeout=SETTLE, message="nothing of group old left")
    assert await scene.events("WorkerGroupRemoved") == []  # the controller left it to the drain
    await eventually(lambda: _no_condition(scene), timeout=SETTLE, message="the condition gone")


async def _no_condition(scene: Scene) -> bool:
    return await scene.condition() is None


async def test_lowering_max_replicas_takes_the_idle_worker_and_drains_the_busy_one(scene: Scene) -> None:
    await create(scene, [group("cpu", replicas=1, max_replicas=2)])
    (busy,) = await eventually(lambda: scene.in_ray(1), timeout=START, message="the first worker in Ray")
    await scene.start_task()  # the only worker with CPUs: the task runs there
    await scene.kube.set_group(NAME, 0, "replicas", 2)
    both = await eventually(lambda: scene.in_ray(2), timeout=START, message="a second, idle worker in Ray")
    (idle,) = both - {busy}

    await scene.kube.set_group(NAME, 0, "maxReplicas", 1)
    await eventually(lambda: scene.gone(idle), timeout=SETTLE, message=f"the idle {idle} removed")
    assert names(await scene.workers()) == {busy}
    assert (await scene.outcome())["state"] == "running"
    assert await scene.events("DisruptionDrain") == []  # within maxReplicas now: untouched

    await scene.kube.set_group(NAME, 0, "maxReplicas", 0)
    (drained,) = await eventually(
        lambda: scene.events("DisruptionDrain"), timeout=SETTLE, message="the drain"
    )
    assert f"pod {busy} of worker group cpu" in drained.message
    assert "more replicas than its maxReplicas (0) allows" in drained.message
    said = await eventually(scene.condition, timeout=SETTLE, message="the Disruption condition")
    assert f"{busy} (max-replicas, no deadline)" in said["message"]
    await holds(lambda: scene.kept_while_busy(busy), seconds=5, message=f"{busy} kept while busy")

    scene.marker.touch()
    await eventually(scene.finished, timeout=SETTLE, message="the task done: 0 tasks failed")
    await eventually(lambda: scene.gone(busy), timeout=SETTLE, message=f"{busy} deleted once idle")
    (deleted,) = await eventually(
        lambda: scene.events("DisruptionDelete"), timeout=SETTLE, message="the Event"
    )
    assert f"Deleting pod {busy} of worker group cpu" in deleted.message


async def test_at_the_annotations_deadline_the_busy_worker_goes_and_ray_runs_the_task_again(
    scene: Scene,
) -> None:
    await create(scene, TWO_GROUPS, {REMOVAL_DRAIN_ANNOTATION: str(DEADLINE)})
    (worker,) = await eventually(lambda: scene.in_ray(1, "old"), timeout=START, message="old's worker in Ray")
    await scene.start_task()
    removed = datetime.now(UTC)
    await scene.kube.patch_json(NAME, [  # group old goes; group keep gets a worker for the task
        *REMOVE_OLD,
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/minReplicas", "value": 1},
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
    ])  # fmt: skip

    (drained,) = await eventually(
        lambda: scene.events("DisruptionDrain"), timeout=SETTLE, message="the drain"
    )
    assert f"pod {worker} of worker group old, deadline " in drained.message
    await eventually(lambda: scene.in_ray(1, "keep"), timeout=START, message="keep's worker in Ray")

    await eventually(
        lambda: scene.gone(worker), timeout=DEADLINE + SETTLE, message=f"{worker} at the deadline"
    )
    (deleted,) = await eventually(
        lambda: scene.events("DisruptionDelete"), timeout=SETTLE, message="the Event"
    )
    assert "deadline" in deleted.message
    at = deleted.first_timestamp or deleted.event_time
    assert at >= removed + timedelta(seconds=DEADLINE - 1), (at, removed)  # not before the deadline

    # Ray runs the task again on keep's worker: it ends there once let go (0 tasks lost).
    scene.marker.touch()
    await eventually(scene.finished, timeout=START, message="the task done after the deadline")
    await eventually(lambda: scene.none_left("old"), timeout=SETTLE, message="nothing of group old left")
