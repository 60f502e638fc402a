"""Idle RayClusters end, against a real Ray 2.60 head on this machine and `rayscale run --mode all`
on the local control plane.

Each RayCluster points rayscale at the head with ``rayscale.io/gcs-address`` (the operator runs
with ``--allow-gcs-address-override``) and opts in with ``rayscale.io/idle-termination-seconds``.
Drivers are ``ray.init()`` subprocesses (tests/support/raydriver.py) that stay attached until their
stdin closes. Nothing sleeps: every wait polls the API server with a deadline, and what must not
happen is watched for (`holds`) past the cluster's idle seconds.

1. A cluster with no work is suspended once it has been idle its seconds: ``spec.suspend: true``,
   a Normal ``IdleSuspended`` Event, the ``IdleTermination`` condition in ``status.autoscaler``.
2. A cluster with an attached driver is not touched, well past its seconds (condition ``Busy``).
3. Once that driver has ended, the clock starts, from the driver's end: the cluster is suspended.
Bad annotation values get a Warning Event and the condition, and nothing is touched. A RayJob's
cluster is kept until a job submission has ended on it (``AwaitingJob``), then suspended.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from e2e.raybridge import rayproc
from kubernetes_asyncio.client.exceptions import ApiException

from rayscale.common.timefmt import parse_time
from rayscale.ray.client import GcsClient, GcsError
from rayscale.ray.model import JobInfo
from tests.support.builders import example
from tests.support.kube import Kube
from tests.support.operators import Operator
from tests.support.polling import eventually, holds
from tests.support.raydriver import RAY_WAIT, driver

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray 2.60 (the dev extra)"),
    pytest.mark.timeout(600),
]

NAME = "raycluster-basic"
SECONDS = 4  # the clusters' idle seconds
SETTLE = 60.0  # rayscale's first rounds on a new cluster (controller, GCS dial) on a busy 2-core machine


@pytest.fixture(scope="module")
async def ray_head(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[rayproc.RayNode]:
    """A Ray head whose raylet has registered (its GCS alone may answer before). On a loaded
    machine ``ray start`` sometimes gives up on its own raylet and exits: it is started once more."""
    tails = []
    for _ in range(2):
        with rayproc.running_head(
            num_cpus=1, log_dir=tmp_path_factory.mktemp("ray-logs"), timeout=RAY_WAIT
        ) as head:
            if await _raylet_up(head):
                yield head
                return
            tails.append(head.log_tail())
    pytest.fail("the Ray head exited while starting, twice:\n" + "\n---\n".join(tails))


async def _raylet_up(head: rayproc.RayNode) -> bool:
    async with GcsClient(head.address, timeout=10) as gcs:

        async def up() -> str | None:
            if not head.running():
                return "exited"
            try:
                return "up" if await gcs.get_all_node_info(alive_only=True) else None
            except GcsError:  # still starting
                return None

        return (
            await eventually(up, timeout=RAY_WAIT, message="the Ray head's raylet alive in its GCS") == "up"
        )


def idle_cluster(gcs: str, **annotations: str) -> dict[str, Any]:
    body = example("raycluster-basic.yaml")
    body["metadata"]["annotations"] = {"rayscale.io/gcs-address": gcs, **annotations}
    body["spec"]["enableInTreeAutoscaling"] = True
    group = body["spec"]["workerGroupSpecs"][0]
    group["replicas"] = group["minReplicas"] = 0  # no worker pods: nothing for the autoscaler to move
    return body


OPTED_IN = {"rayscale.io/idle-termination-seconds": str(SECONDS)}


async def idle_condition(kube: Kube) -> dict[str, Any] | None:
    auto = ((await kube.get(NAME)).get("status") or {}).get("autoscaler") or {}
    found = [c for c in auto.get("conditions") or [] if c.get("type") == "IdleTermination"]
    return found[0] if found else None


async def suspended(kube: Kube) -> bool:
    return bool((await kube.get(NAME))["spec"].get("suspend") is True)


async def test_a_cluster_without_work_is_suspended_after_its_idle_seconds(
    kube: Kube, autoscaling_operator: Operator, ray_head: rayproc.RayNode
) -> None:
    created = datetime.now(UTC).replace(microsecond=0)
    await kube.create(idle_cluster(ray_head.address, **OPTED_IN))

    async def idle() -> dict[str, Any] | None:
        found = await idle_condition(kube)
        return found if found is not None and found["reason"] == "Idle" else None

    clock = await eventually(idle, timeout=SETTLE, message="the IdleTermination condition: Idle")
    assert clock["status"] == "True"
    since = parse_time(clock["lastTransitionTime"])
    assert since is not None
    assert since >= created
    assert "the cluster is suspended at" in clock["message"]

    await eventually(lambda: suspended(kube), timeout=SETTLE, message="spec.suspend: true")
    (event,) = await eventually(lambda: kube.events("IdleSuspended"), timeout=SETTLE, message="the Event")
    assert event.type == "Normal"
    assert f"idle for {SECONDS}s (since {clock['lastTransitionTime']}" in event.message

    async def says_suspended() -> dict[str, Any] | None:
        found = await idle_condition(kube)
        return found if found is not None and found["reason"] == "IdleSuspended" else None

    done = await eventually(says_suspended, timeout=SETTLE, message="the condition: IdleSuspended")
    assert (done["status"], done["message"]) == ("True", event.message)
    # rayscale's controller honours it: the head pod goes
    await eventually(lambda: _no_pods(kube), timeout=SETTLE, message="the cluster's pods deleted")


async def _no_pods(kube: Kube) -> bool:
    return not await kube.pods(NAME, live=True)


async def test_an_attached_driver_keeps_the_cluster_and_its_end_starts_the_clock(
    kube: Kube, autoscaling_operator: Operator, ray_head: rayproc.RayNode, tmp_path: Path
) -> None:
    async with driver(ray_head, "", tmp_path=tmp_path) as attached:  # ray.init(), then holds
        await kube.create(idle_cluster(ray_head.address, **OPTED_IN))

        async def busy() -> dict[str, Any] | None:
            found = await idle_condition(kube)
            return found if found is not None and found["reason"] == "Busy" else None

        seen = await eventually(busy, timeout=SETTLE, message="the IdleTermination condition: Busy")
        assert seen["status"] == "False"
        assert seen["message"] == "the cluster has work: 1 live driver(s) (ray.init)"

        async def untouched() -> bool:
            body = await kube.get(NAME)
            found = await idle_condition(kube)
            assert body["spec"].get("suspend") is not True, "suspended with a driver attached"
            assert found is not None
            return bool(found["reason"] == "Busy")

        # Three times the idle seconds: every round sees the driver; nothing is suspended.
        await holds(untouched, seconds=3 * SECONDS, message="the cluster kept, Busy, while the driver runs")
        assert await kube.events("IdleSuspended") == []
        alive = datetime.now(UTC)  # the driver is still attached now
        await attached.finish()

    async with GcsClient(ray_head.address, timeout=10) as gcs:  # what the clock read: the job's end

        async def ended() -> list[JobInfo] | None:
            jobs = [j for j in await gcs.get_all_job_info() if j.submission_id is None]
            return jobs if jobs and all(j.is_dead for j in jobs) else None

        jobs = await eventually(ended, timeout=RAY_WAIT, message="the driver dead in the GCS's job table")
    latest = max(jobs, key=lambda j: j.end_time_ms)
    assert 0 < latest.start_time_ms <= latest.end_time_ms
    assert latest.end_time_ms >= int(alive.timestamp() * 1000) - 1000  # it ended after it was seen alive

    await eventually(
        lambda: suspended(kube), timeout=SETTLE, message="spec.suspend: true once the driver ended"
    )
    (event,) = await eventually(lambda: kube.events("IdleSuspended"), timeout=SETTLE, message="the Event")
    found = re.search(r"\(since (\S+Z):", event.message)
    assert found is not None, event.message
    since = parse_time(found.group(1))
    assert since is not None
    # The clock started once the driver had ended (the GCS's end time, or the first round after
    # it), not while it ran; the message's time is in whole seconds.
    assert since >= alive - timedelta(seconds=1), (since, alive)


async def test_bad_annotations_are_refused_with_a_warning_and_nothing_is_touched(
    kube: Kube, autoscaling_operator: Operator, ray_head: rayproc.RayNode
) -> None:
    await kube.create(idle_cluster(ray_head.address, **{"rayscale.io/idle-termination-seconds": "-3"}))
    (warning,) = await eventually(
        lambda: kube.events("InvalidIdleTermination"), timeout=SETTLE, message="the Warning"
    )
    assert warning.type == "Warning"
    assert 'rayscale.io/idle-termination-seconds="-3" is not a whole number' in warning.message

    async def refused() -> dict[str, Any] | None:
        found = await idle_condition(kube)
        return found if found is not None and found["reason"] == "InvalidAnnotation" else None

    found = await eventually(refused, timeout=SETTLE, message="the condition: InvalidAnnotation")
    assert (found["status"], found["message"]) == ("False", warning.message)

    async def untouched() -> bool:
        return not await suspended(kube)

    await holds(untouched, seconds=2 * SECONDS, message="the cluster not suspended")
    assert len(await kube.events("InvalidIdleTermination")) == 1  # once, not every round


async def _gone(kube: Kube) -> bool:
    try:
        await kube.get(NAME)
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


async def test_a_cluster_rayscale_does_not_autoscale_is_deleted_when_asked(
    kube: Kube, autoscaling_operator: Operator, ray_head: rayproc.RayNode
) -> None:
    body = idle_cluster(ray_head.address, **OPTED_IN, **{"rayscale.io/idle-termination-action": "delete"})
    body["spec"]["enableInTreeAutoscaling"] = False  # rayscale reads its GCS for the idle clock alone

    async def idle() -> dict[str, Any] | None:
        auto = ((await kube.get(NAME)).get("status") or {}).get("autoscaler") or {}
        return auto if [c.get("reason") for c in auto.get("conditions") or []] == ["Idle"] else None

    await kube.create(body)
    only = await eventually(idle, timeout=SETTLE, message="status.autoscaler: the Idle condition alone")
    assert set(only) == {"conditions"}  # not autoscaled: no decision, groups or GCS health
    assert "the cluster is deleted at" in only["conditions"][0]["message"]
    await eventually(lambda: _gone(kube), timeout=SETTLE, message="the RayCluster deleted")
    (event,) = await eventually(lambda: kube.events("IdleDeleted"), timeout=SETTLE, message="the Event")
    assert event.type == "Normal"
    assert f"idle for {SECONDS}s" in event.message
    assert event.message.endswith("deleted as rayscale.io/idle-termination-seconds asks")


RESTART_SECONDS = 20  # long enough for the operator to be stopped and started inside it


async def test_the_clock_survives_an_operator_restart(
    kube: Kube, autoscaling_operator: Operator, ray_head: rayproc.RayNode
) -> None:
    body = idle_cluster(ray_head.address, **{"rayscale.io/idle-termination-seconds": str(RESTART_SECONDS)})
    await kube.create(body)

    async def idle() -> dict[str, Any] | None:
        found = await idle_condition(kube)
        return found if found is not None and found["reason"] == "Idle" else None

    clock = await eventually(idle, timeout=SETTLE, message="the IdleTermination condition: Idle")
    autoscaling_operator.stop()  # SIGTERM; a new operator process starts with no memory
    assert not await suspended(kube)
    autoscaling_operator.start()
    await eventually(lambda: suspended(kube), timeout=SETTLE + RESTART_SECONDS, message="spec.suspend: true")
    (event,) = await eventually(lambda: kube.events("IdleSuspended"), timeout=SETTLE, message="the Event")
    # The new operator counted from the clock the first one wrote, not from its own first look.
    assert f"(since {clock['lastTransitionTime']}:" in event.message, (clock, event.message)


DETACHED = """
@ray.remote(num_cpus=0)
class Keeper:
    def ping(self):
        return "pong"

