"""One GCS connection per cluster: the RayJob controller reads its job submissions on the client the
autoscaler's rounds dialed for that cluster (`GcsLink.lend`), and dials one of its own only when the
autoscaler holds none for the same address (``--mode controller``, a cluster it does not take, or
before its first round), closing it once the autoscaler's serves.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.builders import cluster, group, rc
from tests.support.fakes import KEY, FakeApi, FakeGcs, FakeSource, autoscaler, gcs_state

from rayscale.autoscaler import gcs_link
from rayscale.ray import client as ray_client
from rayscale.ray import model as ray
from rayscale.rayjob.plan import Submission
from rayscale.rayjob.ray_link import RayJobRay

OVERRIDE = "127.0.0.1:16379"


class JobsGcs(FakeGcs):
    """The fake GCS with Ray's job-submission records; every client made is kept, with whether it
    was closed."""

    made: list[JobsGcs] = []
    records: dict[str, ray.SubmissionInfo] = {}

    def __init__(self, address: str, *, token: str | None = None, **kwargs: Any) -> None:
        super().__init__(address, token=token, **kwargs)
        self.closed = False
        self.reads: list[str] = []
        JobsGcs.made.append(self)

    async def get_submission(self, submission_id: str) -> ray.SubmissionInfo | None:
        self.reads.append(submission_id)
        return JobsGcs.records.get(submission_id)

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
def gcs(monkeypatch: pytest.MonkeyPatch) -> type[JobsGcs]:
    """The autoscaler's and the RayJob link's clients are both `JobsGcs` (counted in `made`)."""
    FakeApi(monkeypatch)  # fakes the API writes, resets FakeGcs
    monkeypatch.setattr(gcs_link, "connect", JobsGcs)
    monkeypatch.setattr(ray_client, "GcsClient", JobsGcs)
    JobsGcs.made = []
    JobsGcs.records = {"job-1": ray.SubmissionInfo("RUNNING", "python x.py", start_time_ms=5)}
    FakeGcs.state = gcs_state()
    return JobsGcs


async def test_one_connection_serves_the_autoscaler_and_the_rayjob_controller(gcs: type[JobsGcs]) -> None:
    body = rc(group("a", replicas=0))
    scaler = autoscaler(FakeSource(body))
    await scaler.step(KEY)
    assert len(gcs.made) == 1  # the round dialed the cluster's GCS
    link = RayJobRay(None, shared=scaler.link)

    assert await link.submission(body, "job-1") == Submission("RUNNING", start_time_ms=5)
    assert await link.submission(body, "job-2") is None
    await scaler.step(KEY)

    assert len(gcs.made) == 1  # no second connection, for either
    (only,) = gcs.made
    assert only.reads == ["job-1", "job-2"]
    assert "GetClusterResourceState" in FakeGcs.calls
    assert not only.closed


async def test_without_the_autoscaler_the_link_dials_its_own_once(gcs: type[JobsGcs]) -> None:
    body = rc(group("a", replicas=0))
    link = RayJobRay(None)  # --mode controller

    for _ in range(3):
        assert await link.submission(body, "job-1") == Submission("RUNNING", start_time_ms=5)

    assert [c.address for c in gcs.made] == ["rc-head-svc.ns.svc.cluster.local:6379"]
    await link.close()
    assert gcs.made[0].closed


async def test_a_cluster_the_autoscaler_does_not_take_is_read_on_the_links_own(gcs: type[JobsGcs]) -> None:
    body = cluster(group("a", replicas=0), autoscaling=False)
    scaler = autoscaler(FakeSource(body))
    await scaler.step(KEY)
    assert gcs.made == []  # not autoscaled: the rounds hold no connection
    link = RayJobRay(None, shared=scaler.link)

    assert await link.submission(body, "job-1") is not None

    assert len(gcs.made) == 1
    assert gcs.made[0].reads == ["job-1"]


async def test_the_links_own_client_is_closed_once_the_autoscalers_serves(gcs: type[JobsGcs]) -> None:
    body = rc(group("a", replicas=0))
    scaler = autoscaler(FakeSource(body))
    link = RayJobRay(None, shared=scaler.link)
    await link.submission(body, "job-1")  # before the autoscaler's first round: its own
    own = gcs.made[0]

    await scaler.step(KEY)
    await link.submission(body, "job-1")

    rounds = gcs.made[1]
    assert (own.reads, rounds.reads) == (["job-1"], ["job-1"])
    assert own.closed
    assert not rounds.closed
    assert len(gcs.made) == 2


@pytest.mark.parametrize("allowed", [True, False])
async def test_the_override_annotation_is_followed_alike(gcs: type[JobsGcs], allowed: bool) -> None:
    """The autoscaler and the link resolve the address the same way: with the flag, both go to the
    annotation; without it, both to the head Service; either way one connection."""
    body = rc(group("a", replicas=0))
    body["metadata"]["annotations"] = {"rayscale.io/gcs-address": OVERRIDE}
    scaler = autoscaler(FakeSource(body), allow_override=allowed)
    await scaler.step(KEY)
    link = RayJobRay(None, allow_gcs_address_override=allowed, shared=scaler.link)

    assert await link.submission(body, "job-1") is not None

    expected = OVERRIDE if allowed else "rc-head-svc.ns.svc.cluster.local:6379"
    assert [(c.address, c.reads) for c in gcs.made] == [(expected, ["job-1"])]


async def test_a_moved_address_is_not_read_on_the_old_connection(gcs: type[JobsGcs]) -> None:
    """The annotation changed since the last round: the link does not read the old GCS."""
    body = rc(group("a", replicas=0))
    scaler = autoscaler(FakeSource(body), allow_override=True)
    await scaler.step(KEY)
    link = RayJobRay(None, allow_gcs_address_override=True, shared=scaler.link)
    moved = {**body, "metadata": {**body["metadata"], "annotations": {"rayscale.io/gcs-address": OVERRIDE}}}

    await link.submission(moved, "job-1")

    assert [(c.address, c.reads) for c in gcs.made] == [
        ("rc-head-svc.ns.svc.cluster.local:6379", []),
        (OVERRIDE, ["job-1"]),
    ]
