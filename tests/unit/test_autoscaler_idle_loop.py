"""Idle termination through the autoscaler's loop (rayscale.autoscaler.idle_apply), in virtual time
with the API and the GCS faked: the clock's end forces a full round between quiet GCS reads, the
suspension is one generation-guarded JSON patch and a Normal Event, a refused patch is decided again,
a GCS that does not answer the jobs keeps the cluster, and a cluster rayscale does not autoscale
gets its condition alone."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import cluster, group, rc, rrr
from tests.support.fakes import KEY, FakeGcs, LoopClock, autoscaler, gcs_state
from tests.support.fakes import EventLog as Events
from tests.support.fakes import FakeApi as Api
from tests.support.fakes import FakeSource as Source

from rayscale.autoscaler.loop import Autoscaler
from rayscale.kube import ops
from rayscale.ray import model as ray
from rayscale.ray.client import GcsUnavailable

SECONDS = 10
SUSPEND = [  # guarded: the spec and the opt-in as the decision read them
    {"op": "test", "path": "/metadata/generation", "value": 1},
    {"op": "test", "path": "/metadata/annotations/rayscale.io~1idle-termination-seconds", "value": "10"},
    {"op": "add", "path": "/spec/suspend", "value": True},
]


class Jobs:
    """What the faked GCS answers about jobs; `fail`: GetAllJobInfo does not answer."""

    jobs: list[ray.JobInfo] = []
    submissions: dict[str, ray.SubmissionInfo] = {}
    fail = False


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Api:
    found = Api(monkeypatch)
    FakeGcs.state = gcs_state()
    Jobs.jobs, Jobs.submissions, Jobs.fail = [], {}, False

    async def jobs(self: FakeGcs) -> list[ray.JobInfo]:
        self._call("GetAllJobInfo")
        if Jobs.fail:
            raise GcsUnavailable(self.address, "GetAllJobInfo", "UNAVAILABLE", "down")
        return list(Jobs.jobs)

    async def submissions(self: FakeGcs) -> dict[str, ray.SubmissionInfo]:
        self._call("InternalKVKeys")
        return dict(Jobs.submissions)

    async def actors(self: FakeGcs, *, state: str | None = None) -> list[ray.ActorInfo]:
        self._call("GetAllActorInfo")
        return []

    monkeypatch.setattr(FakeGcs, "get_all_job_info", jobs, raising=False)
    monkeypatch.setattr(FakeGcs, "list_submissions", submissions, raising=False)
    monkeypatch.setattr(FakeGcs, "get_all_actor_info", actors, raising=False)
    return found


def opted_in(body: dict[str, Any], **more: str) -> dict[str, Any]:
    body["metadata"]["annotations"] = {"rayscale.io/idle-termination-seconds": str(SECONDS), **more}
    return body


class Deletes:
    """The RayCluster DELETEs sent, with their preconditions; `refusals` are raised first, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[tuple[str, str], dict[str, str] | None]] = []
        self.refusals: list[ops.KubeError] = []
        self.gone = False  # the API server answers 404: deleted by someone else meanwhile

    async def __call__(
        self, api: Any, kind: Any, namespace: str, name: str, *, preconditions: dict[str, str] | None = None
    ) -> bool:
        if self.refusals:
            raise self.refusals.pop(0)
        self.sent.append(((namespace, name), preconditions))
        return not self.gone


@pytest.fixture
def deletes(monkeypatch: pytest.MonkeyPatch) -> Deletes:
    found = Deletes()
    monkeypatch.setattr("rayscale.kube.rayjob_ops.delete_custom", found)
    return found


def to_delete() -> dict[str, Any]:
    """A cluster rayscale does not autoscale, opted in to be deleted, as a watch gives it."""
    body = opted_in(cluster(group("a", replicas=0)), **{"rayscale.io/idle-termination-action": "delete"})
    body["metadata"]["resourceVersion"] = "7"
    return body


async def run_for(scaler: Autoscaler, clock: LoopClock, seconds: int) -> None:
    """A step of the loop every virtual second, for `seconds`."""
    for _ in range(seconds):
        await scaler.step(KEY)
        clock.advance(1)


def idle_condition(api: Api) -> dict[str, Any] | None:
    """The IdleTermination condition the latest status.autoscaler write carried."""
    for status in reversed(api.cluster_statuses):
        conditions = ((status or {}).get("autoscaler") or {}).get("conditions")
        if conditions is not None:
            return next((c for c in conditions if c.get("type") == "IdleTermination"), None)
    return None