keeper = Keeper.options(name="idle-keeper", namespace="idle", lifetime="detached").remote()
assert ray.get(keeper.ping.remote(), timeout=120) == "pong"
"""
KILL = 'ray.kill(ray.get_actor("idle-keeper", namespace="idle"))'


async def test_a_detached_actor_outliving_its_driver_keeps_the_cluster(
    kube: Kube, autoscaling_operator: Operator, ray_head: rayproc.RayNode, tmp_path: Path
) -> None:
    """What a Ray Serve application looks like to the GCS: a detached actor whose driver is gone."""
    async with driver(ray_head, DETACHED, tmp_path=tmp_path, tail=""):
        pass  # the driver exits; its actor lives on
    await kube.create(idle_cluster(ray_head.address, **OPTED_IN))

    async def busy() -> dict[str, Any] | None:
        found = await idle_condition(kube)
        return found if found is not None and found["reason"] == "Busy" else None

    seen = await eventually(busy, timeout=SETTLE, message="the IdleTermination condition: Busy")
    assert seen["message"] == "the cluster has work: 1 live detached actor(s)"

    await kept_until(kube, ray_head, tmp_path, KILL, seconds=2 * SECONDS, while_="the actor lives")


async def kept_until(
    kube: Kube, ray_head: rayproc.RayNode, tmp_path: Path, code: str, *, seconds: float, while_: str
) -> None:
    """The cluster not suspended for `seconds` (`while_` says why), then, once a driver has run
    `code`, suspended."""

    async def untouched() -> bool:
        assert not await suspended(kube), f"suspended while {while_}"
        return True

    await holds(untouched, seconds=seconds, message=f"the cluster kept while {while_}")
    async with driver(ray_head, code, tmp_path=tmp_path, tail=""):
        pass
    await eventually(lambda: suspended(kube), timeout=SETTLE, message="spec.suspend: true, after")


RAYJOB_ORIGIN = {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "nightly"}
# What Ray's job manager leaves in the GCS once a submission has ended (the head runs no dashboard).
ENDED_SUBMISSION = """
import json, time
from ray.experimental.internal_kv import _internal_kv_put
record = {"status": "SUCCEEDED", "entrypoint": "python job.py", "start_time": int(time.time() * 1000) - 1000,
          "end_time": int(time.time() * 1000)}
