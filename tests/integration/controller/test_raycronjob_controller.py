"""The RayCronJob controller on a real API server, with `rayscale run --mode controller`. The RayJobs
it makes are suspended (their template says so), so the RayJob controller parks them and nothing
else runs. Checked here: one RayJob per tick of an ``@every 3s`` schedule (KubeRay's syntax), named
from its tick, labelled, annotated and owned as KubeRay makes them, ``lastScheduleTime`` written;
``suspend: true`` stops the creates (and says so in an Event); an operator SIGKILLed at a tick and
started again makes no second RayJob for it (the tick's RayJob made before the operator starts,
as a killed operator that created it and never wrote the status leaves it, is taken as made; and
a real kill right after a create); a bad schedule or an unknown spec.timeZone is SpecValid=False
and a Warning Event, and nothing is made until it is fixed; created suspended, nothing until
resumed. And the controller alone (in this process, its RayJob index empty) meeting AlreadyExists
at a tick: its own RayJob counts as made, another's is refused with a Warning. The plan's every
rule is the unit tests'."""

from __future__ import annotations

import copy
import itertools
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hack.localk8s import testcluster
from kubernetes_asyncio import client

from rayscale.api.names import RAYCRONJOB, RAYJOB
from rayscale.common.retry import Failed
from rayscale.common.timefmt import parse_time
from rayscale.rayjob.cron import (
    EV_INVALID_SPEC,
    EV_NAME_TAKEN,
    EV_SUSPENDED,
    NAME_LABEL,
    TIMESTAMP_ANNOTATION,
    rayjob_name,
)
from rayscale.rayjob.cron_controller import RayCronJobController
from rayscale.rayjob.cron_schedule import next_tick, parse_standard
from rayscale.rayjob.index import RayJobIndex
from tests.support.builders import example
from tests.support.kube import Kube
from tests.support.operators import Operator
from tests.support.polling import eventually, holds

pytestmark = pytest.mark.integration
PROMPTLY = 90
MERGE = "application/merge-patch+json"


def template() -> dict[str, Any]:
    cluster = example("raycluster-basic.yaml")
    return {
        "entrypoint": "python -c 'print(1)'",
        "rayClusterSpec": copy.deepcopy(cluster["spec"]),
        "shutdownAfterJobFinishes": True,
        "suspend": True,  # the RayJob controller makes nothing for it
    }


def raycronjob(name: str, schedule: str, **spec: Any) -> dict[str, Any]:
    body = {"schedule": schedule, "jobTemplate": template(), **spec}
    return {**RAYCRONJOB.type_meta(), "metadata": {"name": name}, "spec": body}


@pytest.fixture
def stopped_operator(
    cluster: testcluster.ClusterHandle, namespace: str, raycluster_crd: None, request: pytest.FixtureRequest
) -> Iterator[Operator]:
    """`rayscale run --mode controller` for the namespace, not started; stopped at teardown."""
    op = Operator(cluster, namespace)
    try:
        yield op
    finally:
        op.stop()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print(f"--- rayscale log ({op.log}) ---\n{op.output()}")
        op.log.unlink(missing_ok=True)


async def rayjobs(api: client.ApiClient, namespace: str, cron: str) -> list[dict[str, Any]]:
    objects: Any = client.CustomObjectsApi(api)
    found = await objects.list_namespaced_custom_object(
        *RAYJOB.at(namespace), label_selector=f"{NAME_LABEL}={cron}"
    )
    items: list[dict[str, Any]] = found["items"]
    return items