def driver(*, dead: bool) -> ray.JobInfo:
    return ray.JobInfo("01000000", dead, None, None, "python", end_time_ms=0)


async def test_the_clocks_end_forces_a_full_round_that_suspends(api: Api) -> None:
    events, clock = Events(), LoopClock()
    scaler = autoscaler(Source(opted_in(rc(group("a", replicas=0)))), events, clock, poll=1)
    assert await scaler.step(KEY) == 1  # the next GCS read in a second
    started = idle_condition(api)
    assert started is not None
    assert (started["status"], started["reason"]) == ("True", "Idle")
    for _ in range(SECONDS - 1):  # quiet reads: Ray's state reads the same
        clock.advance(1)
        await scaler.step(KEY)
    assert api.patches == []
    clock.advance(1)
    await scaler.step(KEY)  # the clock ran out: a full round, whatever the GCS poll says
    assert api.patches == [SUSPEND]
    ((type_, reason, message),) = [e for e in events.posted if e[1].startswith("Idle")]
    assert (type_, reason) == ("Normal", "IdleSuspended")
    assert message.startswith(f"idle for {SECONDS}s (since 2026-01-01T01:00:00Z: no live driver")
    done = idle_condition(api)
    assert done is not None
    assert (done["status"], done["reason"], done["message"]) == ("True", "IdleSuspended", message)


async def test_a_live_driver_keeps_it_and_its_end_starts_the_clock(api: Api) -> None:
    events, clock = Events(), LoopClock()
    scaler = autoscaler(Source(opted_in(rc(group("a", replicas=0)))), events, clock, poll=1)
    Jobs.jobs = [driver(dead=False)]
    await run_for(scaler, clock, 10 * SECONDS)
    assert api.patches == []
    busy = idle_condition(api)
    assert busy is not None
    assert (busy["status"], busy["message"]) == ("False", "the cluster has work: 1 live driver(s) (ray.init)")
    # the driver's end moves nothing in Ray's resource state: the jobs are looked at every interval
    Jobs.jobs = [driver(dead=True)]
    ended_by = clock.now()
    await run_for(scaler, clock, 5 + SECONDS)
    assert api.patches == [SUSPEND]
    ((_, _, message),) = [e for e in events.posted if e[1] == "IdleSuspended"]
    since = message.split("(since ", 1)[1][:20]
    assert since >= ended_by.strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_a_refused_suspension_is_decided_again(api: Api) -> None:
    events, clock = Events(), LoopClock()
    scaler = autoscaler(Source(opted_in(rc(group("a", replicas=0)))), events, clock)
    await scaler.step(KEY)
    clock.advance(SECONDS)
    api.conflicts = 1  # the generation test fails: the spec changed since the round read it
    assert await scaler.step(KEY) == 5  # tried again an interval later, not at once
    assert api.patches == [SUSPEND]
    assert [e for e in events.posted if e[1] == "IdleSuspended"] == []
    clock.advance(5)
    await scaler.step(KEY)
    assert api.patches == [SUSPEND, SUSPEND]
    assert len([e for e in events.posted if e[1] == "IdleSuspended"]) == 1


async def test_unanswered_jobs_or_a_request_keep_it(api: Api) -> None:
    clock = LoopClock()
    source = Source(opted_in(rc(group("a", replicas=0))))
    scaler = autoscaler(source, Events(), clock)
    Jobs.fail = True
    await run_for(scaler, clock, 3 * SECONDS)
    unknown = idle_condition(api)
    assert unknown is not None
    assert (unknown["status"], unknown["reason"]) == ("Unknown", "RayUnreachable")
    Jobs.fail = False
    source._requests = [rrr(0)]  # a RayResourceRequest names the cluster (even an empty one)
    await run_for(scaler, clock, 3 * SECONDS)
    assert api.patches == []
    busy = idle_condition(api)
    assert busy is not None
    assert busy["message"] == "the cluster has work: 1 RayResourceRequest(s)"
    assert "GetAllJobInfo" in FakeGcs.calls