_internal_kv_put(b"_ray_internal_job_info_nightly-x", json.dumps(record).encode(), namespace=b"job")
"""


async def test_a_rayjobs_cluster_is_kept_until_a_job_submission_has_ended_on_it(
    kube: Kube, autoscaling_operator: Operator, ray_head: rayproc.RayNode, tmp_path: Path
) -> None:
    """A RayJob's cluster has no work between its head being ready and its job's submission; it
    is not ended then (its RayJob needs it), only once a submission has ended. Last in this file:
    the ended submission stays in the shared head's GCS."""
    body = idle_cluster(ray_head.address, **OPTED_IN)
    body["metadata"]["labels"] = {**(body["metadata"].get("labels") or {}), **RAYJOB_ORIGIN}
    await kube.create(body)

    async def awaiting() -> dict[str, Any] | None:
        found = await idle_condition(kube)
        return found if found is not None and found["reason"] == "AwaitingJob" else None

    seen = await eventually(awaiting, timeout=SETTLE, message="the IdleTermination condition: AwaitingJob")
    assert seen["status"] == "False"
    assert seen["message"].startswith("the cluster is RayJob nightly's and no job submission has ended")

    await kept_until(
        kube, ray_head, tmp_path, ENDED_SUBMISSION, seconds=3 * SECONDS, while_="no job ran on it"
    )