async def get_cron(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    objects: Any = client.CustomObjectsApi(api)
    found: dict[str, Any] = await objects.get_namespaced_custom_object(*RAYCRONJOB.at(namespace), name)
    return found


def tick_of(job: dict[str, Any]) -> datetime:
    stamp = parse_time(job["metadata"]["annotations"][TIMESTAMP_ANNOTATION])
    assert stamp is not None
    return stamp


def one_per_tick(jobs: list[dict[str, Any]]) -> bool:
    counts = Counter(job["metadata"]["annotations"][TIMESTAMP_ANNOTATION] for job in jobs)
    assert all(n == 1 for n in counts.values()), counts
    return True


async def test_a_rayjob_per_tick_then_suspend_stops_them(
    api: client.ApiClient, kube: Kube, namespace: str, operator: Operator
) -> None:
    objects: Any = client.CustomObjectsApi(api)
    cron = await objects.create_namespaced_custom_object(
        *RAYCRONJOB.at(namespace), raycronjob("cron", "@every 3s")
    )
    uid = cron["metadata"]["uid"]

    async def three() -> list[dict[str, Any]] | None:
        jobs = await rayjobs(api, namespace, "cron")
        return jobs if len(jobs) >= 3 else None

    jobs = await eventually(three, timeout=PROMPTLY, message="three RayJobs")
    one_per_tick(jobs)
    ticks = sorted(tick_of(job) for job in jobs)
    assert all(later - earlier >= timedelta(seconds=3) for earlier, later in itertools.pairwise(ticks))
    for job in jobs:
        meta = job["metadata"]
        assert meta["name"] == rayjob_name("cron", tick_of(job))
        assert meta["labels"][NAME_LABEL] == "cron"
        [owner] = meta["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "RayCronJob",
            "cron",
            uid,
            True,
        )
        assert job["spec"]["entrypoint"] == template()["entrypoint"]
    status = (await get_cron(api, namespace, "cron"))["status"]
    last = parse_time(status["lastScheduleTime"])
    assert last is not None
    assert last >= ticks[0]

    await objects.patch_namespaced_custom_object(
        *RAYCRONJOB.at(namespace), "cron", {"spec": {"suspend": True}}, _content_type=MERGE
    )
    events = await eventually(lambda: kube.events(EV_SUSPENDED), timeout=PROMPTLY, message="the Event")
    assert events[0].type == "Normal"
    assert events[0].message == "RayCronJob suspended, no new RayJobs will be created"
    count = len(await rayjobs(api, namespace, "cron"))

    async def no_more() -> bool:
        return len(await rayjobs(api, namespace, "cron")) == count

    await holds(no_more, seconds=10, message="no RayJob while suspended (three ticks)")

    await objects.patch_namespaced_custom_object(
        *RAYCRONJOB.at(namespace), "cron", {"spec": {"suspend": False}}, _content_type=MERGE
    )

    async def resumed() -> list[dict[str, Any]] | None:
        jobs = await rayjobs(api, namespace, "cron")
        return jobs if len(jobs) > count else None

    one_per_tick(await eventually(resumed, timeout=PROMPTLY, message="RayJobs again after resuming"))


async def test_a_restart_at_a_tick_makes_no_second_rayjob(
    api: client.ApiClient, namespace: str, stopped_operator: Operator
) -> None:
    objects: Any = client.CustomObjectsApi(api)
    cron = await objects.create_namespaced_custom_object(
        *RAYCRONJOB.at(namespace), raycronjob("cron", "@every 4s")
    )
    # The operator that created the first tick's RayJob was killed before it wrote lastScheduleTime:
    # the RayJob is there, the status is not.
    created = parse_time(cron["metadata"]["creationTimestamp"])
    assert created is not None
    first = created + timedelta(seconds=4)
    name = rayjob_name("cron", first)
    made_before = {
        **RAYJOB.type_meta(),
        "metadata": {
            "name": name,
            "labels": {NAME_LABEL: "cron"},
            "annotations": {
                TIMESTAMP_ANNOTATION: first.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "test/made": "before",
            },
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "kind": "RayCronJob",
                    "name": "cron",
                    "uid": cron["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template(),
    }
    await objects.create_namespaced_custom_object(*RAYJOB.at(namespace), made_before)
    stopped_operator.start()

    async def scheduled() -> dict[str, Any] | None:
        status = (await get_cron(api, namespace, "cron")).get("status") or {}
        last = parse_time(status.get("lastScheduleTime"))
        return status if last is not None and last >= first else None

    await eventually(scheduled, timeout=PROMPTLY, message="lastScheduleTime written for the first tick")

    async def two() -> list[dict[str, Any]] | None:
        jobs = await rayjobs(api, namespace, "cron")
        return jobs if len(jobs) >= 2 else None

    jobs = await eventually(two, timeout=PROMPTLY, message="the next tick's RayJob")
    one_per_tick(jobs)
    [kept] = [job for job in jobs if job["metadata"]["name"] == name]
    assert kept["metadata"]["annotations"]["test/made"] == "before"

    # A real SIGKILL right after a create (before or after its status write), then a restart.
    stopped_operator.kill()
    count = len(await rayjobs(api, namespace, "cron"))
    stopped_operator.start()

    async def more() -> list[dict[str, Any]] | None:
        jobs = await rayjobs(api, namespace, "cron")
        return jobs if len(jobs) >= count + 1 else None

    jobs = await eventually(more, timeout=PROMPTLY, message="a RayJob after the restart")
    stopped_operator.kill()
    one_per_tick(jobs)
    stopped_operator.start()
    jobs = await eventually(more, timeout=PROMPTLY, message="RayJobs after the second restart")

    async def another() -> list[dict[str, Any]] | None:
        now = await rayjobs(api, namespace, "cron")
        return now if len(now) > len(jobs) else None

    one_per_tick(await eventually(another, timeout=PROMPTLY, message="a RayJob after the second restart"))


@pytest.mark.parametrize(
    ("spec", "problem", "fix"),
    [
        (
            {"schedule": "every day"},
            "invalid cron schedule: expected exactly 5 fields, found 2: [every day]",
            {"schedule": "@every 2s"},
        ),
        (
            {"schedule": "@every 2s", "timeZone": "Mars/Olympus"},
            "invalid spec.timeZone: unknown time zone Mars/Olympus",
            {"timeZone": "Europe/Berlin"},
        ),
    ],
    ids=["schedule", "time-zone"],
)
async def test_bad_input_is_a_condition_and_a_warning(
    api: client.ApiClient,
    kube: Kube,
    namespace: str,
    operator: Operator,
    spec: dict[str, str],
    problem: str,
    fix: dict[str, str],
) -> None:
    objects: Any = client.CustomObjectsApi(api)
    body = raycronjob("bad", spec["schedule"], **{k: v for k, v in spec.items() if k != "schedule"})
    await objects.create_namespaced_custom_object(*RAYCRONJOB.at(namespace), body)

    async def refused() -> dict[str, Any] | None:
        status = (await get_cron(api, namespace, "bad")).get("status") or {}
        found = [c for c in status.get("conditions") or [] if c["type"] == "SpecValid"]
        return found[0] if found else None

    condition = await eventually(refused, timeout=PROMPTLY, message="SpecValid=False")
    assert condition["status"] == "False"
    assert condition["reason"] == EV_INVALID_SPEC
    assert condition["message"] == problem
    events = await eventually(lambda: kube.events(EV_INVALID_SPEC), timeout=PROMPTLY, message="the Event")
    assert events[0].type == "Warning"
    assert events[0].message == f"{namespace}/bad: {problem}"
    assert await rayjobs(api, namespace, "bad") == []

    await objects.patch_namespaced_custom_object(
        *RAYCRONJOB.at(namespace), "bad", {"spec": fix}, _content_type=MERGE
    )

    async def healed() -> bool:
        return await refused() is None and len(await rayjobs(api, namespace, "bad")) >= 1

    await eventually(healed, timeout=PROMPTLY, message="the condition gone and a RayJob made")


async def test_created_suspended_makes_nothing_until_resumed(
    api: client.ApiClient, namespace: str, operator: Operator
) -> None:
    """KubeRay's e2e TestRayCronJobSuspend, on an ``@every 2s`` schedule instead of every minute."""
    objects: Any = client.CustomObjectsApi(api)
    body = raycronjob("sleepy", "@every 2s", suspend=True)
    await objects.create_namespaced_custom_object(*RAYCRONJOB.at(namespace), body)

    async def none() -> bool:
        return await rayjobs(api, namespace, "sleepy") == []

    await holds(none, seconds=8, message="no RayJob while suspended (four ticks)")
    await objects.patch_namespaced_custom_object(
        *RAYCRONJOB.at(namespace), "sleepy", {"spec": {"suspend": False}}, _content_type=MERGE
    )

    async def some() -> list[dict[str, Any]] | None:
        jobs = await rayjobs(api, namespace, "sleepy")
        return jobs or None

    jobs = await eventually(some, timeout=PROMPTLY, message="a RayJob once resumed")
    one_per_tick(jobs)


class _Posted:
    """An EventSink that keeps what is posted."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def post(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, action: str = "") -> None:
        del obj, action
        self.events.append((type_, reason, message))


async def test_already_exists_is_done_for_its_own_rayjob_and_refused_for_anothers(
    api: client.ApiClient, namespace: str, raycluster_crd: None
) -> None:
    """The controller alone, in this process, its RayJob index empty (as right after a start,
    before the RayJobs are listed), at the first tick: the create meets a RayJob of the tick's name.
    Another's is refused (a Warning, no status written, retried); its own counts as made."""
    objects: Any = client.CustomObjectsApi(api)
    cron = await objects.create_namespaced_custom_object(
        *RAYCRONJOB.at(namespace), raycronjob("cron", "*/5 * * * *")
    )
    created = parse_time(cron["metadata"]["creationTimestamp"])
    assert created is not None
    tick = next_tick(parse_standard("*/5 * * * *"), created, ZoneInfo("UTC"))
    assert tick is not None
    name = rayjob_name("cron", tick)
    stranger: dict[str, Any] = {**RAYJOB.type_meta(), "metadata": {"name": name}, "spec": template()}
    await objects.create_namespaced_custom_object(*RAYJOB.at(namespace), stranger)
    posted = _Posted()
    controller = RayCronJobController(api, RayJobIndex(), posted, clock=lambda: tick + timedelta(seconds=1))
    controller.cronjob_event("ADDED", cron)

    outcome = await controller.reconcile((namespace, "cron"))
    assert isinstance(outcome, Failed)
    message = f"RayJob {namespace}/{name} exists and is not this RayCronJob's"
    assert posted.events == [("Warning", EV_NAME_TAKEN, message)]
    assert "lastScheduleTime" not in ((await get_cron(api, namespace, "cron")).get("status") or {})

    ours = copy.deepcopy(stranger)
    ours["metadata"]["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayCronJob", "name": "cron", "uid": cron["metadata"]["uid"]}
    ]
    await objects.delete_namespaced_custom_object(*RAYJOB.at(namespace), name)

    async def gone() -> bool:
        return all(job["metadata"]["name"] != name for job in await rayjobs_all(api, namespace))

    await eventually(gone, timeout=PROMPTLY, message="the stranger deleted")
    await objects.create_namespaced_custom_object(*RAYJOB.at(namespace), ours)
    outcome = await controller.reconcile((namespace, "cron"))
    assert isinstance(outcome, float)
    assert outcome == pytest.approx(299.0)
    status = (await get_cron(api, namespace, "cron"))["status"]
    assert parse_time(status["lastScheduleTime"]) == tick + timedelta(seconds=1)
    assert [job["metadata"]["name"] for job in await rayjobs_all(api, namespace)] == [name]


async def rayjobs_all(api: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    objects: Any = client.CustomObjectsApi(api)
    items: list[dict[str, Any]] = (await objects.list_namespaced_custom_object(*RAYJOB.at(namespace)))[
        "items"
    ]
    return items