async def test_a_cluster_not_autoscaled_is_deleted_with_its_condition_alone(
    api: Api, deletes: Deletes
) -> None:
    events, clock = Events(), LoopClock()
    scaler = autoscaler(Source(to_delete()), events, clock)
    assert await scaler.step(KEY) == 5  # looked at every interval
    assert api.cluster_statuses[-1] == {"autoscaler": {"conditions": [idle_condition(api)]}}
    clock.advance(SECONDS)
    await scaler.step(KEY)
    # the DELETE names the object the decision read, unchanged
    assert deletes.sent == [(KEY, {"uid": "uid-1", "resourceVersion": "7"})]
    assert [e[1] for e in events.posted] == ["IdleDeleted"]
    assert api.patches == []  # not autoscaled: no patch of replicas


async def test_a_bad_annotation_warns_once_and_touches_nothing(api: Api) -> None:
    events, clock = Events(), LoopClock()
    body = opted_in(rc(group("a", replicas=0)))
    body["metadata"]["annotations"]["rayscale.io/idle-termination-seconds"] = "soon"
    scaler = autoscaler(Source(body), events, clock)
    for _ in range(3):
        await scaler.step(KEY)
        clock.advance(SECONDS)
    warnings = [e for e in events.posted if e[1] == "InvalidIdleTermination"]
    assert len(warnings) == 1
    assert warnings[0][0] == "Warning"
    bad = idle_condition(api)
    assert bad is not None
    assert (bad["status"], bad["reason"]) == ("False", "InvalidAnnotation")
    assert api.patches == []
    assert "GetAllJobInfo" not in FakeGcs.calls


async def test_a_delete_whose_object_changed_is_decided_again(api: Api, deletes: Deletes) -> None:
    """The API server refuses the DELETE (409) when the cluster changed since the decision read it
    (re-annotated, recreated): nothing is deleted, and it is decided again an interval later."""
    deletes.refusals = [ops.KubeError("Precondition failed: ResourceVersion in precondition: 7", 409)]
    events, clock = Events(), LoopClock()
    scaler = autoscaler(Source(to_delete()), events, clock)
    await scaler.step(KEY)
    clock.advance(SECONDS)
    assert await scaler.step(KEY) == 5
    assert deletes.sent == []
    assert [e for e in events.posted if e[1] == "IdleDeleted"] == []
    waiting = idle_condition(api)
    assert waiting is not None
    assert (waiting["status"], waiting["reason"]) == ("True", "Idle")
    clock.advance(5)
    await scaler.step(KEY)
    assert deletes.sent == [(KEY, {"uid": "uid-1", "resourceVersion": "7"})]
    assert [e[1] for e in events.posted] == ["IdleDeleted"]


async def test_a_rayjobs_cluster_waits_for_its_job_to_end(api: Api) -> None:
    """Between its head being ready and its job's submission a RayJob's cluster has no work: no
    clock then. Once the job's submission has ended, the clock runs and the cluster ends."""
    events, clock = Events(), LoopClock()
    body = opted_in(rc(group("a", replicas=0)))
    body["metadata"]["labels"] = {
        "ray.io/originated-from-crd": "RayJob",
        "ray.io/originated-from-cr-name": "job",
    }
    scaler = autoscaler(Source(body), events, clock)
    await run_for(scaler, clock, 3 * SECONDS)
    assert api.patches == []
    waiting = idle_condition(api)
    assert waiting is not None
    assert (waiting["status"], waiting["reason"]) == ("False", "AwaitingJob")
    ended = clock.now()
    Jobs.submissions = {"job-x": ray.SubmissionInfo("SUCCEEDED", "python x.py", end_time_ms=0)}
    await run_for(scaler, clock, 5 + SECONDS)
    assert api.patches == [SUSPEND]
    ((_, _, message),) = [e for e in events.posted if e[1] == "IdleSuspended"]
    assert message.split("(since ", 1)[1][:20] >= ended.strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_a_cluster_deleted_by_someone_else_is_not_said_to_be_deleted_by_rayscale(
    api: Api, deletes: Deletes
) -> None:
    events, clock = Events(), LoopClock()
    scaler = autoscaler(Source(to_delete()), events, clock)
    await scaler.step(KEY)
    clock.advance(SECONDS)
    deletes.gone = True
    await scaler.step(KEY)
    assert len(deletes.sent) == 1
    assert [e for e in events.posted if e[1] == "IdleDeleted"] == []
    condition = idle_condition(api)
    assert condition is not None
    assert condition["reason"] != "IdleDeleted"
